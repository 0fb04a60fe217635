// The library: everything the CLI does, callable in-process by an agent host. Each function
// finds the workspace's store, then talks to the mount daemon over the control socket when
// the workspace is mounted, or opens the store itself when it is not.
import * as fs from 'node:fs'
import { basename, dirname, join, resolve as resolvePath } from 'node:path'
import { CpfsError, isCpfsError } from './errors.js'
import { callDaemon, statusFromDaemon, workspacePaths, type StatusInfo } from './control/mounted.js'
import type { ArgsOf, CommandName, ResultOf, UnmountResult } from './control/protocol.js'
import type { ReadyInfo } from './daemon/daemon.js'
import { daemonUp, startDaemon, statDev, stopStaleDaemon, type StartOptions } from './daemons.js'
import { unmountPath } from './fuse/mount.js'
import { applyStack, runPlan } from './plans/run.js'
import { recover, setAsidePlan, type PlanSummary } from './plans/finish.js'
import { findDrift } from './plans/drift.js'
import { viewOf } from './plans/views.js'
import { cutPaths, diffTurns, logWithLines, previewRewind, type RewindPreview } from './reports/preview.js'
import { planViews } from './plans/planner.js'
import type { Change } from './reports/changes.js'
import { blamePath, type Blame } from './reports/blame.js'
import { Session, type TurnInfo, type TurnOptions } from './session/session.js'
import { JOURNAL_KEY } from './store/keys.js'
import { isInoKey } from './store/entries.js'
import { dirBytes, isMounted, locate, register, workspaceDir, type Location } from './store/locate.js'
import { checkDest, forkView } from './plans/fork.js'
import { keepBefore, keepDisplaced, keepRefreshed } from './plans/keep.js'
import { holdersOf, type Holder } from './holders.js'
import { NO_FAULTS, type Faults } from './plans/faults.js'
import { branchRef, resolveRef, type TurnRef } from './session/tree.js'
import { sharedTurns, type LeftBy } from './store/branches.js'
// A lazy clone's older chunks are fetched when read (remote/lazy.ts registers the reader).
import './remote/lazy.js'

export interface Target {
  /** The workspace directory (default: the current directory). */
  dir?: string
  /** The store directory, when not the default under CPFS_HOME. */
  store?: string
}

export type { StatusInfo } from './control/mounted.js'
export type { UnmountResult } from './control/protocol.js'

/**
 * What the tests make go wrong in the plans this process runs (plans/faults.ts): none, unless
 * the process's entry point injected some (cli/main.ts builds them from the environment).
 */
let faults: Faults = NO_FAULTS

export function injectFaults (injected: Faults): void {
  faults = injected
}

/** The workspace and store a Target names (for the library's other modules). */
export function where (t: Target): Location {
  return locate(t.dir ?? '.', t.store)
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
export async function offline<T> (loc: Location, fn: (s: Session, finished: boolean) => Promise<T>, mode: 'write' | 'read' | 'discard' = 'write'): Promise<T> {
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
    const finished = mode === 'read' ? null : mode === 'write' ? await recover(session, faults) : await recover(session, faults).catch(async (err) => {
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

export async function viaDaemonOr<C extends CommandName> (loc: Location, cmd: C, args: ArgsOf<C>, fn: (s: Session) => Promise<ResultOf<C>>, mode: 'write' | 'read' = 'write'): Promise<ResultOf<C>> {
  if (await daemonUp(loc)) return await callDaemon(loc, { cmd, args })
  return await offline(loc, fn, mode)
}

export interface MountOptions extends Target, StartOptions {}

/** What `mount` reports: the daemon's, and the processes left underneath the mount. */
export interface MountInfo extends ReadyInfo {
  /** Processes whose cwd, root or open files are in the real directory under the mount (holders.ts). */
  underneath: Holder[]
}

/** Mount the workspace in place; resolves once the mount is live. */
export async function mount (opts: MountOptions = {}): Promise<MountInfo> {
  const loc = where(opts)
  // The real directory's device, read before the mount hides it: a process whose cwd is on it
  // after the mount is underneath, reaching the real files past cpfs.
  const realDev = statDev(loc.workspace)
  const ready = await startDaemon(loc, opts)
  const underneath = realDev === null ? [] : holdersOf(loc.workspace, realDev, [ready.pid])
  return { ...ready, underneath }
}

/**
 * Flush, unmount, then apply the head view to the real directory (verified) unless discard.
 * Not mounted: the turns a stopped daemon left unapplied are applied (or set aside); with none,
 * and no interrupted plan to finish, there is nothing to do and it says so (NOT_MOUNTED).
 */
export async function unmount (opts: Target & { discard?: boolean, force?: boolean } = {}): Promise<UnmountResult> {
  const loc = where(opts)
  if (await daemonUp(loc)) {
    return await callDaemon(loc, { cmd: 'unmount', args: { discard: Boolean(opts.discard), force: Boolean(opts.force) } })
  }
  const stale = loc.stale || isMounted(loc.workspace)
  if (stale) {
    await unmountPath(loc.workspace, true)
    // Views its dead daemon served are dead mounts in the workspace's cpfs directory: gone too.
    await (await import('./daemon/view-mounts.js')).ViewMounts.clearLeftovers(loc)
  }
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
    return { applied: true, summary: await applyStack(s, { force: opts.force, faults }), notMounted, pending }
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
  if (await daemonUp(loc)) return (await callDaemon(loc, { cmd: 'turn', args: { ...labels } })).head
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

/**
 * Make the workspace what it was when TURN began (TURN on any branch: N, -N, an id, bN:T), or
 * what branch bN held when it was left. Not mounted: through a verified plan.
 */
export async function rewind (turnSpec: string | number, opts: Target & { force?: boolean } = {}): Promise<RewindResult> {
  const loc = where(opts)
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'rewind', args: { turn: String(turnSpec) } }), mounted: true }
  return await offline(loc, async (s) => {
    const ref = resolveRef(s.history, turnSpec)
    if (ref.branch === null && ref.turn !== null && s.atStartOf(ref.turn)) {
      // Already there: no redo step. The real directory may still lack turns (a daemon that
      // stopped without applying): those are applied, as any offline command would.
      if (opts.force) await keepDisplaced(s)
      const t = s.resolveTurn(turnSpec)
      const summary = s.pending() > 0 ? await applyStack(s, { force: opts.force, stack: s.meta.stack.slice(0, t - 1), faults }) : undefined
      return { head: s.head, dropped: 0, mounted: false, summary }
    }
    return await leaveOffline(s, ref, 'rewind', opts.force)
  })
}

/** An offline rewind, undo or switch to a branch: outside changes kept first, then one verified plan. */
async function leaveOffline (s: Session, asked: TurnRef, by: LeftBy, force: boolean | undefined): Promise<RewindResult> {
  let ref = asked
  if (ref.branch === null && ref.turn !== null) ref = { ...ref, turn: await keepBefore(s, ref.turn, force) }
  else if (force) await keepDisplaced(s)
  else await keepRefreshed(s)
  if (ref.branch === null) ref = { ...ref, stack: s.meta.stack }
  await s.history.load(ref.stack)
  const old = s.meta.stack.slice()
  const change = s.history.rewindChange(ref, by)
  const summary = await applyStack(s, { force, stack: ref.turn === null ? ref.stack : ref.stack.slice(0, ref.turn - 1), after: change, faults })
  return { head: s.head, dropped: old.length - sharedTurns(old, s.meta.stack), mounted: false, summary }
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
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'restore', args: { turn: String(turnSpec), paths: rel } }), mounted: true }
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
    const summary = await runPlan(s, expected, r.view, r.touched, { force: opts.force, targetStack: change.stack, after: change, preOps, faults })
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
    return { turn: t, ...await forkView(s, t, destAbs, faults) }
  })
  // DEST's own history: turn 1 is the forked view, nothing pending.
  const dloc = locate(r.dest)
  register(dloc)
  const fd = fs.openSync(r.dest, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  try {
    const s = await Session.open({ storePath: dloc.store, workspace: dloc.workspace, dirFd: fd, create: true })
    await s.history.labelTurn(1, `forked from ${loc.workspace} at turn ${r.turn}`)
    await s.close()
  } finally {
    fs.closeSync(fd)
  }
  return r
}

/** What `rewind` would do, without doing it (an agent host's confirmation dialog). */
export async function rewindPreview (turnSpec: string | number, opts: Target = {}): Promise<RewindPreview> {
  const loc = where(opts)
  if (await daemonUp(loc)) return await callDaemon(loc, { cmd: 'preview-rewind', args: { turn: String(turnSpec) } })
  return await offline(loc, async (s) => await previewRewind(s, String(turnSpec), false), 'read')
}

/**
 * Every turn that changed `path` (absolute, or relative to the workspace), oldest first: what
 * it did there and who did it — the process, its command line and the commands it ran under.
 */
export async function blame (path: string, opts: Target = {}): Promise<Blame> {
  const loc = where(opts)
  const [rel] = workspacePaths(loc.workspace, [path])
  return await viaDaemonOr(loc, 'blame', { path: rel }, async (s) => await blamePath(s, rel), 'read')
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
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'undo' }), mounted: true }
  return await offline(loc, async (s) => await leaveOffline(s, { stack: s.meta.stack, turn: s.undoTarget(), branch: null }, 'undo', opts.force))
}

/** Back to the stack the last rewind left; with `branch` (bN), to that branch's tip. What was written since is kept as a branch. */
export async function redo (opts: Target & { force?: boolean, branch?: string } = {}): Promise<RewindResult> {
  const loc = where(opts)
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'redo', args: opts.branch === undefined ? undefined : { branch: opts.branch } }), mounted: true }
  return await offline(loc, async (s) => {
    if (opts.branch !== undefined) return await leaveOffline(s, resolveRef(s.history, branchRef(opts.branch)), 'redo', opts.force)
    const refreshed = opts.force ? (await keepDisplaced(s), null) : await keepRefreshed(s)
    const change = await s.history.redoChange()
    if (refreshed !== null) {
      // The refreshed version stays in the stack redo goes back to, right above the turns it
      // refreshed (those the two stacks share): the turns redone come after it, and theirs win.
      const now = s.meta.stack.filter(id => id !== refreshed)
      let at = 0
      while (at < now.length - 1 && at < change.stack.length - 1 && now[at] === change.stack[at]) at++
      change.stack = [...change.stack.slice(0, at), refreshed, ...change.stack.slice(at)]
    }
    const summary = await applyStack(s, { force: opts.force, stack: change.stack, after: change, faults })
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
  const empty: StatusInfo = { workspace: loc.workspace, mounted: false, stale, pid: null, head: null, turns: 0, pending: 0, redo: 0, branches: 0, store: loc.store, storeBytes, skipped: [] }
  if (stale || !fs.existsSync(join(loc.store, 'db'))) return empty
  return await offline(loc, async (s) => {
    const st = s.status()
    const out: StatusInfo = { ...empty, head: st.head, turns: st.turns, pending: st.pending, redo: st.redo, branches: st.branches, retention: st.retention, skipped: st.skipped }
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
