// Who keeps a mount busy: every process whose current directory, root, executable, open
// files or mapped files are inside it (what fuser -vm shows), read from /proc. The CLI names
// them when an unmount is refused, and says so when one of them is the shell it runs in.
import * as fs from 'node:fs'

export interface Holder {
  pid: number
  command: string
  /** What inside the mount it holds: its cwd, or an open file. */
  what: string
  cwd: string | null
  /** The process is the caller or one of its ancestors (the shell the command was typed in). */
  caller: boolean
}

function readlink (p: string): string | null {
  try {
    return fs.readlinkSync(p)
  } catch {
    return null
  }
}

/** Same device as the mount: a path that merely looks as if it were inside (the lower directory under the mount) is not. */
function onDevice (p: string, dev: number): boolean {
  try {
    return fs.statSync(p).dev === dev
  } catch {
    return false
  }
}

function parentOf (pid: number): number {
  try {
    // /proc/PID/stat: "pid (comm) state ppid ..."; comm may contain spaces and parentheses.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return 0
  }
}

/** This process and its ancestors. */
function ancestry (): Set<number> {
  const out = new Set<number>()
  for (let p = process.pid; p > 1 && !out.has(p); p = parentOf(p)) out.add(p)
  return out
}

/**
 * The processes that hold something inside the mount at `mountPoint`, or, with `dev` the
 * device of the directory underneath (read before mounting), inside that directory: a shell
 * or an agent whose cwd was there before the mount still reaches the real files, past cpfs.
 * `except`: pids left out (the daemon, which holds the real directory on purpose).
 */
export function holdersOf (mountPoint: string, dev?: number, except: number[] = []): Holder[] {
  if (dev === undefined) {
    try {
      dev = fs.statSync(mountPoint).dev
    } catch {
      return []
    }
  }
  const inside = (p: string | null): p is string => p !== null && (p === mountPoint || p.startsWith(mountPoint + '/'))
  const mine = ancestry()
  const out: Holder[] = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const pid = Number(name)
    if (pid === process.pid || except.includes(pid)) continue // the CLI has left the mount before unmounting
    const base = `/proc/${pid}`
    const cwd = readlink(`${base}/cwd`)
    let what: string | null = null
    if (inside(cwd) && onDevice(`${base}/cwd`, dev!)) what = `cwd ${cwd}`
    else if (inside(readlink(`${base}/root`)) && onDevice(`${base}/root`, dev!)) what = 'its root'
    else if (inside(readlink(`${base}/exe`)) && onDevice(`${base}/exe`, dev!)) what = `runs ${readlink(`${base}/exe`)}`
    else {
      let fds: string[] = []
      try {
        fds = fs.readdirSync(`${base}/fd`)
      } catch {}
      for (const fd of fds) {
        const target = readlink(`${base}/fd/${fd}`)
        if (inside(target) && onDevice(`${base}/fd/${fd}`, dev!)) {
          what = `has ${target} open`
          break
        }
      }
      if (!what) {
        try {
          const maps = fs.readFileSync(`${base}/maps`, 'utf8')
          const hit = maps.split('\n').filter(l => l.includes('/')).map(l => l.slice(l.indexOf('/'))).find(p => inside(p))
          if (hit) what = `has ${hit} mapped`
        } catch {}
      }
    }
    if (!what) continue
    let command = ''
    try {
      command = fs.readFileSync(`${base}/comm`, 'utf8').trim()
    } catch {}
    out.push({ pid, command, what, cwd, caller: mine.has(pid) })
  }
  return out
}

/** One line naming the holders, the caller's shell first. */
export function describeHolders (holders: Holder[]): string {
  const sorted = [...holders].sort((a, b) => Number(b.caller) - Number(a.caller) || a.pid - b.pid)
  const shown = sorted.slice(0, 5).map(h => `pid ${h.pid} ${h.command || '?'} (${h.what})${h.caller ? ' — your shell is inside' : ''}`)
  if (sorted.length > 5) shown.push(`${sorted.length - 5} more`)
  return shown.join('; ')
}

/** What to do about the holders, said once (the list above only says who they are). */
export function busyHint (holders: Holder[], dir: string): string {
  const mine = holders.some(h => h.caller)
  const others = holders.some(h => !h.caller)
  const todo = mine && others ? `cd out of ${dir} and close the other processes` : mine ? `cd out of ${dir} first` : 'close what uses it'
  return `${todo}, then run cpfs unmount ${dir} again; nothing was changed`
}

/**
 * What `cpfs mount` says of the processes left underneath the new mount: who they are, and
 * what to do — for the caller's own shell, one line (cd again).
 */
export function underneathLines (holders: Holder[], dir: string): string[] {
  if (holders.length === 0) return []
  const lines: string[] = []
  const mine = holders.filter(h => h.caller)
  const others = holders.filter(h => !h.caller)
  if (mine.length) lines.push(`cpfs: your shell is still in the directory underneath the mount: run cd "$PWD" (or cd ${dir}) to work in the mount`)
  if (others.length) {
    lines.push(`cpfs: ${others.length === 1 ? '1 process still reaches' : `${others.length} processes still reach`} the real files underneath the mount, past cpfs: ${describeHolders(others)}`)
    lines.push('cpfs: their writes change the real directory directly; restart them from inside the mount (or cd into it again)')
  }
  return lines
}
