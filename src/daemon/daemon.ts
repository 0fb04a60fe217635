// One mounted session: open the workspace's directory handle (before mounting, so the real
// files stay reachable as the lower layer), open the store, finish any interrupted plan,
// mount in place, serve the control socket, and tear it all down in order on unmount or
// on SIGTERM/SIGINT. Readiness is reported only once the mount is live.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CpfsError } from '../errors.js'
import { dispatcher, serve } from '../control/server.js'
import { daemonHandlers, memoryStatus } from './commands.js'
import { ViewInvalidation } from './invalidation.js'
import { Shutdown } from './shutdown.js'
import { trimAfterWork } from './trim.js'
import { Channel } from '../fuse/channel.js'
import { OP_NAMES } from '../fuse/kernel.js'
import { FuseOps } from '../fuse/ops.js'
import { NAME_MAX, nameMax } from '../overlay/limits.js'
import { cacheTimeout, checkFuse, mountFuse, unmountPath, widenReadahead } from '../fuse/mount.js'
import { Notifier } from '../fuse/invalidate.js'
import { WatcherEvents } from './watchers.js'
import { recover } from '../plans/finish.js'
import { NO_FAULTS, type Faults } from '../plans/faults.js'
import { absorbOutsideChanges } from '../plans/absorb.js'
import type { WatchInfo } from '../store/underneath.js'
import { Underneath, watchWanted } from './underneath.js'
import { retainingMarker } from './retention.js'
import { native } from '../native/index.js'
import { Session } from '../session/session.js'
import { isMounted, type Location } from '../store/locate.js'
import { mountSource } from '../workspaces.js'
import { ViewMounts } from './view-mounts.js'
// A lazy clone's older chunks are fetched when read, in a mount too (remote/lazy.ts).
import '../remote/lazy.js'

export interface DaemonOptions {
  loc: Location
  allowOther: boolean
  /** The user's umask, when the daemon runs with its own (main.ts): plans use the user's. */
  umask?: number
}

export interface ReadyInfo {
  pid: number
  head: number
  workspace: string
  store: string
  recovered: boolean
  /** Paths changed outside cpfs since it last saw them, recorded as this turn before mounting. */
  outside?: { turn: number, paths: number }
  /** The watch of writes made underneath the mount (daemon/underneath.ts). */
  watch: WatchInfo
}

/**
 * The daemon's own way to the real directory: where the watch of writes made underneath the
 * mount will run (daemon/underneath.ts), a private clone of the directory's mount, which the
 * watch exempts as a whole — otherwise each of the daemon's own opens of a real file raises a
 * permission event its thread must answer (1.35× the time of a first read of 5,000 files,
 * bench/underneath.mjs). Else, or if the clone fails, the directory itself.
 */
function ownWayDown (realFd: number): { fd: number, own: boolean } {
  if (!watchWanted()) return { fd: realFd, own: false }
  try {
    const fd = native.openTreeClone(realFd)
    fs.closeSync(realFd)
    return { fd, own: true }
  } catch {
    return { fd: realFd, own: false }
  }
}

/**
 * The workspace's history, ready to be mounted: an interrupted plan finished (with the user's
 * umask, as the CLI would), and what changed outside cpfs since it last looked recorded as a
 * turn of its own.
 */
async function openSession (opts: DaemonOptions, dirFd: number, faults: Faults): Promise<{ session: Session, recovered: boolean, outside?: ReadyInfo['outside'] }> {
  const { loc } = opts
  let session: Session
  try {
    session = await Session.open({ storePath: loc.store, workspace: loc.workspace, dirFd, create: true })
  } catch (err) {
    fs.closeSync(dirFd)
    throw err
  }
  let recovered = false
  let outside: ReadyInfo['outside']
  try {
    // An interrupted plan writes the real directory: with the user's umask, as the CLI would.
    const own = opts.umask !== undefined ? process.umask(opts.umask) : undefined
    try {
      recovered = (await recover(session, faults)) !== null
    } finally {
      if (own !== undefined) process.umask(own)
    }
    // Steps left open by the last mount (its daemon stopped, or was killed) end here.
    await session.steps.endStopped()
    const absorbed = await absorbOutsideChanges(session)
    if (absorbed) outside = { turn: absorbed.turn, paths: absorbed.paths.length }
  } catch (err) {
    await session.close()
    throw err
  }
  return { session, recovered, outside }
}

/**
 * CPFS_MEMORY_LOG=ms: a line of the daemon's memory (status's memory field) to its log every
 * ms milliseconds, to see where it goes during a workload (bench/run.mjs reports peaks per step).
 */
function logMemory (session: Session): void {
  const ms = Number(process.env.CPFS_MEMORY_LOG ?? 0)
  if (!(ms > 0)) return
  setInterval(() => {
    const m = memoryStatus(session)
    process.stderr.write(`cpfs daemon: memory ${Date.now()} ${JSON.stringify({ ...m.usage, ...m.held })}\n`)
  }, ms).unref()
}

/** faults: what the tests make go wrong in the plans the daemon runs (plans/faults.ts); none in production. */
export async function runDaemon (opts: DaemonOptions, ready: (info: ReadyInfo) => void, faults: Faults = NO_FAULTS): Promise<void> {
  const { loc } = opts
  checkFuse() // fail early, before touching anything, when FUSE is unusable
  if (isMounted(loc.workspace)) {
    // A mount whose daemon died (kill -9): detach it so the real directory is reachable.
    await unmountPath(loc.workspace, true)
  }
  await ViewMounts.clearLeftovers(loc) // views a killed daemon left
  const { fd: dirFd, own } = ownWayDown(fs.openSync(loc.workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY))
  const { session, recovered, outside } = await openSession(opts, dirFd, faults)
  let fd: number
  try {
    fd = mountFuse(loc.workspace, { allowOther: opts.allowOther, source: mountSource(loc.dir) })
  } catch (err) {
    await session.close()
    throw err
  }
  const ch = new Channel(fd)
  // Who changed what (session/attribution.ts); CPFS_ATTRIBUTION=0 records no process (command
  // lines can hold secrets a user may not want in the history) and measures what it costs.
  if (process.env.CPFS_ATTRIBUTION !== '0') {
    ch.callers = session.attribution
    session.attribution.recording = true
  }
  const ops = new FuseOps(session.overlay, session.persister, session.overlay.getattr('/').ino, { cacheTimeout: cacheTimeout(), nameMax: Math.min(NAME_MAX, nameMax(session.lower.dirFd)) })
  ops.register(ch)
  const notifier = new Notifier(fd)
  ops.onAttrsChanged = (id) => {
    notifier.invalInode(id, true)
    void notifier.flush()
  }
  ch.spaceComing = (refusal) => session.space.comingBack(refusal)
  ch.onError = (err, req) => {
    // One line per unexpected error: the request answered EIO, the daemon goes on.
    const what = String((err as any)?.stack ?? err).split('\n').slice(0, 2).map(l => l.trim()).join(' ')
    process.stderr.write(`cpfs daemon: ${new Date().toISOString()} ${OP_NAMES[req.opcode] ?? 'op' + req.opcode} (node ${req.nodeid}) failed: ${what}\n`)
  }
  // inotify watchers hear of the daemon's own changes (watchers.ts).
  const watch = new WatcherEvents(ch, ops, session, loc.workspace)
  const initDone = new Promise<void>((resolve) => { ops.onInit = resolve })
  session.lower.cacheReal(true)
  ch.start()
  await initDone
  widenReadahead(loc.workspace)

  const views = new ViewInvalidation(session, ops, notifier, watch, ch)
  const withInvalidation = async <T>(fn: () => Promise<T>): Promise<T> => await views.around(fn)
  // Writes made underneath the mount, by processes that were in the directory before it.
  const underneath = Underneath.start(session, loc.workspace, dirFd, own, async (fn) => { await withInvalidation(fn) })
  const watchInfo: WatchInfo = underneath instanceof Underneath ? { state: 'watching' } : underneath
  if (watchInfo.why) process.stderr.write(`cpfs daemon: ${watchInfo.why}\n`)

  const pidFile = join(loc.dir, 'daemon.pid')
  fs.writeFileSync(pidFile, String(process.pid) + '\n', { mode: 0o600 })
  try { fs.unlinkSync(retainingMarker(loc)) } catch {} // left by a retention run that was killed

  const viewMounts = new ViewMounts(loc, session)
  const ending = new Shutdown({ loc, session, fd, ch, notifier, watch, underneath, pidFile, umask: opts.umask, faults, viewMounts })
  const handlers = daemonHandlers({ session, ch, ops, views, underneath, faults, viewMounts, shutdown: async (mode, force) => await ending.run(mode, force) })
  ending.server = await serve(loc.socket, dispatcher(handlers, (req) => {
    if (ending.closing && req.cmd !== 'ping') throw new CpfsError('BUSY', 'the mount is shutting down', 'wait for cpfs unmount to finish')
  }))
  const onSignal = (sig: string): void => ending.onEnd(`${sig}, unmounting without applying (history kept)`, sig)
  // The mount can vanish under the daemon (umount -l, fusermount -u -z, an aborted
  // connection): then there is nothing to unmount; persist, release the store and exit.
  ch.onEnd = (why) => { if (!ending.closing) ending.onEnd(`${why}; saving the history and exiting`) }
  process.on('SIGTERM', () => onSignal('SIGTERM'))
  process.on('SIGINT', () => onSignal('SIGINT'))
  process.on('SIGHUP', () => onSignal('SIGHUP'))

  logMemory(session)
  // Requests answered so far (the histogram's sum): free native memory is given back once it stops growing.
  trimAfterWork(() => ch.stats.hist.reduce((a, b) => a + b, 0))
  ready({ pid: process.pid, head: session.head, workspace: loc.workspace, store: loc.store, recovered, watch: watchInfo, ...(outside ? { outside } : {}) })
}
