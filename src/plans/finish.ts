// Finishing a journaled plan (right after it was journaled, or by `recover` after a crash):
// apply its operations, verify every path it touched, commit. A plan that cannot be applied,
// or does not verify, is rolled back to what the real directory was, from the captures.
import { CpfsError, isCpfsError } from '../errors.js'
import { belowAny } from '../paths/paths.js'
import { fingerprintOf } from '../store/fingerprints.js'
import type { Session } from '../session/session.js'
import { encode } from '../store/codec.js'
import { SKIPPED_KEY, type BatchOp } from '../store/keys.js'
import { Progress, hasJournal, readJournal, retireJournal, type Journal } from './journal.js'
import { applyOps, cleanTemps, removeAnchors, type ApplyResult } from './applier.js'
import { planViews, type PlanOp } from './planner.js'
import { lstatReal } from '../real/read.js'
import type { Sparse } from './content.js'
import { verifyPaths, type Expect, type VerifyResult } from './verifier.js'
import { phase } from '../progress.js'
import { chunkLen } from '../store/entries.js'
import { NO_FAULTS, type Faults } from './faults.js'
import { materialise } from './expect.js'
import { viewOf } from './views.js'
import { ANCHORS_KEY, commitPlan, dropAnchors, recordFingerprints, writeFingerprints } from './commit.js'

export interface PlanSummary {
  ops: number
  verified: number
  bytesWritten: number
  /** Paths the plan changed: the first ones only (CHANGED_SHOWN), so that a reply stays small. */
  changed: string[]
  /** How many paths the plan changed in all. */
  changedCount?: number
  recovered?: boolean
  /** Paths another process changed while the plan ran, left as they were. */
  skipped?: string[]
}

/** The bytes a sparse content list holds (its non-zero chunks). */
function sparseBytes (data: Sparse, size: number): number {
  let n = 0
  for (const [idx] of data) n += chunkLen(size, idx)
  return n
}

/** The bytes a plan writes: the data chunks of its file writes. */
function dataBytes (ops: PlanOp[]): number {
  return ops.reduce((n, op) => n + (op.op === 'write' ? (op.data ? sparseBytes(op.data, op.size) : op.size) : 0), 0)
}

/** Apply, verify and commit journaled plan j; `recovered`: it is being finished after a crash. */
export async function finish (session: Session, j: Journal, recovered: boolean, faults: Faults = NO_FAULTS): Promise<PlanSummary> {
  if (recovered) cleanTemps(session.lower, j.ops, j.id)
  const progress = new Progress(session)
  const applied = await applyJournal(session, j, recovered, progress, faults)
  const skipped = applied.skipped
  const expect = skipped.length ? new Map([...j.expect].filter(([p]) => !skipped.some(q => p === q || p.startsWith(q + '/')))) : j.expect
  const result = await verifyOrRollBack(session, j, expect, progress, faults)
  // Skipped paths keep the other process's version: for the store they are drift now, which
  // the next plan that touches them reports (and --force replaces).
  recordFingerprints(session, expect.keys(), j.ops.filter(o => o.op === 'remove' && o.type === 'd').map(o => o.path))
  await commitFinished(session, j, skipped, progress)
  const summary: PlanSummary = {
    ops: applied.done,
    verified: result.verified,
    bytesWritten: applied.bytesWritten,
    ...changedPaths(j.ops),
    recovered
  }
  if (skipped.length) {
    const shown = skipped.slice(0, 5).map(p => p.slice(1) || '.').join(', ') + (skipped.length > 5 ? ` and ${skipped.length - 5} more` : '')
    const when = recovered ? 'after an interrupted plan stopped' : 'while cpfs was applying'
    throw new CpfsError('SKIPPED', `another process changed ${shown} ${when}; left as that process wrote ${skipped.length === 1 ? 'it' : 'them'} (${applied.done} operations applied, ${result.verified} paths verified)`, 'check those paths; cpfs restore or a --force rewind replaces them')
  }
  return summary
}

/** Apply a journaled plan's operations; when that fails, roll the plan back and say so. */
async function applyJournal (session: Session, j: Journal, recovered: boolean, progress: Progress, faults: Faults): Promise<ApplyResult> {
  const lower = session.lower
  const applying = phase('applying', 'operations', j.ops.length, dataBytes(j.ops))
  // A plan journaled by cpfs before 0.2 has no fingerprints: it is finished as it was then.
  const prints = j.prints
  const resume = recovered && prints ? { ...progress.read(j.id), expect: j.expect } : undefined
  try {
    const applied = applyOps(lower, session.chunks, j.ops, {
      planId: j.id,
      prints,
      resume,
      progress: (i, started) => progress.write(j.id, i, started),
      onOp: () => applying.item(),
      // A plan finished after a crash is neither raced nor crashed again: what the tests check
      // there is how it finishes.
      faults: recovered ? { failOp: faults.failOp, afterWrite: faults.afterWrite } : faults
    })
    applying.end()
    return applied
  } catch (err: any) {
    progress.close(false)
    if (isCpfsError(err) && err.code === 'UNSAFE_PATH') throw err
    const cause = String(err?.message ?? err).split('\n')[0]
    try {
      await rollBack(session, j, faults)
      progress.close(true)
    } catch (back: any) {
      throw new CpfsError('APPLY_FAILED', `cannot write the real directory (${cause}), and cannot roll back (${back?.message ?? back})`, 'fix the cause (space, permissions), then run cpfs unmount again; cpfs status and cpfs unmount --discard still work')
    }
    throw new CpfsError('APPLY_FAILED', `cannot write the real directory: ${cause}; rolled back, the real directory is as it was`, 'fix the cause (space, permissions), then run the command again')
  }
}

/** Verify every path the plan should have made; a mismatch rolls the plan back, and is thrown. */
async function verifyOrRollBack (session: Session, j: Journal, expect: Map<string, Expect>, progress: Progress, faults: Faults): Promise<VerifyResult> {
  const lower = session.lower
  const verifying = phase('verifying', 'paths', expect.size, [...expect.values()].reduce((n, e) => n + (e.data ? sparseBytes(e.data, e.size!) : 0), 0))
  const result = verifyPaths(lower, expect, () => verifying.item())
  verifying.end()
  progress.close(false)
  if (result.mismatches.length) {
    // What is on the disk is not what the plan wrote (a failing disk, a write another process
    // raced): never leave it so. The roll-back makes every path the plan touched what it was
    // before, from the captures, and is itself verified.
    const shown = result.mismatches.slice(0, 5).map(m => `${m.path.slice(1) || '.'} (${m.why})`).join(', ')
    try {
      await rollBack(session, j, faults)
      progress.close(true)
    } catch (back: any) {
      removeAnchors(lower, j.ops, j.id)
      await session.store.batch(await retireJournal(session.store), true)
      progress.close(true)
      throw new CpfsError('VERIFY_FAILED', `verification failed after applying: ${shown}; the roll-back failed too (${String(back?.message ?? back).split('\n')[0]})`, 'the store still holds every version; check the disk, then run the command again')
    }
    throw new CpfsError('VERIFY_FAILED', `verification failed after applying: ${shown}; rolled back, the real directory is as it was`, 'the store still holds every version; check the disk, then run the command again')
  }
  return result
}

/** Commit a verified plan with the paths it skipped, then remove its anchors. */
async function commitFinished (session: Session, j: Journal, skipped: string[], progress: Progress): Promise<void> {
  const anchors = j.ops.some(o => o.op === 'anchor')
  await commitPlan(session, j.targetStack, j.after, [
    ...await retireJournal(session.store),
    skipped.length ? { type: 'put', key: SKIPPED_KEY, value: encode(skipped) } : { type: 'del', key: SKIPPED_KEY },
    // The anchors go once committed; a crash in between leaves this note for the next command.
    ...(anchors ? [{ type: 'put' as const, key: ANCHORS_KEY, value: encode({ id: j.id, ops: j.ops.filter(o => o.op === 'anchor') }) }] : [])
  ])
  progress.close(true)
  if (anchors) await dropAnchors(session)
}

/**
 * A plan that cannot finish (a path the real filesystem refuses, a full disk, an I/O error)
 * is rolled back: every path it touched is made what it was before (the plan captured it
 * first), temporary files go, directory modes come back, the journal is retired. The history
 * is unchanged, so the command can simply be run again once the cause is fixed.
 */
async function rollBack (session: Session, j: Journal, faults: Faults): Promise<void> {
  const lower = session.lower
  cleanTemps(lower, j.ops, j.id)
  await session.history.load([...(j.after?.newLayers ?? []), ...j.targetStack])
  const before = await viewOf(session, session.meta.applied)
  const planned = await viewOf(session, j.targetStack)
  const touched = new Set(j.ops.map(o => o.path))
  const { ops, expect } = materialise(session, before, planViews(planned, before, touched).ops)
  const batch: BatchOp[] = []
  await session.persister.syncBatch(batch)
  applyOps(lower, session.chunks, ops, { planId: j.id + 'b', faults: { afterWrite: faults.afterWrite } })
  const result = verifyPaths(lower, expect)
  removeAnchors(lower, ops, j.id + 'b')
  removeAnchors(lower, j.ops, j.id)
  if (result.mismatches.length) {
    const shown = result.mismatches.slice(0, 5).map(m => `${m.path.slice(1) || '.'} (${m.why})`).join(', ')
    throw new Error(`the roll-back did not verify: ${shown}`)
  }
  for (const p of touched) session.capture.setFingerprint(p, fingerprintOf(lstatReal(lower, p)))
  // What the roll-back made again below a directory (new inodes) is known as it is now too.
  const below = belowAny(touched)
  for (const q of [...session.capture.fingerprints.keys()]) {
    if (!touched.has(q) && below(q)) session.capture.setFingerprint(q, fingerprintOf(lstatReal(lower, q)))
  }
  await writeFingerprints(session)
  await session.store.batch(await retireJournal(session.store), true)
}

/**
 * How many changed paths a summary lists, and how many characters of them at most: a plan of
 * 1,000,000 files, or of a tree 10,000 levels deep (paths of 20,000 characters), made a reply
 * of hundreds of megabytes that the daemon could not even send before it exited.
 */
const CHANGED_SHOWN = 1000
const CHANGED_CHARS = 256 * 1024

function changedPaths (ops: PlanOp[]): { changed: string[], changedCount: number } {
  const all = new Set<string>()
  for (const op of ops) all.add(op.path)
  const changed: string[] = []
  let chars = 0
  for (const p of all) {
    if (changed.length >= CHANGED_SHOWN || chars + p.length > CHANGED_CHARS) break
    changed.push(p)
    chars += p.length
  }
  return { changed, changedCount: all.size }
}

/** Finish a plan that a crash interrupted; null when there was none. */
export async function recover (session: Session, faults: Faults = NO_FAULTS): Promise<PlanSummary | null> {
  await dropAnchors(session)
  if (!hasJournal(session.store)) return null
  // The tests make a journaled plan that can be neither finished nor rolled back (as one that
  // hit a bug in cpfs would be), to prove it never blocks unmount --discard, status, log or forget.
  faults.beforeRecover?.()
  return await finish(session, readJournal(session.store)!, true, faults)
}

/**
 * `unmount --discard` after an interrupted plan that cannot be finished (recover threw, and
 * could not roll it back either): the user asks to leave the real directory as it is, so the
 * plan is given up instead of blocking every command for good. Its temporary files go and its
 * journal is retired; the applied stack stays what it was, so the paths it did change differ
 * from their fingerprints — the next plan reports them as drift and the next mount records
 * them as outside changes: nothing in the history is lost. Returns false when there was no
 * journal left (recover rolled back before failing).
 */
export async function setAsidePlan (session: Session): Promise<boolean> {
  if (!hasJournal(session.store)) return false
  try {
    const j = readJournal(session.store)!
    cleanTemps(session.lower, j.ops, j.id)
    removeAnchors(session.lower, j.ops, j.id)
  } catch {} // an unreadable journal is retired all the same
  await session.store.batch([...await retireJournal(session.store), { type: 'del', key: ANCHORS_KEY }], true)
  new Progress(session).close(true)
  return true
}
