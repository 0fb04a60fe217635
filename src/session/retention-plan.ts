// What retention is set to do (config.json's "prune" over the defaults) and what its next run
// will drop, as `cpfs status` says it. Applying it is retention.ts.
import { CpfsError } from '../errors.js'
import { parseSize, readConfig } from '../store/config.js'
import type { StoreMeta, TurnRecord } from '../store/store.js'
import type { Branch } from '../store/branches.js'
import { branchName } from './tree.js'

/** What of a session (session.ts) the plan reads: kept apart so that status can use it. */
export interface RetentionReader {
  meta: StoreMeta
  store: { turnRecord: (layer: number) => TurnRecord }
}

export interface RetentionSettings {
  keepTurns?: number
  keepBranches?: number
  olderThanDays?: number
  maxSize?: string | number
  /** Hours between automatic runs (default 24). */
  intervalHours?: number
  /** false: the daemon never prunes by itself (cpfs prune still does). */
  auto?: boolean
}

/** What applies when config.json says nothing: a month of history, at most 10 GiB a workspace. */
export const RETENTION_DEFAULTS: Readonly<RetentionSettings> = { olderThanDays: 30, maxSize: '10G', intervalHours: 24, auto: true }

/** config.json's "prune" over the defaults; refused, naming the fix, when it is not an object. */
export function retentionSettings (): RetentionSettings {
  const set = readConfig().prune ?? {}
  if (typeof set !== 'object' || Array.isArray(set)) throw new CpfsError('BAD_CONFIG', '"prune" in config.json is not an object', 'write it like { "prune": { "olderThanDays": 30, "maxSize": "10G" } }, or remove it')
  return { ...RETENTION_DEFAULTS, ...set }
}

/** When the next automatic run is due (ms): an interval after the last one (or after the store was made). */
export function retentionDueAt (session: RetentionReader, s: RetentionSettings): number {
  return (session.meta.retainedAt ?? session.meta.createdAt) + (s.intervalHours ?? 24) * 3600_000
}

/** What the next run would drop, as `cpfs status` says it. */
export interface RetentionPlan {
  /** When it runs: the next unmount after this time (null: never by itself, "auto": false). */
  dueAt: number | null
  /** Branches it drops for their age or their number. */
  branches: string[]
  /** Turns of the head's line it merges for their age or their number (the oldest ones). */
  turns: number
  /** Above this many bytes of store, more branches go, then more turns, until it fits. */
  maxBytes: number | null
  settings: RetentionSettings
}

export function plannedRetention (session: RetentionReader, s = retentionSettings()): RetentionPlan {
  const { branches, turns } = pruneTargets(session, s)
  return { dueAt: s.auto === false ? null : retentionDueAt(session, s), branches: branches.map(branchName), turns, maxBytes: s.maxSize === undefined ? null : parseSize(s.maxSize), settings: s }
}

/**
 * What a prune drops for age and number: the branches left before the cutoff or past the
 * keepBranches newest, and how many of the oldest turns it merges (0, or 2 and more; the head
 * turn never). One rule for prune.ts, which applies it, and for status, which shows it.
 */
export function pruneTargets (r: RetentionReader, s: Pick<RetentionSettings, 'keepTurns' | 'keepBranches' | 'olderThanDays'>, now = Date.now()): { branches: Branch[], turns: number } {
  const { stack, branches = [] } = r.meta
  const cutoff = s.olderThanDays === undefined ? -Infinity : now - s.olderThanDays * 86400_000
  const newest = [...branches].sort((a, b) => b.leftAt - a.leftAt || b.n - a.n).slice(0, s.keepBranches ?? Infinity)
  let aged = 0
  while (aged < stack.length - 1 && (r.store.turnRecord(stack[aged]).sealedAt ?? Infinity) < cutoff) aged++
  const k = Math.min(Math.max(s.keepTurns === undefined ? 0 : stack.length - s.keepTurns, aged), stack.length - 1)
  return { branches: branches.filter(b => b.leftAt < cutoff || !newest.includes(b)), turns: k < 2 ? 0 : k }
}

