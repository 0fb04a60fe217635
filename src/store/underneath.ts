// Who changed what underneath the mount (daemon/underneath.ts): one `u` record per change,
// keyed by the turn (layer) that holds it, written with the turn's own records.
import { decode, encode } from './codec.js'
import { prefixEnd, underneathKey, underneathPrefix, type BatchOp } from './keys.js'
import type { Store } from './store.js'

/** The watch of writes made underneath the mount (daemon/underneath.ts): on, or off and why. */
export interface WatchInfo {
  state: 'watching' | 'off'
  /** Why it is off, in one line for the user. */
  why?: string
}

export interface WatchStatus extends WatchInfo {
  /** Directories marked so far, and whether the first walk of the tree is done. */
  dirs: number
  marked: boolean
  recorded: number
  /** Changes whose earlier content could not be kept (made through a descriptor opened before the watch). */
  notKept: number
  /** The kernel's queue overflowed once: some changes were not heard (plans still find them by fingerprint). */
  missed: boolean
}

/** One change made underneath the mount, as the history records it. */
export interface UnderneathWrite {
  /** Relative to the workspace (no leading '/'). */
  path: string
  what: 'created' | 'changed' | 'deleted'
  pid: number
  /** The process's command line (cut to 200 characters), '' when it had ended. */
  command: string
  at: number
  /** The content it replaced is in the history: rewinding to before it brings that back. */
  kept: boolean
  /** The session had changed the path too: the mount's version stays (the next plan refuses the outside one as drift). */
  conflict?: true
  /** The turn that holds the change (its number when it was recorded). */
  turn?: number
}

/** The `u` records of changes made underneath the mount, held by turn (layer) `layer` (seq: their first number). */
export function underneathOps (layer: number, seq: number, writes: UnderneathWrite[]): BatchOp[] {
  return writes.map((w, i) => ({ type: 'put' as const, key: underneathKey(layer, seq + i), value: encode(w) }))
}

/** The changes made underneath the mount that turn (layer) holds: how many, and the first `max`. */
export async function underneathOf (store: Store, layer: number, max = 20): Promise<{ count: number, first: UnderneathWrite[] }> {
  const prefix = underneathPrefix(layer)
  let count = 0
  const first: UnderneathWrite[] = []
  for await (const [, value] of store.entries({ gte: prefix, lt: prefixEnd(prefix) })) {
    count++
    if (first.length < max) first.push(decode<UnderneathWrite>(value))
  }
  return { count, first }
}
