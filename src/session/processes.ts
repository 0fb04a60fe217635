// The processes that change files in the mount, as the history records them (issue 22): each
// FUSE request carries the caller's thread id; this reads /proc once for each process it has
// not met yet and gives it an id that stays the same across batches and daemons, and never
// names two processes (a pid reused later is another process: the id holds its start time
// and the boot it started in). A process record holds its command line and its parent's id,
// so that a change can be traced up through the shell and the tool that ran it to the agent.
import * as fs from 'node:fs'

/** How many ancestors of a process are recorded (its parent, the parent's parent...). */
export const PARENT_DEPTH = 8
/** A command line is cut to this many characters (a generated `sed` script can be long). */
const COMMAND_MAX = 500

/** One process as the store records it (`p<id>` records, store/keys.ts). */
export interface ProcessRecord {
  pid: number
  /** Its user (real uid). */
  uid: number
  /** When it started (ms since the epoch). */
  started: number
  /** Its command line, arguments joined by spaces (cut to 500 characters); its name in [] when it has none (a kernel thread). */
  command: string
  /** Its parent's id, or null (pid 1, or past PARENT_DEPTH ancestors, or gone). */
  parent: string | null
}

interface Stat {
  tgid: number
  ppid: number
  uid: number
  name: string
  /** Start time, in clock ticks since boot. */
  start: number
}

/** The kernel's clock ticks per second for /proc/<pid>/stat's start time (USER_HZ: 100 on Linux). */
const TICKS = 100

/** What /proc says of thread or process `pid`, or null when it is gone. */
function readStat (pid: number): Stat | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'latin1')
    const field = (name: string): string => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(status)?.[1] ?? ''
    const tgid = Number(field('Tgid'))
    // The process's start (its thread group leader's), not the thread's: one id per process.
    const stat = fs.readFileSync(`/proc/${tgid}/stat`, 'latin1')
    // Fields after the name, which is in parentheses and may hold anything, spaces included.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { tgid, ppid: Number(field('PPid')), uid: Number(field('Uid').split(/\s+/)[0]), name: field('Name'), start: Number(rest[19]) }
  } catch {
    return null
  }
}

function readCommand (pid: number, name: string): string {
  try {
    const raw = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1')
    const args = raw.split('\0')
    if (args[args.length - 1] === '') args.pop()
    const line = args.join(' ')
    if (line !== '') return line.length > COMMAND_MAX ? line.slice(0, COMMAND_MAX - 1) + '…' : line
  } catch {}
  return `[${name}]`
}

/** Clock ticks since boot now (/proc/uptime): the clock of processes' start times, for steps. */
export function uptimeTicks (): number {
  try {
    return Math.floor(Number(fs.readFileSync('/proc/uptime', 'latin1').split(' ')[0]) * TICKS)
  } catch {
    return 0
  }
}

/** A process id's parts: the boot it ran in, its pid and its start (clock ticks since boot). */
export function parseProcessId (id: string): { boot: string, pid: number, start: number } | null {
  const m = /^([^.]+)\.(\d+)\.(\d+)$/.exec(id)
  return m ? { boot: m[1], pid: Number(m[2]), start: Number(m[3]) } : null
}

/** Is the process with this id still running (same pid, same start)? */
export function isRunning (id: string): boolean {
  const p = parseProcessId(id)
  if (!p) return false
  try {
    const stat = fs.readFileSync(`/proc/${p.pid}/stat`, 'latin1')
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return rest[0] !== 'Z' && Number(rest[19]) === p.start
  } catch {
    return false
  }
}

/**
 * Processes running now that were started between clock ticks `from` and `to` under process
 * `owner` (its pid), or orphaned (their parent exited): what a step left running in the
 * background. cpfs's own hook and step commands are not counted.
 */
export function runningStartedBy (owner: number, from: number, to: number): Array<{ pid: number, command: string }> {
  const out: Array<{ pid: number, command: string }> = []
  let pids: string[]
  try {
    pids = fs.readdirSync('/proc').filter(n => /^\d+$/.test(n))
  } catch {
    return out
  }
  const parentOf = new Map<number, number>()
  const stat = (pid: number): { ppid: number, start: number, zombie: boolean } | null => {
    try {
      const raw = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
      const rest = raw.slice(raw.lastIndexOf(')') + 2).split(' ')
      return { ppid: Number(rest[1]), start: Number(rest[19]), zombie: rest[0] === 'Z' }
    } catch {
      return null
    }
  }
  for (const name of pids) {
    const pid = Number(name)
    const st = stat(pid)
    if (!st || st.zombie || st.start < from || st.start > to || pid === process.pid) continue
    let up = st.ppid
    let under = up === 1
    for (let depth = 0; depth < 32 && up > 1 && !under; depth++) {
      if (up === owner) under = true
      else {
        let next = parentOf.get(up)
        if (next === undefined) {
          next = stat(up)?.ppid ?? 0
          parentOf.set(up, next)
        }
        up = next
      }
    }
    if (!under) continue
    const command = readCommand(pid, '?')
    if (/\bcpfs\b.*\b(hook|step)\b/.test(command)) continue
    out.push({ pid, command })
  }
  return out
}

/** This boot's id, shortened: with a pid and a start time it names a process for good. */
function bootTag (): string {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').replace(/-/g, '').slice(0, 8)
  } catch {
    return '0'
  }
}

/** Boot time (ms since the epoch), for start times. */
function bootTime (): number {
  try {
    return Number(/^btime (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'latin1'))?.[1] ?? 0) * 1000
  } catch {
    return 0
  }
}

export class Processes {
  private readonly boot = bootTag()
  private readonly bootMs = bootTime()
  /**
   * Process ids whose record was handed out lately. Only a dedupe (a record put twice is the
   * same record), so it is emptied past MET_KEPT: a `find -exec sed` over 100,000 files is
   * 100,000 processes.
   */
  private readonly met = new Set<string>()
  /** Thread id → process id, for a second at most (idOf). */
  private byThread = new Map<number, string>()
  /** Records of processes met since the last `take`. */
  private fresh: Array<[string, ProcessRecord]> = []

  /**
   * The id of the process thread `tid` belongs to (null: it is gone, or tid is 0). A thread
   * id's process is looked up again once a second: a pid is reused only after the kernel has
   * handed out all the others (pid_max), never within a second of its process's last request
   * here, while a look-up per request would read /proc at every create of an `npm ci`.
   */
  idOf (tid: number): string | null {
    if (tid <= 0) return null
    const now = Date.now()
    if (now - this.lookedUpSince >= RELOOK_MS) {
      this.byThread = new Map()
      this.lookedUpSince = now
    }
    const known = this.byThread.get(tid)
    if (known !== undefined) return known
    const st = readStat(tid)
    if (!st) return null
    const id = this.intern(st, 0)
    this.byThread.set(tid, id)
    return id
  }

  private intern (st: Stat, depth: number): string {
    const id = `${this.boot}.${st.tgid}.${st.start}`
    if (this.met.has(id)) return id
    if (this.met.size >= MET_KEPT) this.met.clear()
    this.met.add(id)
    let parent: string | null = null
    if (st.ppid > 1 && depth < PARENT_DEPTH) {
      const up = readStat(st.ppid)
      if (up) parent = this.intern(up, depth + 1)
    }
    this.fresh.push([id, {
      pid: st.tgid,
      uid: st.uid,
      started: this.bootMs + Math.round(st.start * 1000 / TICKS),
      command: readCommand(st.tgid, st.name),
      parent
    }])
    return id
  }

  /** When byThread was last emptied. */
  private lookedUpSince = Date.now()

  /** The records of processes met since the last call (they go with the batch). */
  take (): Array<[string, ProcessRecord]> {
    if (this.fresh.length === 0) return NONE
    const out = this.fresh
    this.fresh = []
    return out
  }
}

const RELOOK_MS = 1000
const MET_KEPT = 4096
const NONE: Array<[string, ProcessRecord]> = []
