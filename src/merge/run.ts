// `cpfs revert TURN` and `cpfs merge bN` in the mount's daemon: one engine (plan.ts) fed with
// three views. Revert: base = the end of TURN, theirs = its start, ours = the head (the inverse
// of TURN's change, on top of everything later). Merge: base = where branch bN's own work began,
// theirs = its tip, ours = the head.
//
// Applying: pending work is sealed as a turn first, so that the merge has a turn of its own and
// a failure can drop exactly what the merge did. Then, in one synchronous step on the daemon's
// thread, the plan is made again on the live view and applied through the overlay: no FUSE
// request can land between the two, so nothing a process writes meanwhile is merged over
// unseen. The merge is then sealed as its own turn, labelled `revert turn T` / `merge bN`.
import { CpfsError } from '../errors.js'
import { View } from '../overlay/view.js'
import type { Session } from '../session/session.js'
import { sharedTurns } from '../store/branches.js'
import { branchName, branchRef, resolveRef } from '../session/tree.js'
import { applyMerge } from './apply.js'
import { mergePaths } from './paths.js'
import { planMerge, type ChangeKind, type MergeConflict, type MergePlan } from './plan.js'
import { overlayReader, Side, viewReader } from './sides.js'

export type { MergeConflict, ConflictWhy, SideInfo } from './plan.js'

/** What a revert or merge did (or, with dryRun, would do). */
export interface MergeResult {
  /** `revert turn T` or `merge bN`: the label of the turn it makes. */
  what: string
  dryRun: boolean
  /** True when the workspace changed: the merge is sealed as turn `turn`. */
  applied: boolean
  turn: number | null
  head: number
  changes: Array<{ path: string, change: ChangeKind }>
  /** Non-empty: nothing was changed (or, dry run, nothing could be). */
  conflicts: MergeConflict[]
}

/** Where the three sides come from: stacks of layers, and the layers between base and theirs. */
interface Sources {
  what: string
  base: number[]
  theirs: number[]
  between: number[]
  unsure: string[]
}

function revertSources (session: Session, spec: string): Sources {
  const t = session.resolveTurn(spec)
  const stack = session.meta.stack
  return { what: `revert turn ${t}`, base: stack.slice(0, t), theirs: stack.slice(0, t - 1), between: [stack[t - 1]], unsure: [] }
}

function mergeSources (session: Session, spec: string): Sources {
  const ref = resolveRef(session.history, branchRef(spec))
  const b = (session.meta.branches ?? []).find(x => x.n === ref.branch)!
  const k = b.mergeBase ?? sharedTurns(b.stack, session.meta.stack)
  return { what: `merge ${branchName(b)}`, base: b.stack.slice(0, k), theirs: b.stack.slice(), between: b.stack.slice(k), unsure: b.unsure ?? [] }
}

export async function revertIn (session: Session, spec: string, opts: { dryRun?: boolean } = {}): Promise<MergeResult> {
  return await mergeIn(session, () => revertSources(session, spec), opts)
}

export async function mergeBranchIn (session: Session, spec: string, opts: { dryRun?: boolean } = {}): Promise<MergeResult> {
  return await mergeIn(session, () => mergeSources(session, spec), opts)
}

async function mergeIn (session: Session, sources: () => Sources, opts: { dryRun?: boolean }): Promise<MergeResult> {
  let src = sources() // bad input fails here, before anything is sealed
  if (!opts.dryRun) {
    // Pending work becomes a turn of its own (a process may write meanwhile: seal again).
    for (let i = 0; i < 5 && !session.atStartOf(session.head); i++) await session.turn()
    src = sources()
  }
  const { history, lower, chunks } = session
  await history.load([...src.base, ...src.theirs])
  const baseView = View.build(lower, history.entriesOf(src.base))
  const theirsView = View.build(lower, history.entriesOf(src.theirs))
  const between = history.entriesOf(src.between)
  const result = (plan: MergePlan, applied: boolean, turn: number | null): MergeResult => ({
    what: src.what,
    dryRun: Boolean(opts.dryRun),
    applied,
    turn,
    head: session.head,
    changes: plan.ops.map(op => ({ path: op.path, change: op.change })),
    conflicts: plan.conflicts
  })

  // From here to the end of applying: synchronous, one step on the daemon's thread.
  const ov = session.overlay
  const ours = new Side(ov.view, overlayReader(ov), (p) => ov.fileAt(p) === null)
  const base = new Side(baseView, viewReader(baseView, chunks))
  const theirs = new Side(theirsView, viewReader(theirsView, chunks))
  const plan = planMerge(base, theirs, ours, mergePaths(between, [baseView, theirsView, ov.view]), { unsure: src.unsure })
  if (opts.dryRun || plan.conflicts.length > 0 || plan.ops.length === 0) return result(plan, false, null)
  if (!session.atStartOf(session.head)) {
    throw new CpfsError('MERGE_FAILED', `${src.what}: the workspace kept changing while its pending work was being sealed; nothing was changed`, 'run it again once the processes in the workspace are done writing')
  }
  const touched = new Set<string>()
  try {
    session.persister.collect(touched, () => applyMerge(ov, plan.ops, theirsView))
  } catch (err: any) {
    dropHead(session, touched)
    throw new CpfsError('MERGE_FAILED', `${src.what} failed halfway (${String(err?.message ?? err).split('\n')[0]}); what it had done was dropped, nothing was changed`, 'see the daemon log (cpfs status shows where it is), and cpfs merge/revert --dry-run for the plan')
  } finally {
    session.onViewChange?.(touched)
  }
  await session.persister.flushAll(true)
  const turn = session.head
  await session.turn({ message: src.what })
  return result(plan, true, turn)
}

/**
 * A merge that failed halfway: the head layer held nothing before it (its pending work was
 * sealed), so everything in it now is the merge's. Dropped from memory, and deleted from the
 * store by the next batch (the persister writes a deletion for a changed key the head lacks).
 */
function dropHead (session: Session, touched: Set<string>): void {
  const head = session.overlay.head
  for (const k of [...head.keys()]) {
    head.delete(k)
    touched.add(k)
    session.persister.changed(k)
  }
  session.reload()
}
