// Running a plan against the real directory, the only way cpfs ever changes it:
//   1. plan      the pure planner compares the expected and target views;
//   2. check     every path the plan touches is compared with what the store expects
//                (drift); any difference refuses the whole plan unless `force`;
//   3. capture   the real version of every path about to change is stored as its base
//                entry, so the pre-session content stays restorable;
//   4. journal   the prepared plan (content as chunk hashes) is written to the store in the
//                same synced batch as the captures;
//   5. apply     idempotent operations, temp file + rename;
//   6. verify    every touched path is re-read and compared byte for byte;
//   7. commit    one synced batch records the new applied stack and retires the journal.
// A crash anywhere between 4 and 7 is finished by `recover` on the next command.
// Where each step lives: 1 planner.ts (over the views of views.ts), 2 drift.ts, 3 and 4 here,
// 5 to 7 finish.ts (applying with applier.ts, committing with commit.ts), as is `recover`.
import { CpfsError } from '../errors.js'
import type { View } from '../overlay/view.js'
import { isSafePath } from '../paths/paths.js'
import type { Lower } from '../real/lower.js'
import type { Session, StackChange } from '../session/session.js'
import { isInoKey } from '../store/entries.js'
import type { BatchOp } from '../store/keys.js'
import { writeJournal, type Journal } from './journal.js'
import { checkNames } from './names.js'
import { fingerprint, type Fingerprint } from './real-tree.js'
import { planViews, type PlanOp } from './planner.js'
import { lstatReal } from '../real/read.js'
import { capture, captureOtherNames } from './capture.js'
import { phase } from '../progress.js'
import { findDrift, walkReal } from './drift.js'
import { materialise } from './expect.js'
import { realToStack } from './views.js'
import { append, commitPlan } from './commit.js'
import { finish, type PlanSummary } from './finish.js'
import type { Faults } from './faults.js'

export interface RunOptions {
  force?: boolean
  targetStack: number[]
  after?: StackChange
  /** Store ops that must be durable before the plan starts (a prepared layer's entries). */
  preOps?: BatchOp[]
  /** What the tests make go wrong (faults.ts); none in production. */
  faults?: Faults
}

function newPlanId (): string {
  return Date.now().toString(36) + Math.random().toString(36).slice(2, 8)
}

export async function runPlan (session: Session, expected: View, target: View, touched: Set<string>, opts: RunOptions): Promise<PlanSummary> {
  // Containment: a recorded path with '..', an empty or '.' component, or NUL never reaches
  // the real directory, whatever the history says.
  const unsafe = [...touched].filter(p => !isInoKey(p) && !isSafePath(p)).map(p => JSON.stringify(p))
  if (unsafe.length) {
    throw new CpfsError('UNSAFE_PATH', `the history holds paths that would leave the workspace: ${unsafe.slice(0, 3).join(', ')}`, 'the store was tampered with; nothing was changed')
  }
  const plan = planViews(expected, target, touched)
  const lower = session.lower
  checkNames(plan.ops, lower.dirFd)

  // 2. drift
  const checking = phase('checking', 'paths', plan.ops.length)
  const drifted = findDrift(session, expected, plan.ops)
  checking.set(plan.ops.length)
  checking.end()
  if (drifted.length && !opts.force) {
    const shown = drifted.slice(0, 5).join(', ') + (drifted.length > 5 ? ` and ${drifted.length - 5} more` : '')
    throw new CpfsError('DRIFT', `the real directory changed outside cpfs: ${shown}`, 'inspect those paths, then run again with --force to replace them (their current content is kept in the store)')
  }

  const { ops, expect } = materialise(session, target, plan.ops)
  // Fingerprints before the captures read anything: a change another process makes after this
  // is seen by the applier's re-check and left alone; one made before it is in the capture.
  const prints = takePrints(lower, ops)

  // 3 + 4. capture and journal, in one synced batch.
  const batch: BatchOp[] = []
  const capturing = phase('keeping originals', 'paths', ops.length)
  for (const op of ops) {
    const real = lstatReal(lower, op.path)
    if (real.blockedBy) await capture(session, real.blockedBy, false, batch)
    await capture(session, op.path, op.op === 'remove' && op.type === 'd', batch)
    capturing.item()
  }
  await captureOtherNames(session, ops.map(op => op.path), ops.filter(op => op.op === 'remove' && op.type === 'd').map(op => op.path), batch)
  capturing.end()
  const journal: Journal = { id: newPlanId(), ops, expect, targetStack: opts.targetStack.slice(), prints }
  if (opts.after) journal.after = opts.after
  if (opts.preOps) append(batch, opts.preOps)
  batch.push(await writeJournal(session.store, journal))
  await session.persister.syncBatch(batch)
  return await finish(session, journal, false, opts.faults)
}

/**
 * What every path a plan touches is now, and everything below a real directory it may
 * remove or replace (a directory is only ever removed entry by entry, each compared with
 * these: what another process puts there in the meantime stays).
 */
function takePrints (lower: Lower, ops: PlanOp[]): Map<string, Fingerprint> {
  const prints = new Map<string, Fingerprint>()
  for (const op of ops) {
    if (prints.has(op.path)) continue
    const f = fingerprint(lower, op.path)
    prints.set(op.path, f)
    if (f.type === 'd' && op.op !== 'mkdir' && op.op !== 'chmod' && op.op !== 'anchor') {
      walkReal(lower, op.path, (q, st) => {
        if (!prints.has(q)) prints.set(q, { type: st.type, size: st.size, mtime: st.mtime, ctime: st.ctime, ino: st.ino })
      })
    }
  }
  return prints
}

/** Bring the real directory to the view of `stack` (default: the head's), then commit `after`. */
export async function applyStack (session: Session, opts: { force?: boolean, stack?: number[], after?: StackChange, faults?: Faults } = {}): Promise<PlanSummary> {
  const stack = (opts.stack ?? session.meta.stack).slice()
  const { expected, target, touched } = await realToStack(session, stack)
  if (touched.size === 0) {
    await commitPlan(session, stack, opts.after, [])
    return { ops: 0, verified: 0, bytesWritten: 0, changed: [] }
  }
  return await runPlan(session, expected, target, touched, { force: opts.force, targetStack: stack, after: opts.after, faults: opts.faults })
}
