// Retention: squash the oldest turns into one layer, then collect garbage. Turn T's view is
// the lower plus layers 1..T-1, so replacing layers 1..k by their merged view S (the View's
// flattened entries, which apply to an empty view exactly as the k layers did) keeps every
// later turn's view byte-exact, and the first turn (the original tree) too. What is lost is
// the ability to rewind to the starts of turns 2..k. Turns are renumbered (k-1 fewer);
// external ids stay with their turns. Branches and redo stacks that hold the same k turns get
// the merged layer too; a branch that left before turn k keeps its own layers until retention
// drops it (dropBranches: by age, or the oldest first while the store is too big).
import { CpfsError } from '../errors.js'
import { View } from '../overlay/view.js'
import { encode, encodeEntry } from '../store/codec.js'
import type { Entry } from '../store/entries.js'
import { collectGarbage, type GcResult } from '../store/gc.js'
import { entryKey, turnKey, type BatchOp } from '../store/keys.js'
import type { TurnRecord } from '../store/store.js'
import { sameStack, sharedTurns, type Branch } from '../store/branches.js'
import { pruneTargets } from './retention-plan.js'
import type { Session } from './session.js'
import { Phase, progressSink } from '../progress.js'

export interface SquashResult {
  squashed: number
  turns: number
}

/** Merge turns 1..k into one. A no-op for k < 2. */
export async function squashOldest (session: Session, k: number): Promise<SquashResult> {
  const meta = session.meta
  const { stack, applied } = meta
  if (k < 2) return { squashed: 0, turns: stack.length }
  if (k > stack.length - 1) k = stack.length - 1 // the head turn is never squashed
  if (k < 2) return { squashed: 0, turns: stack.length }
  for (let i = 0; i < k; i++) {
    if (applied.length > 0 && applied[i] !== stack[i]) {
      throw new CpfsError('PENDING', 'turns to be pruned are not applied to the real directory', 'run cpfs unmount (it applies them) before pruning')
    }
  }
  const old = stack.slice(0, k)
  const merging = new Phase(progressSink(), 'merging turns', 'turns', k)
  for (const id of old) {
    await session.history.load([id])
    merging.item()
  }
  const merged: Map<string, Entry> = View.build(session.lower, session.history.entriesOf(old)).entries
  const layer = meta.nextLayer++
  const first = session.store.turnRecord(old[0])
  const last = session.store.turnRecord(old[k - 1])
  const rec: TurnRecord = { layer, openedAt: first.openedAt, sealedAt: last.sealedAt ?? Date.now(), message: `turns 1-${k} (merged by cpfs prune)` }
  const ops: BatchOp[] = [{ type: 'put', key: turnKey(layer), value: encode(rec) }]
  for (const [p, e] of merged) ops.push({ type: 'put', key: entryKey(layer, p), value: encodeEntry(e) })
  meta.stack = [layer, ...stack.slice(k)]
  if (applied.length >= k) meta.applied = [layer, ...applied.slice(k)]
  const squash = (st: number[]): number[] => sameStack(st.slice(0, k), old) ? [layer, ...st.slice(k)] : st
  meta.redo = meta.redo.map(squash)
  for (const b of meta.branches ?? []) {
    const squashed = squash(b.stack)
    // A sandboxed run's base (its first mergeBase layers) starts with the k turns merged: it is
    // k - 1 layers shorter now, and still ends at the same layer (the run's `found`).
    if (squashed !== b.stack && b.mergeBase !== undefined && b.mergeBase >= k) b.mergeBase -= k - 1
    // A branch that left inside the k turns keeps its own layers, and shares none with the head
    // from now on: where it forked is kept, or a merge would take the original tree for its base
    // (and bring back what the head removed since).
    if (squashed === b.stack && b.mergeBase === undefined) {
      const forked = sharedTurns(b.stack, stack)
      if (forked > 0) b.mergeBase = forked
    }
    b.stack = squashed
  }
  for (const id of old) delete meta.parts?.[id]
  ops.push(session.store.metaOp())
  await session.store.batch(ops, true)
  session.history.replace(old, layer, new Map(merged))
  merging.end()
  return { squashed: k, turns: meta.stack.length }
}

export interface PruneOptions {
  keepTurns?: number
  /** Keep only the N branches left most recently. */
  keepBranches?: number
  olderThanDays?: number
}

export interface PruneResult extends SquashResult, GcResult {
  /** Branches dropped for their age, their number, or the store's size. */
  branchesDropped: number
}

export async function prune (session: Session, opts: PruneOptions): Promise<PruneResult> {
  const { branches, turns } = pruneTargets(session, opts)
  const branchesDropped = await dropBranches(session, b => branches.includes(b))
  const sq = await squashOldest(session, turns)
  const gc = await collectGarbage(session.store)
  return { ...sq, ...gc, branchesDropped }
}

/**
 * Drop the branches `which` picks (and redo's way back to them); their layers go with the next
 * garbage collection unless another stack holds them. Returns how many were dropped.
 */
export async function dropBranches (session: Session, which: (b: Branch) => boolean): Promise<number> {
  const meta = session.meta
  const gone = (meta.branches ?? []).filter(which)
  if (gone.length === 0) return 0
  meta.branches = (meta.branches ?? []).filter(b => !gone.includes(b))
  meta.redo = meta.redo.filter(st => !gone.some(b => sameStack(b.stack, st)))
  await session.store.batch([session.store.metaOp()], true)
  return gone.length
}
