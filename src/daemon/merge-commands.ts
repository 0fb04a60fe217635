// The daemon's revert and merge (merge/run.ts), inside views.around: the kernel's caches of
// every path the merge changed are invalidated when it is done (or failed).
import type { Handlers } from '../control/protocol.js'
import { mergeBranchIn, revertIn } from '../merge/run.js'
import type { Session } from '../session/session.js'
import type { ViewInvalidation } from './invalidation.js'

export function mergeHandlers (d: { session: Session, views: ViewInvalidation }): Pick<Handlers, 'revert' | 'merge'> {
  const { session, views } = d
  return {
    revert: async (a) => await views.around(async () => await revertIn(session, String(a.turn), { dryRun: Boolean(a.dryRun) })),
    merge: async (a) => await views.around(async () => await mergeBranchIn(session, String(a.branch), { dryRun: Boolean(a.dryRun) }))
  }
}
