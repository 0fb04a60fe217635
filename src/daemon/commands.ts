// What the daemon answers on its control socket: one handler per command of the protocol's
// table (control/protocol.ts), so a command the table has and the daemon does not, or one
// whose arguments or result differ, does not compile.
import type { Channel } from '../fuse/channel.js'
import type { FuseOps } from '../fuse/ops.js'
import { newStats } from '../fuse/stats.js'
import type { Handlers, MemoryStatus, UnmountResult } from '../control/protocol.js'
import { forkView } from '../plans/fork.js'
import type { Faults } from '../plans/faults.js'
import { blamePath } from '../reports/blame.js'
import { stepReport } from '../reports/step-report.js'
import { diffByCommand } from '../reports/by-command.js'
import { listSteps } from '../reports/step-list.js'
import { undoStepIn } from '../session/undo-step.js'
import { cutPaths, diffTurns, logWithLines, previewRewind } from '../reports/preview.js'
import type { Session } from '../session/session.js'
import { branchLog } from '../session/branch-log.js'
import type { ViewInvalidation } from './invalidation.js'
import type { WatchInfo } from '../store/underneath.js'
import { Underneath } from './underneath.js'
import { importSandbox } from '../merge/import-sandbox.js'
import { mergeHandlers } from './merge-commands.js'
import type { ViewMounts } from './view-mounts.js'
import { viewHandlers } from './view-commands.js'

/** What the handlers work with: the mount's parts, and the daemon's own shutdown. */
export interface DaemonParts {
  session: Session
  ch: Channel
  ops: FuseOps
  views: ViewInvalidation
  underneath: Underneath | WatchInfo
  faults: Faults
  /** The views of old turns this daemon serves (view-mounts.ts). */
  viewMounts: ViewMounts
  shutdown: (mode: 'apply' | 'discard', force: boolean) => Promise<UnmountResult>
}

/** What the daemon's memory holds now, and its budgets (store/memory.ts). */
export function memoryStatus (session: Session): MemoryStatus {
  const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage()
  return {
    usage: { rss, heapTotal, heapUsed, external, arrayBuffers },
    budgets: session.budgets,
    held: { chunkCache: session.chunks.cachedBytes, pending: session.chunks.pendingBytes(), inflight: session.persister.inflight, dirty: session.persister.unflushed, chunkBuffers: session.chunks.buffers.kept }
  }
}

export function daemonHandlers (d: DaemonParts): Handlers {
  const { session, views } = d
  return {
    ping: () => ({ pid: process.pid }),
    status: () => ({
      ...session.status(),
      mounted: true,
      pid: process.pid,
      ops: d.ch.stats,
      nodes: d.ops.nodes.size,
      underneath: d.underneath instanceof Underneath ? d.underneath.status() : d.underneath,
      memory: memoryStatus(session)
    }),
    'reset-stats': () => { d.ch.stats = newStats(); return null },
    turn: async (a) => ({ head: await session.turn({ message: a.message, prompt: a.prompt, id: a.id }) }),
    log: async (a) => cutPaths(await logWithLines(session, Boolean(a?.lines)), typeof a?.paths === 'number' ? a.paths : undefined),
    ids: async () => await session.store.turnIds(),
    branches: async () => await branchLog(session.history, session.lower),
    rewind: async (a) => await views.around(async () => await session.rewind(String(a.turn))),
    undo: async () => await views.around(async () => await session.undo()),
    redo: async (a) => await views.around(async () => await session.redo(a?.branch === undefined ? undefined : String(a.branch))),
    fork: async (a) => {
      const t = session.resolveTurn(String(a.turn))
      await session.persister.flushAll(false)
      return { turn: t, ...await forkView(session, t, String(a.dest), d.faults) }
    },
    // Loaded when a push comes: the S3 client is not what a mount should start with.
    push: async (a) => await (await import('../remote/push.js')).pushHistory(session, a.remote, { force: a.force, env: a.env }),
    pull: async (a) => await (await import('../remote/pull.js')).pullHistory(session, a.remote, { env: a.env, full: a.full }),
    restore: async (a) => await views.around(async () => await session.restore(String(a.turn), a.paths)),
    diff: async (a) => await diffTurns(session, a?.spec, { patches: Boolean(a?.patches), paths: a?.paths }),
    blame: async (a) => await blamePath(session, String(a.path)),
    'preview-rewind': async (a) => await previewRewind(session, String(a.turn), true),
    'step-begin': async (a) => await session.steps.begin(a ?? {}),
    'step-end': async (a) => await session.steps.end(a?.ref),
    'step-end-session': async (a) => ({ ended: await session.steps.endSession(String(a.session)) }),
    'diff-by-command': async (a) => await diffByCommand(session, a?.spec),
    'step-show': async (a) => await stepReport(session, String(a.ref)),
    steps: async (a) => await listSteps(session, typeof a?.last === 'number' ? a.last : 100),
    'undo-step': async (a) => await views.around(async () => await undoStepIn(session, String(a.ref), { force: Boolean(a.force), dryRun: Boolean(a.dryRun) })),
    unmount: async (a) => await d.shutdown(a?.discard ? 'discard' : 'apply', Boolean(a?.force)),
    'sandbox-start': () => ({ applied: session.meta.applied.slice() }),
    'import-sandbox': async (a) => await importSandbox(session, a),
    ...mergeHandlers(d),
    ...viewHandlers(d.viewMounts)
  }
}
