// The library: everything the CLI does, callable in-process by an agent host. Each function
// finds the workspace's store, then talks to the mount daemon over the control socket when
// the workspace is mounted, or opens the store itself when it is not.
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import { basename, dirname, join, resolve as resolvePath } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CpfsError, isCpfsError } from './errors.js'
import { ping } from './control/client.js'
import { callDaemon, explainTimeout, statusFromDaemon, workspacePaths } from './control/mounted.js'
import type { ReadyInfo } from './daemon/daemon.js'
import { runDaemon } from './daemon/daemon.js'
import { checkFuse, unmountPath } from './fuse/mount.js'
import { applyStack, findDrift, recover, runPlan, setAsidePlan, viewOf, type PlanSummary } from './plans/run.js'
import { cutPaths, diffTurns, logWithLines, previewRewind, type RewindPreview } from './plans/preview.js'
import { planViews } from './plans/planner.js'
import type { Change } from './plans/changes.js'
import { Session, type TurnInfo, type TurnOptions } from './session/session.js'
import { JOURNAL_KEY } from './store/keys.js'
import { isInoKey } from './store/entries.js'
import { checkStoreOutside, dirBytes, isMounted, locate, register, workspaceDir, type Location } from './store/locate.js'
import { checkDest, forkView } from './plans/fork.js'
import { keepBefore, keepDisplaced, keepRefreshed } from './plans/keep.js'
import { reserveBytes } from './config.js'
import { checkNotNested } from './workspaces.js'

export interface Target {
  /** The workspace directory (default: the current directory). */
  dir?: string
  /** The store directory, when not the default under CPFS_HOME. */
  store?: string
}

export interface StatusInfo {
  workspace: string
  mounted: boolean
  stale: boolean
  pid: number | null
  head: number | null
  turns: number
  pending: number
  redo: number
  store: string
  storeBytes: number
  /** Paths the last plan left alone because another process changed them meanwhile. */
  skipped: string[]
  /** When a write in the mount was last refused because the store's disk is below the reserve (ms). */
  spaceRefusedAt?: number
  /** Mounted: big real files whose original bytes are being read into the store. */
  capturing?: number
  /** A plan to the real directory was interrupted; the next command that changes something finishes it. */
  interrupted?: boolean
  /** Mounted: FUSE operations answered since the mount (or the last reset), time spent, and a histogram of handler times. */
  ops?: { counts: Record<string, number>, ms: Record<string, number>, hist?: number[] }
}

function where (t: Target): Location {
  return locate(t.dir ?? '.', t.store)
}

async function daemonUp (loc: Location): Promise<boolean> {
  return !loc.stale && isMounted(loc.workspace) && await pingDaemon(loc)
}

/** ping, with a daemon that does not answer explained (which pid, stopped or busy, what to do). */
async function pingDaemon (loc: Location): Promise<boolean> {
  try {
    return await ping(loc.socket)
  } catch (err) {
    throw explainTimeout(loc, err)
  }
}

/**
 * A daemon that lost its mount but still holds the store (it should have exited): stop it,
 * so that the command can go on. Returns true when one was stopped. The pid file may be stale
 * (kill -9, a crash) and its pid reused by any process: only a process proven to be this
 * workspace's daemon is signalled (daemonIdentity), and proven again before each signal.
 */
async function stopStaleDaemon (loc: Location): Promise<boolean> {
  const pidFile = join(loc.dir, 'daemon.pid')
  let pid: number
  try {
    pid = Number(fs.readFileSync(pidFile, 'utf8').trim())
  } catch {
    return false
  }
  const id = daemonIdentity(pid, loc)
  if (id === null) {
    // Gone, or the pid now names another process: the file is stale, that process is not ours.
    try { fs.unlinkSync(pidFile) } catch {}
    return false
  }
  if (isMounted(loc.workspace) && await pingDaemon(loc)) return false
  process.stderr.write(`cpfs: the daemon of ${loc.workspace} (pid ${pid}) no longer serves a mount but holds the store; stopping it\n`)
  for (const [sig, wait] of [['SIGTERM', 5000], ['SIGKILL', 2000]] as const) {
    if (daemonIdentity(pid, loc) !== id) return true
    try { process.kill(pid, sig) } catch { return true }
    for (let t = 0; t < wait; t += 50) {
      if (daemonIdentity(pid, loc) !== id) return true
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }
  return true
}

/**
 * The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22) when its
 * command line shows it is the daemon of `loc` (daemon/main.js with this workspace's state
 * directory); else null. The start time tells a reused pid from the process seen before.
 */
function daemonIdentity (pid: number, loc: Location): string | null {
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return null
  try {
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    const i = argv.findIndex(a => a.endsWith('/daemon/main.js'))
    if (i < 0 || JSON.parse(argv[i + 1] ?? 'null')?.loc?.dir !== loc.dir) return null
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

async function openSession (loc: Location, create: boolean, dirFd: number): Promise<Session> {
  try {
    return await Session.open({ storePath: loc.store, workspace: loc.workspace, dirFd, create })
  } catch (err) {
    if (!isCpfsError(err) || err.code !== 'STORE_LOCKED' || !await stopStaleDaemon(loc)) throw err
    return await Session.open({ storePath: loc.store, workspace: loc.workspace, dirFd, create })
  }
}

/**
 * Run fn on a session opened by this process (the workspace is not mounted). A plan that a
 * crash interrupted is finished first (or rolled back), except for commands that only read:
 * they must work whatever state the real directory is in, and change nothing.
 */
async function offline<T> (loc: Location, fn: (s: Session, finished: boolean) => Promise<T>, mode: 'write' | 'read' | 'discard' = 'write'): Promise<T> {
  if (loc.stale || isMounted(loc.workspace)) {
    throw new CpfsError('STALE_MOUNT', `the cpfs daemon for ${loc.workspace} is not running but its mount is still there`, `run cpfs mount ${loc.workspace} to recover it, or cpfs unmount ${loc.workspace}`)
  }
  const dirFd = fs.openSync(loc.workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  let session: Session
  try {
    session = await openSession(loc, false, dirFd)
  } catch (err) {
    fs.closeSync(dirFd)
    throw err
  }
  try {
    // discard: an interrupted plan that cannot be finished must not block leaving things as they are.
    const finished = mode === 'read' ? null : mode === 'write' ? await recover(session) : await recover(session).catch(async (err) => {
      if (await setAsidePlan(session)) process.stderr.write(`cpfs: gave up an interrupted plan that cannot be finished (${String(err?.message ?? err).split('\n')[0]}); the paths it changed count as outside changes now\n`)
      return null
    })
    if (finished) {
      process.stderr.write(`cpfs: finished a plan that was interrupted: the real directory now holds the new view (${finished.ops} operations, ${finished.verified} paths verified)\n`)
    }
    return await fn(session, finished !== null)
  } finally {
    await session.close()
    fs.closeSync(dirFd)
  }
}

async function viaDaemonOr<T> (loc: Location, cmd: string, args: Record<string, unknown>, fn: (s: Session) => Promise<T>, mode: 'write' | 'read' = 'write'): Promise<T> {
  if (await daemonUp(loc)) return await callDaemon(loc, { cmd, args }) as T
  return await offline(loc, fn, mode)
}

export interface MountOptions extends Target {
  foreground?: boolean
  allowOther?: boolean
}

/** Mount the workspace in place; resolves once the mount is live. */
export async function mount (opts: MountOptions = {}): Promise<ReadyInfo> {
  const loc = where(opts)
  checkStoreOutside(loc)
  checkNotNested(loc.workspace)
  if (!loc.stale && isMounted(loc.workspace)) {
    if (await pingDaemon(loc)) {
      const st = await callDaemon(loc, { cmd: 'status' }) as { pid: number }
      throw new CpfsError('ALREADY_MOUNTED', `${loc.workspace} is already mounted by cpfs (daemon pid ${st.pid})`, `use it as it is, or run cpfs unmount ${loc.workspace} first`)
    }
  }
  checkFuse() // fail here, with the real reason, before a daemon is started
  checkStoreSpace(loc.store)
  await stopStaleDaemon(loc)
  register(loc)
  if (opts.foreground) {
    return await new Promise<ReadyInfo>((resolve, reject) => {
      runDaemon({ loc, allowOther: Boolean(opts.allowOther) }, resolve).catch(reject)
    })
  }
  const main = join(dirname(fileURLToPath(import.meta.url)), 'daemon', 'main.js')
  const log = fs.openSync(join(loc.dir, 'daemon.log'), 'a', 0o600)
  // CPFS_DAEMON_NODE_ARGS: extra node flags for the daemon (profiling: --cpu-prof), which
  // NODE_OPTIONS does not allow.
  const nodeArgs = (process.env.CPFS_DAEMON_NODE_ARGS ?? '').split(/\s+/).filter(Boolean)
  // V8's own heap limit (about 4 GB here) stopped a session of 1,000,000 files in the middle
  // of committing its plan while the machine had 15 GB free: the daemon may use up to three
  // quarters of the machine's memory before V8 gives up.
  if (!nodeArgs.some(a => a.startsWith('--max-old-space-size'))) nodeArgs.unshift(`--max-old-space-size=${Math.floor(os.totalmem() / 1024 / 1024 * 0.75)}`)
  const child = spawn(process.execPath, [...nodeArgs, main, JSON.stringify({ loc, allowOther: Boolean(opts.allowOther) })], {
    detached: true,
    stdio: ['ignore', log, log, 'pipe'],
    cwd: '/'
  })
  fs.closeSync(log)
  const pipe = child.stdio[3] as NodeJS.ReadableStream
  const line = await new Promise<string>((resolve) => {
    let buf = ''
    pipe.setEncoding('utf8')
    pipe.on('data', (d: string) => { buf += d })
    pipe.on('end', () => resolve(buf))
    pipe.on('error', () => resolve(buf))
  })
  child.unref()
  let msg: any
  try {
    msg = JSON.parse(line.trim().split('\n')[0])
  } catch {
    throw new CpfsError('DAEMON_FAILED', 'the cpfs daemon exited before the mount was ready', `see ${join(loc.dir, 'daemon.log')}`)
  }
  if (msg.error) throw new CpfsError(msg.error.code, msg.error.message, msg.error.hint)
  return msg.ready as ReadyInfo
}

/** Refuse to mount when the store's disk is already below the reserve: every write would fail. */
function checkStoreSpace (store: string): void {
  let dir = store
  while (!fs.existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir)
  const st = fs.statfsSync(dir)
  const free = st.bavail * st.bsize
  const reserve = reserveBytes()
  if (free < reserve) {
    throw new CpfsError('STORE_FULL', `the store's disk has ${humanBytes(free)} free, less than the ${humanBytes(reserve)} cpfs keeps in reserve (store: ${store})`, 'free space there, move the store (--store or CPFS_HOME), or lower the reserve (CPFS_RESERVE_BYTES or "reserve" in config.json)')
  }
}

function humanBytes (n: number): string {
  return n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : n >= 1024 ** 2 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : `${Math.round(n / 1024)} KiB`
}

export interface UnmountResult {
  applied: boolean
  summary: PlanSummary | null
  /** With --discard: turns set aside (cpfs redo brings them back until the next write). */
  discarded?: number
  /**
   * Set when no daemon served the workspace: 'stale' (a mount whose daemon was gone, now
   * removed) or 'offline' (not mounted). The pending turns (a daemon stopped without applying)
   * were then applied, or set aside with --discard; `pending` says how many.
   */
  notMounted?: 'stale' | 'offline'
  pending?: number
}

/**
 * Flush, unmount, then apply the head view to the real directory (verified) unless discard.
 * Not mounted: the turns a stopped daemon left unapplied are applied (or set aside); with none,
 * and no interrupted plan to finish, there is nothing to do and it says so (NOT_MOUNTED).
 */
export async function unmount (opts: Target & { discard?: boolean, force?: boolean } = {}): Promise<UnmountResult> {
  const loc = where(opts)
  if (await daemonUp(loc)) {
    return await callDaemon(loc, { cmd: 'unmount', args: { discard: Boolean(opts.discard), force: Boolean(opts.force) } }) as UnmountResult
  }
  const stale = loc.stale || isMounted(loc.workspace)
  if (stale) await unmountPath(loc.workspace, true)
  const fresh = where(opts)
  if (!stale && !fs.existsSync(join(fresh.store, 'db'))) {
    throw new CpfsError('NOT_MOUNTED', `${fresh.workspace} is not mounted, and has no cpfs history`, `cpfs mount ${fresh.workspace} mounts it`)
  }
  return await offline(fresh, async (s, finished) => {
    const pending = s.pending()
    const notMounted = stale ? 'stale' as const : 'offline' as const
    // Plain unmount of a directory that is not mounted and owes nothing is a mistake worth a
    // line; --discard asks only that the real directory stay as it is, which holds: it says
    // so and succeeds (cleanup scripts run it whatever the state).
    if (!stale && pending === 0 && !finished && !opts.discard) {
      throw new CpfsError('NOT_MOUNTED', `${fresh.workspace} is not mounted, and the real directory already holds every turn: nothing to apply`, `cpfs mount ${fresh.workspace} mounts it; cpfs status shows its history`)
    }
    if (opts.discard) return { applied: false, summary: null, discarded: await s.discard(), notMounted, pending }
    if (opts.force) await keepDisplaced(s)
    else if (pending > 0) await keepRefreshed(s) // nothing pending: no plan to make way for
    return { applied: true, summary: await applyStack(s, { force: opts.force }), notMounted, pending }
  }, opts.discard ? 'discard' : 'write')
}

/**
 * Seal the head turn and open the next; returns the new head. `message` describes the work of
 * the turn being sealed (as `git commit -m`); `prompt` and `id` label the turn being opened (an
 * agent host passes the user's message and its id: `rewind(id)` then goes back to just before it).
 */
export async function turn (opts: Target & TurnOptions = {}): Promise<number> {
  const loc = where(opts)
  const labels: TurnOptions = { message: opts.message, prompt: opts.prompt, id: opts.id }
  if (await daemonUp(loc)) return (await callDaemon(loc, { cmd: 'turn', args: { ...labels } }) as { head: number }).head
  // Not mounted, nothing can change: a turn would only be an empty one in the history.
  if (loc.stale || isMounted(loc.workspace)) {
    throw new CpfsError('STALE_MOUNT', `the cpfs daemon for ${loc.workspace} is not running but its mount is still there`, `run cpfs mount ${loc.workspace} to recover it, then cpfs turn`)
  }
  throw new CpfsError('NOT_MOUNTED', `${loc.workspace} is not mounted: a turn checkpoints work done in the mount, and none can be done now; no turn was added`, `run cpfs mount ${loc.workspace} first`)
}

/**
 * The turns; with `lines`, also the lines each added and removed (reads changed text files).
 * `paths`: list at most that many of each turn's paths (`files` still counts them all), so
 * that a turn of 20,000 paths is not sent whole to a caller that shows five.
 */
export async function log (opts: Target & { lines?: boolean, paths?: number } = {}): Promise<TurnInfo[]> {
  const loc = where(opts)
  const args: Record<string, unknown> = { lines: Boolean(opts.lines) }
  if (opts.paths !== undefined) args.paths = opts.paths
  const turns = await viaDaemonOr(loc, 'log', args, async (s) => cutPaths(await logWithLines(s, Boolean(opts.lines)), opts.paths), 'read')
  return cutPaths(turns, opts.paths) // a daemon older than this library sends every path
}



export interface RewindResult {
  head: number
  dropped?: number
  mounted: boolean
  summary?: PlanSummary
}

/** Make the workspace what it was when TURN began. Not mounted: through a verified plan. */
export async function rewind (turnSpec: string | number, opts: Target & { force?: boolean } = {}): Promise<RewindResult> {
  const loc = where(opts)
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'rewind', args: { turn: String(turnSpec) } }) as any, mounted: true }
  return await offline(loc, async (s) => {
    const asked = s.resolveTurn(turnSpec)
    if (s.atStartOf(asked)) {
      // Already there: no redo step. The real directory may still lack turns (a daemon that
      // stopped without applying): those are applied, as any offline command would.
      if (opts.force) await keepDisplaced(s)
      const t = s.resolveTurn(turnSpec)
      const summary = s.pending() > 0 ? await applyStack(s, { force: opts.force, stack: s.meta.stack.slice(0, t - 1) }) : undefined
      return { head: s.head, dropped: 0, mounted: false, summary }
    }
    const t = await keepBefore(s, asked, opts.force)
    const dropped = s.meta.stack.length - t + 1
    const summary = await applyStack(s, { force: opts.force, stack: s.meta.stack.slice(0, t - 1), after: s.rewindChange(t) })
    return { head: s.head, dropped, mounted: false, summary }
  })
}

export interface RestoreResult {
  turn: number
  paths: string[]
  mounted: boolean
  summary?: PlanSummary
  /** Not mounted: the paths already were as at the start of TURN; nothing changed, not even the history. */
  unchanged?: boolean
}

/**
 * Restore files or directories to their state at the start of TURN. Mounted: a new change
 * in the head turn. Not mounted: the same change, applied through a verified plan.
 */
export async function restore (turnSpec: string | number, paths: string[], opts: Target & { force?: boolean } = {}): Promise<RestoreResult> {
  const loc = where(opts)
  if (paths.length === 0) throw new CpfsError('USAGE', 'no path to restore', 'name at least one file or directory')
  const rel = workspacePaths(loc.workspace, paths)
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'restore', args: { turn: String(turnSpec), paths: rel } }) as any, mounted: true }
  return await offline(loc, async (s) => {
    const pending = s.pending()
    if (pending > 0) throw new CpfsError('PENDING', `${pending} turn${pending === 1 ? ' is' : 's are'} not applied to the real directory yet`, `run cpfs unmount ${loc.workspace} (it applies them) or mount the workspace, then restore`)
    if (opts.force) await keepDisplaced(s)
    else await keepRefreshed(s)
    const r = await s.prepareRestore(turnSpec, rel)
    const expected = await viewOf(s, s.meta.applied)
    // Nothing to put back: the history stays as it is too (no sealed head, redo kept) — unless
    // the real paths were changed outside cpfs, which a plan with operations would refuse too.
    if (planViews(expected, r.view, r.touched).ops.length === 0) {
      const drifted = findDrift(s, expected, [...r.touched].filter(p => !isInoKey(p)).map(path => ({ op: 'mkdir' as const, path })))
      if (drifted.length) throw new CpfsError('DRIFT', `the real directory changed outside cpfs: ${drifted.slice(0, 5).join(', ')}${drifted.length > 5 ? ` and ${drifted.length - 5} more` : ''}`, 'inspect those paths, then run again with --force to replace them (their current content is kept in the store)')
      return { turn: r.turn, paths: rel, mounted: false, unchanged: true }
    }
    const { change, preOps } = r.commit()
    const summary = await runPlan(s, expected, r.view, r.touched, { force: opts.force, targetStack: change.stack, after: change, preOps })
    return { turn: r.turn, paths: rel, mounted: false, summary }
  })
}

export interface ForkResult {
  turn: number
  dest: string
  summary: PlanSummary
}

/**
 * Write the view at the start of TURN into the new (or empty) directory DEST, verified, and
 * give DEST its own history (turn 1 = that view). The source and its history are untouched.
 */
export async function fork (turnSpec: string | number, dest: string, opts: Target = {}): Promise<ForkResult> {
  const loc = where(opts)
  const destAbs = resolvePath(dest)
  checkDest(destAbs, loc.workspace)
  // A history left by an earlier directory at DEST's path would be taken for DEST's own:
  // refuse before writing anything.
  const destReal = join(fs.realpathSync(dirname(destAbs)), basename(destAbs))
  if (fs.existsSync(join(workspaceDir(destReal), 'workspace.json'))) {
    throw new CpfsError('FORK_DEST', `${destAbs} already has cpfs history from an earlier directory at that path`, `remove ${workspaceDir(destReal)} or fork elsewhere`)
  }
  const r = await viaDaemonOr(loc, 'fork', { turn: String(turnSpec), dest: destAbs }, async (s) => {
    const t = s.resolveTurn(turnSpec)
    return { turn: t, ...await forkView(s, t, destAbs) }
  })
  // DEST's own history: turn 1 is the forked view, nothing pending.
  const dloc = locate(r.dest)
  register(dloc)
  const fd = fs.openSync(r.dest, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  try {
    const s = await Session.open({ storePath: dloc.store, workspace: dloc.workspace, dirFd: fd, create: true })
    await s.labelTurn(1, `forked from ${loc.workspace} at turn ${r.turn}`)
    await s.close()
  } finally {
    fs.closeSync(fd)
  }
  return r
}

/** What `rewind` would do, without doing it (an agent host's confirmation dialog). */
export async function rewindPreview (turnSpec: string | number, opts: Target = {}): Promise<RewindPreview> {
  const loc = where(opts)
  if (await daemonUp(loc)) return await callDaemon(loc, { cmd: 'preview-rewind', args: { turn: String(turnSpec) } }) as RewindPreview
  return await offline(loc, async (s) => await previewRewind(s, String(turnSpec), false), 'read')
}

/**
 * What turn `spec` (a number, an id, or a range A..B; default: the head) changed; `patches`
 * adds each path's git-style patch; `paths` (absolute, or relative to the workspace) keeps only
 * the changes at or below them.
 */
export async function diff (spec: string | number | undefined, opts: Target & { patches?: boolean, paths?: string[] } = {}): Promise<{ a: number, b: number, changes: Change[] }> {
  const loc = where(opts)
  const s = spec === undefined ? undefined : String(spec)
  const paths = opts.paths && opts.paths.length ? workspacePaths(loc.workspace, opts.paths) : undefined
  return await viaDaemonOr(loc, 'diff', { spec: s, patches: Boolean(opts.patches), paths }, async (ss) => await diffTurns(ss, s, { patches: opts.patches, paths }), 'read')
}

export async function undo (opts: Target & { force?: boolean } = {}): Promise<RewindResult> {
  const loc = where(opts)
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'undo' }) as any, mounted: true }
  return await offline(loc, async (s) => {
    const t = await keepBefore(s, s.undoTarget(), opts.force)
    const dropped = s.meta.stack.length - t + 1
    const summary = await applyStack(s, { force: opts.force, stack: s.meta.stack.slice(0, t - 1), after: s.rewindChange(t) })
    return { head: s.head, dropped, mounted: false, summary }
  })
}

export async function redo (opts: Target & { force?: boolean } = {}): Promise<RewindResult> {
  const loc = where(opts)
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'redo' }) as any, mounted: true }
  return await offline(loc, async (s) => {
    const refreshed = opts.force ? (await keepDisplaced(s), null) : await keepRefreshed(s)
    const change = await s.redoChange()
    if (refreshed !== null) {
      // The refreshed version stays in the stack redo goes back to, right above the turns it
      // refreshed (those the two stacks share): the turns redone come after it, and theirs win.
      const now = s.meta.stack.filter(id => id !== refreshed)
      let at = 0
      while (at < now.length - 1 && at < change.stack.length - 1 && now[at] === change.stack[at]) at++
      change.stack = [...change.stack.slice(0, at), refreshed, ...change.stack.slice(at)]
    }
    const summary = await applyStack(s, { force: opts.force, stack: change.stack, after: change })
    return { head: s.head, mounted: false, summary }
  })
}

/** Reset the daemon's per-operation statistics (benchmarks measure one step at a time). */
export async function resetStats (opts: Target = {}): Promise<void> {
  const loc = where(opts)
  if (!await daemonUp(loc)) throw new CpfsError('NOT_MOUNTED', `${loc.workspace} is not mounted`, `run cpfs mount ${loc.workspace} first`)
  await callDaemon(loc, { cmd: 'reset-stats' })
}

export async function status (opts: Target = {}): Promise<StatusInfo> {
  const loc = where(opts)
  const storeBytes = dirBytes(loc.store)
  if (await daemonUp(loc)) {
    return statusFromDaemon(loc, await callDaemon(loc, { cmd: 'status' }), storeBytes)
  }
  const stale = loc.stale || isMounted(loc.workspace)
  const empty: StatusInfo = { workspace: loc.workspace, mounted: false, stale, pid: null, head: null, turns: 0, pending: 0, redo: 0, store: loc.store, storeBytes, skipped: [] }
  if (stale || !fs.existsSync(join(loc.store, 'db'))) return empty
  return await offline(loc, async (s) => {
    const st = s.status()
    const out: StatusInfo = { ...empty, head: st.head, turns: st.turns, pending: st.pending, redo: st.redo, skipped: st.skipped }
    if (s.store.getSync(JOURNAL_KEY)) out.interrupted = true
    return out
  }, 'read')
}

/**
 * Check the workspace's store, repair what can be rebuilt and list what is lost (store/fsck.ts).
 * Refuses while the workspace is mounted: the daemon holds the store and its caches.
 */
export async function fsck (opts: Target = {}): Promise<import('./store/fsck.js').FsckResult> {
  const loc = where(opts)
  const { fsckStore, fsckRefusal } = await import('./store/fsck.js')
  if (loc.stale || isMounted(loc.workspace)) throw fsckRefusal(loc.workspace)
  if (!fs.existsSync(join(loc.store, 'db'))) throw new CpfsError('NO_HISTORY', `no cpfs history for ${loc.workspace}`, `run cpfs mount ${loc.workspace} first`)
  return await fsckStore(loc.store, loc.workspace)
}
