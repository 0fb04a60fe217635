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
import { makeOps, type OpStats } from '../fuse/ops.js'
import { mountFuse, unmountPath, loadFuse } from '../fuse/mount.js'
import { Invalidator } from '../fuse/invalidate.js'
import { applyStack, recover } from '../plans/run.js'
import { diffTurns, logWithLines, previewRewind } from '../plans/preview.js'
import { forkView } from '../plans/fork.js'
import { Session } from '../session/session.js'
import { isMounted, type Location } from '../store/locate.js'

export interface DaemonOptions {
  loc: Location
  allowOther: boolean
}

export interface ReadyInfo {
  pid: number
  head: number
  workspace: string
  store: string
  recovered: boolean
}

export async function runDaemon (opts: DaemonOptions, ready: (info: ReadyInfo) => void): Promise<void> {
  const { loc } = opts
  loadFuse() // fail early, before touching anything, when FUSE is unusable
  if (isMounted(loc.workspace)) {
    // A mount whose daemon died (kill -9): detach it so the real directory is reachable.
    await unmountPath(loc.workspace, true)
  }
  const dirFd = fs.openSync(loc.workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  let session: Session
  try {
    session = await Session.open({ storePath: loc.store, workspace: loc.workspace, dirFd, create: true })
  } catch (err) {
    fs.closeSync(dirFd)
    throw err
  }
  let recovered = false
  try {
    recovered = (await recover(session)) !== null
  } catch (err) {
    await session.close()
    throw err
  }
  const stats: OpStats = { counts: {}, ms: {} }
  let fuse: { close: () => Promise<void> }
  try {
    fuse = await mountFuse(loc.workspace, makeOps(session, stats), { allowOther: opts.allowOther })
  } catch (err) {
    await session.close()
    throw err
  }
  const invalidator = Invalidator.find()
  // Changes the daemon makes on its own must not be hidden by the kernel's caches: drop every
  // cached entry under the names the root had before or has after the change.
  const withInvalidation = async <T>(fn: () => Promise<T>): Promise<T> => {
    const before = session.overlay.view.readdir('/')
    const result = await fn()
    if (invalidator) await invalidator.rootNames([...before, ...session.overlay.view.readdir('/')])
    return result
  }
  const pidFile = join(loc.dir, 'daemon.pid')
  fs.writeFileSync(pidFile, String(process.pid) + '\n', { mode: 0o600 })

  let server: Server | null = null
  let closing = false

  const shutdown = async (apply: boolean, force: boolean): Promise<unknown> => {
    if (closing) throw new CpfsError('BUSY', 'the daemon is already shutting down', 'wait a moment and check cpfs status')
    closing = true
    try {
      await session.flushAll(true)
      await unmountPath(loc.workspace)
    } catch (err) {
      closing = false
      throw err
    }
    await fuse.close()
    await invalidator?.close()
    server?.close()
    try { fs.unlinkSync(pidFile) } catch {}
    let summary: unknown = null
    try {
      if (apply) summary = await applyStack(session, { force })
    } finally {
      await session.close()
      setTimeout(() => process.exit(0), 50)
    }
    return { applied: apply, summary }
  }

  const handle = async (req: Request): Promise<unknown> => {
    const a = req.args ?? {}
    if (closing && req.cmd !== 'ping') throw new CpfsError('BUSY', 'the mount is shutting down', 'wait for cpfs unmount to finish')
    switch (req.cmd) {
      case 'ping': return { pid: process.pid }
      case 'status': return { ...session.status(), mounted: true, pid: process.pid, ops: stats }
      case 'reset-stats': stats.counts = {}; stats.ms = {}; return null
      case 'turn': return { head: await session.turn({ message: a.message as string | undefined, id: a.id as string | undefined }) }
      case 'log': return await logWithLines(session, Boolean(a.lines))
      case 'rewind': return await withInvalidation(() => session.rewind(a.turn as string))
      case 'undo': return await withInvalidation(() => session.undo())
      case 'redo': return await withInvalidation(() => session.redo())
      case 'fork': {
        const t = session.resolveTurn(String(a.turn))
        await session.flushAll(false)
        return { turn: t, ...await forkView(session, t, String(a.dest)) }
      }
      case 'restore': return await withInvalidation(() => session.restore(String(a.turn), a.paths as string[]))
      case 'diff': return await diffTurns(session, a.spec as string | undefined, { patches: Boolean(a.patches) })
      case 'preview-rewind': return await previewRewind(session, String(a.turn), true)
      case 'unmount': return await shutdown(!a.discard, Boolean(a.force))
      default: throw new CpfsError('BAD_REQUEST', `unknown command ${req.cmd}`, 'upgrade the cpfs CLI to match the daemon')
    }
  }
  server = await serve(loc.socket, handle)

  const onSignal = (sig: string) => {
    process.stderr.write(`cpfs daemon: ${sig}, unmounting without applying (history kept)\n`)
    shutdown(false, false).catch((err) => {
      process.stderr.write(`cpfs daemon: cannot unmount on ${sig}: ${err.message}\n`)
    })
  }
  process.on('SIGTERM', () => onSignal('SIGTERM'))
  process.on('SIGINT', () => onSignal('SIGINT'))
  process.on('SIGHUP', () => onSignal('SIGHUP'))

  ready({ pid: process.pid, head: session.head, workspace: loc.workspace, store: loc.store, recovered })
}
