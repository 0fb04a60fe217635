// The watch of the real directory under the mount (fanotify: native/underneath.c). Processes
// whose cwd or descriptors were inside the directory before the mount write past cpfs; this
// keeps every real file's content before such a process opens it, and records what they
// changed in the head turn, with who changed it (session/underneath.ts says how).
//
// Every directory of the real tree gets an inode mark, placed in the background after the
// mount is up (a tree of 2,000 directories takes a moment; a directory made underneath is
// marked when its creation is heard, and what was made in it meanwhile is recorded then).
// Root only: fanotify's permission events need CAP_SYS_ADMIN. Where the watch cannot run, the
// mount says so once and works as before (outside edits are then found by fingerprints when
// a plan runs, and refused, as documented).
import * as fs from 'node:fs'
import { native, type UnderneathEvent, type UnderneathHandle } from '../native/index.js'
import { depth, join } from '../paths/paths.js'
import { keepBeforeOpen, keepMoved, noteMade } from '../session/underneath.js'
import { underneathOps, type UnderneathWrite, type WatchInfo, type WatchStatus } from '../store/underneath.js'
import { absorbOutsideChanges, type Absorbed } from '../plans/absorb.js'
import { lstatReal } from '../real/read.js'
import { fingerprintDrift } from '../store/fingerprints.js'
import type { Session } from '../session/session.js'

// fanotify event bits (fanotify(7)).
const FAN_MODIFY = 0x2
const FAN_ATTRIB = 0x4
const FAN_CLOSE_WRITE = 0x8
const FAN_MOVED_FROM = 0x40
const FAN_MOVED_TO = 0x80
const FAN_CREATE = 0x100
const FAN_DELETE = 0x200
const FAN_ONDIR = 0x40000000

/**
 * A held open goes on after this long even if its file is not kept yet: a stalled daemon must
 * not hang the processes underneath for ever (the record then says the original was not kept).
 */
const HOLD_MS = 5000
/** Changes to one path are recorded once it has been quiet this long: a file written in many writes is read once. */
const SETTLE_MS = 30
/** Changes heard are recorded at least this often, and once this many paths wait. */
const MAX_WAIT_MS = 500
const MAX_PENDING = 2000
/** Directories marked between two turns of the event loop while the tree is walked. */
const MARK_SLICE = 256

/** The watch can run: root (fanotify's permission events need CAP_SYS_ADMIN), and not turned off. */
export function watchWanted (): boolean {
  return process.env.CPFS_UNDERNEATH !== 'off' && process.getuid?.() === 0
}

interface Pending {
  created: boolean
  pid: number
  /** A directory (FAN_ONDIR): what the mount remembers below it is forgotten too. */
  dir: boolean
}

export class Underneath {
  private readonly dirs = new Map<string, string>() // directory handle (hex) → path ('/' the root)
  /** The turn (layer) holding what this watch recorded, extended while it can be. */
  private layer: number | undefined
  /** Commands that made changes underneath, for the turn's message. */
  private readonly by = new Set<string>()
  private readonly pending = new Map<string, Pending>()
  private timer: NodeJS.Timeout | null = null
  private chain: Promise<void> = Promise.resolve()
  private readonly commands = new Map<number, string>()
  private seq = Date.now() * 1000
  private stopped = false
  private walkDone = false
  private recorded = 0
  private notKept = 0
  private missed = false
  private readonly since = Date.now()

  private constructor (
    private readonly handle: UnderneathHandle,
    private readonly session: Session,
    private readonly workspace: string,
    private readonly dirFd: number,
    /** Runs a change of the view with the kernel's caches invalidated after it (daemon.ts). */
    private readonly changingView: (fn: () => Promise<void>) => Promise<void>
  ) {}

  /**
   * Starts the watch, or says in one line why it cannot run. `own`: dirFd is the daemon's
   * private clone of the real directory's mount (daemon.ts ownWayDown), whose opens need no event.
   */
  static start (session: Session, workspace: string, dirFd: number, own: boolean, changingView: (fn: () => Promise<void>) => Promise<void>): Underneath | WatchInfo {
    if (process.env.CPFS_UNDERNEATH === 'off') return { state: 'off', why: 'CPFS_UNDERNEATH=off: writes made underneath the mount are not watched' }
    if (!watchWanted()) return { state: 'off', why: 'not root: writes made underneath the mount (by processes that were in the directory before it) are not watched; cpfs finds them when the session ends and refuses to overwrite them' }
    let self: Underneath | null = null
    let handle: UnderneathHandle
    try {
      handle = native.underneathStart(() => self?.drain(), HOLD_MS)
    } catch (err: any) {
      return { state: 'off', why: `fanotify is unavailable (${err?.code ?? err}): writes made underneath the mount are not watched; cpfs finds them when the session ends and refuses to overwrite them` }
    }
    self = new Underneath(handle, session, workspace, dirFd, changingView)
    if (own) {
      try {
        native.underneathIgnoreMount(handle, dirFd)
      } catch (err: any) {
        process.stderr.write(`cpfs daemon: the daemon's own opens of real files each raise an event (${err?.message ?? err})\n`)
      }
    }
    void self.walk('/')
    return self
  }

  status (): WatchStatus {
    return { state: 'watching', dirs: this.dirs.size, marked: this.walkDone, recorded: this.recorded, notKept: this.notKept, missed: this.missed }
  }

  /** Mark directory p and every directory below it (breadth first, a slice per turn of the event loop). */
  private async walk (top: string, created = false): Promise<void> {
    const queue = [top]
    for (let i = 0; i < queue.length && !this.stopped; i++) {
      if (i % MARK_SLICE === MARK_SLICE - 1) await new Promise(resolve => setImmediate(resolve))
      const p = queue[i]
      let fd: number
      try {
        fd = native.openDirBeneath(this.dirFd, p === '/' ? '' : p.slice(1))
      } catch {
        continue // gone, or a symlink now: nothing to mark there
      }
      try {
        this.dirs.set(native.underneathMark(this.handle, fd, ''), p)
        for (const d of fs.readdirSync(`/proc/self/fd/${fd}`, { withFileTypes: true })) {
          if (d.isDirectory()) queue.push(join(p, d.name))
          // Made in a new directory before its mark was there: no event will tell.
          else if (created) this.note(join(p, d.name), true, 0)
        }
      } catch (err: any) {
        if (err?.code !== 'ENOENT' && err?.code !== 'ENOTDIR') process.stderr.write(`cpfs daemon: ${new Date().toISOString()} cannot watch ${p} underneath the mount: ${err?.message ?? err}\n`)
      } finally {
        fs.closeSync(fd)
      }
      if (created && p !== top) this.note(p, true, 0, true)
    }
    if (top === '/') this.walkDone = true
  }

  private drain (): void {
    if (this.stopped) return
    let events: UnderneathEvent[]
    try {
      events = native.underneathDrain(this.handle)
    } catch {
      return
    }
    for (const ev of events) {
      if (ev.kind === 'open') this.onOpen(ev)
      else if (ev.kind === 'change') this.onChange(ev)
      else if (ev.kind === 'rename') this.onRename(ev)
      else if (ev.kind === 'overflow') {
        if (!this.missed) process.stderr.write(`cpfs daemon: ${new Date().toISOString()} too many changes underneath the mount at once: some were not heard (the session's end still finds them by fingerprint)\n`)
        this.missed = true
      }
    }
  }

  /** Keep the file's content before the process opens it; let the open go on either way. */
  private onOpen (ev: UnderneathEvent): void {
    const path = ev.path ?? ''
    if (!path.startsWith(this.workspace + '/')) {
      native.underneathAllow(this.handle, ev.id)
      return
    }
    const p = path.slice(this.workspace.length)
    this.commandOf(ev.pid)
    this.chain = this.chain.then(async () => {
      try {
        await keepBeforeOpen(this.session, p, this.since)
      } catch (err: any) {
        process.stderr.write(`cpfs daemon: ${new Date().toISOString()} cannot keep ${p.slice(1)} before pid ${ev.pid} opened it underneath the mount: ${err?.message ?? err}\n`)
      } finally {
        native.underneathAllow(this.handle, ev.id)
      }
    })
  }

  private onChange (ev: UnderneathEvent): void {
    const dir = this.dirs.get(ev.dir ?? '')
    if (dir === undefined || ev.name === undefined) return // not a directory of this tree
    const p = ev.name === '.' ? dir : join(dir, ev.name)
    // Only a name created here is new: a name moved in holds what was somewhere else before,
    // and a rewind must never remove what it cannot put back where it was.
    const made = (ev.mask & FAN_CREATE) !== 0
    // A directory made (its files are new too) or moved in (its paths changed): marked again.
    if ((ev.mask & FAN_ONDIR) && (ev.mask & (FAN_CREATE | FAN_MOVED_TO))) void this.walk(p, made)
    // Gone before cpfs had its content: a name made there again later is not "new" either
    // (git checkout removes and writes files it never opens: the new file is all that is left).
    if ((ev.mask & (FAN_DELETE | FAN_MOVED_FROM)) && this.session.lower.servedByReal(p) && !this.session.capture.fingerprints.has(p)) this.lost.add(p)
    if (ev.mask & (FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_CREATE | FAN_DELETE)) this.note(p, made, ev.pid, (ev.mask & FAN_ONDIR) !== 0)
  }

  /**
   * Both names of a file moved underneath (the moves themselves also come as changes): one
   * cpfs had not kept is kept from its new place, so a rewind can put it back (keepMoved).
   */
  private onRename (ev: UnderneathEvent): void {
    const fromDir = this.dirs.get(ev.dir ?? '')
    const toDir = this.dirs.get(ev.dir2 ?? '')
    if (fromDir === undefined || toDir === undefined || ev.name === undefined || ev.name2 === undefined || (ev.mask & FAN_ONDIR)) return
    const from = join(fromDir, ev.name)
    const to = join(toDir, ev.name2)
    this.chain = this.chain.then(async () => {
      try {
        if (!await keepMoved(this.session, from, to, this.since)) return
        this.lost.delete(from)
        this.note(to, true, ev.pid)
      } catch (err: any) {
        process.stderr.write(`cpfs daemon: ${new Date().toISOString()} cannot keep ${from.slice(1)}, moved underneath the mount to ${to.slice(1)}: ${err?.message ?? err}\n`)
      }
    })
  }

  /** Paths removed underneath before cpfs had their content (see onChange). */
  private readonly lost = new Set<string>()

  private note (p: string, created: boolean, pid: number, dir = false): void {
    const was = this.pending.get(p)
    this.pending.set(p, { created: created || (was?.created ?? false), pid: pid || (was?.pid ?? 0), dir: dir || (was?.dir ?? false) })
    if (pid) this.commandOf(pid)
    // A writer that never pauses is recorded anyway, at most every MAX_WAIT_MS or
    // MAX_PENDING paths: what is pending is bounded.
    this.firstPending ??= Date.now()
    if (Date.now() - this.firstPending >= MAX_WAIT_MS || this.pending.size >= MAX_PENDING) {
      void this.flush()
      return
    }
    if (this.timer) clearTimeout(this.timer)
    this.timer = setTimeout(() => {
      this.timer = null
      void this.flush()
    }, SETTLE_MS)
  }

  private firstPending: number | null = null

  /** Record what is pending; resolves once it is in the head turn. */
  flush (): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer)
      this.timer = null
    }
    const batch = [...this.pending]
    this.pending.clear()
    this.firstPending = null
    if (batch.length === 0) return this.chain
    // Parents before children: a new directory is in the head before what was made in it.
    batch.sort((a, b) => depth(a[0]) - depth(b[0]) || (a[0] < b[0] ? -1 : 1))
    this.chain = this.chain.then(() => this.record(batch)).catch((err: any) => {
      process.stderr.write(`cpfs daemon: ${new Date().toISOString()} cannot store the record of changes made underneath the mount: ${err?.message ?? err}\n`)
    })
    return this.chain
  }

  private async record (batch: Array<[string, Pending]>): Promise<void> {
    const session = this.session
    const lower = session.lower
    const before = new Map<string, boolean>()
    const made = new Set<string>()
    for (const [p, { created }] of batch) {
      if (created && !session.capture.fingerprints.has(p) && !this.lost.has(p)) made.add(p)
      // Kept: read before the change (an open), or nothing was there (made underneath).
      before.set(p, !lower.servedByReal(p) || made.has(p))
      if (made.has(p)) noteMade(session, p)
    }
    const paths = new Set(batch.map(([p]) => p))
    for (const [, { pid }] of batch) if (this.commands.get(pid)) this.by.add(this.commands.get(pid)!.split(' ')[0].split('/').pop()!)
    let absorbed: Absorbed | null = null
    await this.changingView(async () => {
      // What the mount remembers of every path heard, recorded or not (a name moved in stays
      // out of the history but is there): its cached stats, and below, the kernel's caches.
      for (const [p, { dir }] of batch) lower.forget(p, dir)
      absorbed = await absorbOutsideChanges(session, { only: p => paths.has(p), live: { message: this.message(), into: this.layer } })
      session.onViewChange?.(new Set([...paths, ...(absorbed ? (absorbed as Absorbed).paths : [])]))
    })
    const turn = (absorbed as Absorbed | null)?.turn
    if (absorbed) this.layer = (absorbed as Absorbed).layer
    const writes: UnderneathWrite[] = []
    for (const [p, { pid }] of batch) {
      const st = lstatReal(lower, p)
      const f = session.capture.fingerprints.get(p)
      const conflict = f !== undefined && fingerprintDrift(f, st) !== null
      const what = st.type === null || st.blockedBy ? 'deleted' : made.has(p) ? 'created' : 'changed'
      if (what === 'deleted' && made.has(p)) continue // made and gone again: a temporary file
      writes.push({ path: p.slice(1), what, pid, command: this.commands.get(pid) ?? '', at: Date.now(), kept: before.get(p)!, ...(conflict ? { conflict: true as const } : {}), ...(turn ? { turn } : {}) })
    }
    for (const w of writes) {
      this.recorded++
      if (!w.kept) this.notKept++
      const by = `pid ${w.pid} (${w.command ? w.command.slice(0, 60) : 'ended before cpfs could read its command line'})`
      const how = w.conflict
        ? ': the session changed it too, so the mount keeps its version and the next unmount refuses until you choose (--force keeps both in the history)'
        : `${turn ? `: recorded in turn ${turn}` : ''}${w.kept ? '' : '; its earlier content was not kept (changed without an open cpfs could hold, or through a descriptor opened before the watch)'}`
      process.stderr.write(`cpfs daemon: ${new Date().toISOString()} ${w.path} ${w.what} underneath the mount by ${by}${how}\n`)
    }
    if (writes.length) await session.persister.storeNow(underneathOps(this.layer ?? session.headLayer, this.seq, writes))
    this.seq += writes.length
  }

  /** The message of the turn that holds the changes made underneath. */
  private message (): string {
    const by = [...this.by].slice(0, 5).join(', ')
    return `changes made underneath the mount${by ? ` by ${by}` : ''}`
  }

  /** The process's command line, read while it still runs (cached: one process makes many changes). */
  private commandOf (pid: number): void {
    if (pid <= 0 || this.commands.has(pid)) return
    if (this.commands.size > 4096) this.commands.clear()
    let cmd = ''
    try {
      cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ').slice(0, 200)
    } catch {}
    this.commands.set(pid, cmd)
  }

  /** The mount is going away: record what is pending, then stop (held opens go on). */
  async stop (): Promise<void> {
    if (this.stopped) return
    this.drain()
    await this.flush()
    this.stopped = true
    native.underneathStop(this.handle)
  }
}
