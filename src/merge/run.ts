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
  return { what: `merge ${branchName(b)}`, base: b.stack.slice(0, k), theirs: b.stack.slice(), between: b.stack.slice(k), unsure: (b.unsure ?? []).map(p => p.startsWith('/') ? p : '/' + p) }
}

export async function revertIn (session: Session, spec: string, opts: { dryRun?: boolean } = {}): Promise<MergeResult> {
  return await mergeIn(session, () => revertSources(session, spec), opts)
}

export async function mergeBranchIn (session: Session, spec: string, opts: { dryRun?: boolean } = {}): Promise<MergeResult> {
  return await mergeIn(session, () => mergeSources(session, spec), opts)
}

async function mergeIn (session: Session, sources: () => Sources, opts: { dryRun?: boolean }): Promise<MergeResult> {
  // Planned first as it stands: bad input, a conflict or nothing to do changes nothing, not
  // even the pending work's turn.
  const first = planNow(session, await loaded(session, sources()))
  if (opts.dryRun || first.plan.conflicts.length > 0 || first.plan.ops.length === 0) return first.result(first.plan, false, null, Boolean(opts.dryRun))
  // Pending work becomes a turn of its own (a process may write meanwhile: seal again).
  for (let i = 0; i < 5 && !session.atStartOf(session.head); i++) await session.turn()
  // One stack change at a time: no rewind or turn of another client runs in between, and the
  // merge is sealed as its own turn in the same step.
  return await session.exclusive(async () => {
    const src = await loaded(session, sources())
    await session.steps.sealForTurn()
    return await applyNow(session, src)
  })
}

/**
 * Plan on the live view, apply, and seal the head as the merge's turn, with no await between
 * (see the top of this file): no write of another process lands in the merge's turn.
 */
async function applyNow (session: Session, src0: Sources): Promise<MergeResult> {
  const { plan, src, theirsView, result } = planNow(session, src0)
  if (plan.conflicts.length > 0 || plan.ops.length === 0) return result(plan, false, null, false)
  if (!session.atStartOf(session.head)) {
    throw new CpfsError('MERGE_FAILED', `${src.what}: the workspace kept changing while its pending work was being sealed; nothing was changed`, 'run it again once the processes in the workspace are done writing')
  }
  const touched = new Set<string>()
  try {
    session.persister.collect(touched, () => applyMerge(session.overlay, plan.ops, theirsView))
  } catch (err: any) {
    dropHead(session, touched)
    throw new CpfsError('MERGE_FAILED', `${src.what} failed halfway (${String(err?.message ?? err).split('\n')[0]}); what it had done was dropped, nothing was changed`, 'see the daemon log, and the plan with --dry-run')
  } finally {
    session.onViewChange?.(touched)
  }
  const turn = session.head
  await session.sealNow({ message: src.what })
  return { ...result(plan, true, turn, false), head: session.head }
}

/** The sources, once their layers are in memory. */
async function loaded (session: Session, src: Sources): Promise<Sources> {
  await session.history.load([...src.base, ...src.theirs])
  return src
}

/**
 * The plan on the live view as it is now, made synchronously: a caller that applies it right
 * after (no await between) applies it to exactly what it was made on.
 */
function planNow (session: Session, src: Sources) {
  const { history, lower, chunks } = session
  const baseView = View.build(lower, history.entriesOf(src.base))
  const theirsView = View.build(lower, history.entriesOf(src.theirs))
  const ov = session.overlay
  const ours = new Side(ov.view, overlayReader(ov), (p) => ov.fileAt(p) === null)
  const base = new Side(baseView, viewReader(baseView, chunks))
  const theirs = new Side(theirsView, viewReader(theirsView, chunks))
  const paths = mergePaths(history.entriesOf(src.between), [baseView, theirsView, ov.view])
  const plan = planMerge(base, theirs, ours, paths, { unsure: src.unsure })
  const result = (p: MergePlan, applied: boolean, turn: number | null, dryRun: boolean): MergeResult => ({
    what: src.what,
    dryRun,
    applied,
    turn,
    head: session.head,
    changes: p.ops.map(op => ({ path: op.path, change: op.change })),
    conflicts: p.conflicts
  })
  return { plan, src, theirsView, result }
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
