// One mounted session: open the workspace's directory handle (before mounting, so the real
// files stay reachable as the lower layer), open the store, finish any interrupted plan,
// mount in place, serve the control socket, and tear it all down in order on unmount or
// on SIGTERM/SIGINT. Readiness is reported only once the mount is live.
import * as fs from 'node:fs'
import type { Server } from 'node:net'
import { join } from 'node:path'
import { CpfsError } from '../errors.js'
import { serve } from '../control/server.js'
import type { Request } from '../control/protocol.js'
import { Channel } from '../fuse/channel.js'
import { newStats } from '../fuse/stats.js'
import { OP_NAMES } from '../fuse/kernel.js'
import { FuseOps } from '../fuse/ops.js'
import { cacheTimeout, checkFuse, mountFuse, unmountPath } from '../fuse/mount.js'
import { Notifier } from '../fuse/invalidate.js'
import { ancestors, baseName, belowAny, parentOf } from '../overlay/paths.js'
import { inoOfKey, isInoKey } from '../store/entries.js'
import { WatcherEvents, type Before } from './watchers.js'
import { applyStack } from '../plans/run.js'
import { recover } from '../plans/finish.js'
import { noteUnseenChanges } from '../plans/drift.js'
import { phase } from '../progress.js'
import { absorbOutsideChanges } from '../plans/absorb.js'
import { Underneath, watchWanted, type WatchInfo } from './underneath.js'
import { native } from '../native/index.js'
import { freezeOrigin } from '../plans/freeze.js'
import { cutPaths, diffTurns, logWithLines, previewRewind } from '../plans/preview.js'
import { forkView } from '../plans/fork.js'
import { NO_FAULTS, type Faults } from '../plans/faults.js'
import { Session } from '../session/session.js'
import { isMounted, type Location } from '../store/locate.js'
import { mountSource } from '../workspaces.js'

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

/** faults: what the tests make go wrong in the plans the daemon runs (plans/faults.ts); none in production. */
export async function runDaemon (opts: DaemonOptions, ready: (info: ReadyInfo) => void, faults: Faults = NO_FAULTS): Promise<void> {
  const { loc } = opts
  checkFuse() // fail early, before touching anything, when FUSE is unusable
  if (isMounted(loc.workspace)) {
    // A mount whose daemon died (kill -9): detach it so the real directory is reachable.
    await unmountPath(loc.workspace, true)
  }
  const { fd: dirFd, own } = ownWayDown(fs.openSync(loc.workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY))
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
    const absorbed = await absorbOutsideChanges(session)
    if (absorbed) outside = { turn: absorbed.turn, paths: absorbed.paths.length }
  } catch (err) {
    await session.close()
    throw err
  }
  let fd: number
  try {
    fd = mountFuse(loc.workspace, { allowOther: opts.allowOther, source: mountSource(loc.dir) })
  } catch (err) {
    await session.close()
    throw err
  }
  const ch = new Channel(fd)
  const ops = new FuseOps(session, session.overlay.getattr('/').ino, { cacheTimeout: cacheTimeout() })
  ops.register(ch)
  const notifier = new Notifier(fd)
  ops.onAttrsChanged = (id) => {
    notifier.invalInode(id, true)
    void notifier.flush()
  }
  ch.spaceComing = (refusal) => session.spaceComing(refusal)
  ch.onError = (err, req) => {
    // One line per unexpected error: the request answered EIO, the daemon goes on.
    const what = String((err as any)?.stack ?? err).split('\n').slice(0, 2).map(l => l.trim()).join(' ')
    process.stderr.write(`cpfs daemon: ${new Date().toISOString()} ${OP_NAMES[req.opcode] ?? 'op' + req.opcode} (node ${req.nodeid}) failed: ${what}\n`)
  }
  // inotify watchers hear of the daemon's own changes (watchers.ts).
  const watch = new WatcherEvents(ch, ops, session, loc.workspace)
  const initDone = new Promise<void>((resolve) => { ops.onInit = resolve })
  session.origin.cacheReal(true)
  ch.start()
  await initDone

  // The daemon's own changes (rewind, redo, undo, restore) must not be hidden by the kernel's
  // caches: every dentry is looked up again (one epoch bump), nodes whose path now leads to
  // another inode lose that name, and the attributes, pages and listings of the touched paths
  // and their directories are dropped.
  let pendingInval: Set<string> | null = null
  session.onViewChange = (touched) => {
    pendingInval ??= new Set()
    for (const p of touched) pendingInval.add(p)
  }
  const invalidate = async (before: Before): Promise<void> => {
    const keys = pendingInval
    pendingInval = null
    if (!keys || keys.size === 0 || ch.closed) return
    // Inode records (hard links) are touched by inode number: every name the kernel knows of
    // such an inode shares its node, including real names that have no entry of their own.
    const touched = new Set<string>()
    const inos = new Set<number>()
    for (const k of keys) {
      if (isInoKey(k)) inos.add(inoOfKey(k))
      else touched.add(k)
    }
    // Memoised per directory: every ancestor of every node was O(depth³) characters in a deep tree.
    const below = belowAny(touched)
    const affected = (p: string): boolean => touched.has(p) || below(p)
    const ov = session.overlay
    // Nodes by the names the kernel knew them under, before those names are re-checked.
    const stale = new Set<number>()
    for (const n of ops.nodes.all()) if (inos.has(n.ino) || [...n.paths].some(affected)) stale.add(n.id)
    // A file the kernel knows that is now another inode: watchers of the old one get
    // IN_DELETE_SELF (NOTIFY_DELETE); watchers of directories hear of it later (watchers.ts).
    for (const n of ops.nodes.all()) {
      if (n.path === null || n.path === '/' || !affected(n.path)) continue
      const r = ov.view.resolve(n.path)
      const parent = ops.nodes.at(parentOf(n.path))
      if (r && parent && ov.attrOf(r).ino !== n.ino && (ov.attrOf(r).mode & 0o170000) !== 0o040000) notifier.deleteEntry(parent.id, n.id, baseName(n.path))
    }
    const above = new Set<string>()
    for (const p of touched) {
      for (const a of ancestors(p)) {
        if (above.has(a)) break // and so are its own ancestors
        above.add(a)
        const d = ops.nodes.at(a)
        if (d) stale.add(d.id)
      }
      if (ops.negotiated.minor < 44) {
        const parent = p === '/' ? undefined : ops.nodes.at(parentOf(p))
        if (parent) notifier.invalEntry(parent.id, p.slice(p.lastIndexOf('/') + 1))
      }
    }
    ops.nodes.revalidate((p, ino) => {
      if (!affected(p)) return true
      const r = ov.view.resolve(p)
      return r !== null && ov.attrOf(r).ino === ino
    })
    if (ops.negotiated.minor >= 44) notifier.incEpoch()
    for (const id of stale) notifier.invalInode(id, false)
    await notifier.flush()
    watch.changed(touched, before)
  }
  const withInvalidation = async <T>(fn: () => Promise<T>): Promise<T> => {
    const before = watch.snapshot()
    try {
      return await fn()
    } finally {
      await invalidate(before)
    }
  }
  // Writes made underneath the mount, by processes that were in the directory before it.
  const underneath = Underneath.start(session, loc.workspace, dirFd, own, async (fn) => { await withInvalidation(fn) })
  const watchInfo: WatchInfo = underneath instanceof Underneath ? { state: 'watching' } : underneath
  if (watchInfo.why) process.stderr.write(`cpfs daemon: ${watchInfo.why}\n`)

  const pidFile = join(loc.dir, 'daemon.pid')
  fs.writeFileSync(pidFile, String(process.pid) + '\n', { mode: 0o600 })

  let server: Server | null = null
  let closing = false

  /** apply: run the plan to the real directory; discard: set the pending turns aside; keep: neither. */
  /**
   * `lazy`: for signals and a lost connection — a busy mount is detached instead of refused,
   * because the daemon must end (its users then see ENOTCONN, as after a crash).
   */
  const shutdown = async (mode: 'apply' | 'discard' | 'keep', force: boolean, lazy = false): Promise<unknown> => {
    if (closing) throw new CpfsError('BUSY', 'the daemon is already shutting down', 'wait a moment and check cpfs status')
    closing = true
    // Writes still buffered reach the store and the kernel lets go of the mount: seconds
    // when much was written just before.
    const unmounting = phase('unmounting', 'steps')
    try {
      if (underneath instanceof Underneath) await underneath.flush()
      await watch.drain()
      await session.flushAll(true)
      // The mount may be gone already (umount -l, fusermount -u -z): nothing to unmount then.
      if (isMounted(loc.workspace)) {
        try {
          await unmountPath(loc.workspace, ch.closed)
        } catch (err: any) {
          if (!lazy || err?.code !== 'MOUNT_BUSY') throw err
          process.stderr.write(`cpfs daemon: ${loc.workspace} is busy; detaching it (processes still inside get ENOTCONN)\n`)
          await unmountPath(loc.workspace, true)
        }
      }
    } catch (err) {
      closing = false
      throw err
    } finally {
      unmounting.end()
    }
    // Nothing reaches the real directory past the mount any more than through it now: what was
    // changed underneath until the unmount is recorded, and the plan runs on it.
    if (underneath instanceof Underneath) await underneath.stop()
    ch.stop()
    await session.quiesce() // no background capture while the plan runs
    session.origin.cacheReal(false) // plans see the real directory as it is now
    try { fs.closeSync(fd) } catch {}
    await notifier.close()
    await watch.close()
    server?.close()
    try { fs.unlinkSync(pidFile) } catch {}
    let summary: unknown = null
    let discarded: number | undefined
    try {
      if (mode === 'apply' && force) {
        await noteUnseenChanges(session)
        const kept = await absorbOutsideChanges(session, { force: true })
        if (kept) process.stderr.write(`cpfs daemon: kept ${kept.paths.length} paths changed outside cpfs as turn ${kept.turn} before replacing them\n`)
      }
      if (mode === 'apply') {
        if (opts.umask !== undefined) process.umask(opts.umask) // the real directory's files: the user's umask
        summary = await applyStack(session, { force, faults })
      }
      if (mode === 'discard') discarded = await session.discard()
    } finally {
      // What the history still needs from the real directory is kept before anyone can edit it.
      await freezeOrigin(session).catch((err) => process.stderr.write(`cpfs daemon: cannot keep the origin of unapplied turns: ${err.message}\n`))
      await session.close()
      setTimeout(() => process.exit(0), 50)
    }
    return { applied: mode === 'apply', summary, discarded }
  }

  const handle = async (req: Request): Promise<unknown> => {
    const a = req.args ?? {}
    if (closing && req.cmd !== 'ping') throw new CpfsError('BUSY', 'the mount is shutting down', 'wait for cpfs unmount to finish')
    switch (req.cmd) {
      case 'ping': return { pid: process.pid }
      case 'status': return { ...session.status(), mounted: true, pid: process.pid, ops: ch.stats, nodes: ops.nodes.size, underneath: underneath instanceof Underneath ? underneath.status() : watchInfo }
      case 'reset-stats': ch.stats = newStats(); return null
      case 'turn': return { head: await session.turn({ message: a.message as string | undefined, prompt: a.prompt as string | undefined, id: a.id as string | undefined }) }
      case 'log': return cutPaths(await logWithLines(session, Boolean(a.lines)), typeof a.paths === 'number' ? a.paths : undefined)
      case 'ids': return await session.store.turnIds()
      case 'rewind': return await withInvalidation(() => session.rewind(a.turn as string))
      case 'undo': return await withInvalidation(() => session.undo())
      case 'redo': return await withInvalidation(() => session.redo())
      case 'fork': {
        const t = session.resolveTurn(String(a.turn))
        await session.flushAll(false)
        return { turn: t, ...await forkView(session, t, String(a.dest), faults) }
      }
      case 'restore': return await withInvalidation(() => session.restore(String(a.turn), a.paths as string[]))
      case 'diff': return await diffTurns(session, a.spec as string | undefined, { patches: Boolean(a.patches), paths: a.paths as string[] | undefined })
      case 'preview-rewind': return await previewRewind(session, String(a.turn), true)
      case 'unmount': return await shutdown(a.discard ? 'discard' : 'apply', Boolean(a.force))
      default: throw new CpfsError('BAD_REQUEST', `unknown command ${req.cmd}`, 'upgrade the cpfs CLI to match the daemon')
    }
  }
  server = await serve(loc.socket, handle)

  const onSignal = (sig: string) => {
    process.stderr.write(`cpfs daemon: ${sig}, unmounting without applying (history kept)\n`)
    shutdown('keep', false, true).catch((err) => {
      process.stderr.write(`cpfs daemon: cannot shut down cleanly on ${sig}: ${err.message}; exiting anyway (the next cpfs mount recovers)\n`)
      process.exit(1)
    })
  }
  // The mount can vanish under the daemon (umount -l, fusermount -u -z, an aborted
  // connection): then there is nothing to unmount; persist, release the store and exit.
  ch.onEnd = (why) => {
    if (closing) return
    process.stderr.write(`cpfs daemon: ${why}; saving the history and exiting\n`)
    shutdown('keep', false, true).catch((err) => {
      process.stderr.write(`cpfs daemon: cannot shut down cleanly: ${err.message}\n`)
      process.exit(1)
    })
  }
  process.on('SIGTERM', () => onSignal('SIGTERM'))
  process.on('SIGINT', () => onSignal('SIGINT'))
  process.on('SIGHUP', () => onSignal('SIGHUP'))

  ready({ pid: process.pid, head: session.head, workspace: loc.workspace, store: loc.store, recovered, watch: watchInfo, ...(outside ? { outside } : {}) })
}
