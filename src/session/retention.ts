// Retention, bounded by default (issue 23, part 7): a history that keeps every branch must not
// grow without end. The "prune" settings of config.json, with defaults, are applied by the
// daemon after an unmount (in the background: the unmount has answered), at most once per
// interval, and by `cpfs prune` now. `cpfs status` says what the next run will drop.
//   { "prune": { "olderThanDays": 30, "maxSize": "10G", "keepTurns": 50, "keepBranches": 20,
//                "intervalHours": 24, "auto": true } }
import { parseSize } from '../store/config.js'
import { collectGarbage } from '../store/gc.js'
import type { RetentionSettings } from './retention-plan.js'
import { dropBranches, prune, squashOldest, type PruneResult } from './prune.js'
import type { Session } from './session.js'

/**
 * Apply retention now: prune by age and number, then, while the store is over maxSize, drop the
 * branch left longest ago, then merge the oldest turns, one at a time. `bytes` measures the
 * store. Records when it ran (the interval counts from there).
 */
export async function retain (session: Session, s: RetentionSettings, bytes: () => number): Promise<PruneResult> {
  let result = await prune(session, { keepTurns: s.keepTurns, keepBranches: s.keepBranches, olderThanDays: s.olderThanDays })
  if (s.maxSize !== undefined) {
    const max = parseSize(s.maxSize)
    const collect = async (): Promise<void> => {
      const gc = await collectGarbage(session.store)
      result = { ...result, layersDeleted: result.layersDeleted + gc.layersDeleted, chunksDeleted: result.chunksDeleted + gc.chunksDeleted, bytesFreed: result.bytesFreed + gc.bytesFreed }
    }
    while (bytes() > max && (session.meta.branches ?? []).length > 0) {
      const oldest = Math.min(...session.meta.branches!.map(b => b.leftAt))
      result.branchesDropped += await dropBranches(session, b => b.leftAt === oldest)
      await collect()
    }
    while (bytes() > max && session.meta.stack.length > 2) {
      const sq = await squashOldest(session, 2)
      if (sq.squashed === 0) break
      result = { ...result, squashed: result.squashed + sq.squashed - 1, turns: sq.turns }
      await collect()
    }
  }
  session.meta.retainedAt = Date.now()
  await session.store.batch([session.store.metaOp()], true)
  return result
}

export { RETENTION_DEFAULTS, plannedRetention, retentionDueAt, retentionSettings, type RetentionPlan, type RetentionSettings } from './retention-plan.js'
