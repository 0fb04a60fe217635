// Committing a plan: one synced batch makes the new applied stack (and the history change that
// goes with it) take effect, after the fingerprints of what the plan wrote; then the anchors
// (hard links, applier.ts) that a committed plan no longer needs go.
import { isWithin } from '../paths/paths.js'
import { fingerprintOf } from '../store/fingerprints.js'
import type { Session, StackChange } from '../session/session.js'
import { decode } from '../store/codec.js'
import type { BatchOp } from '../store/keys.js'
import { lstatReal } from '../real/read.js'
import { removeAnchors } from './applier.js'
import type { PlanOp } from './planner.js'

/** Store key of the anchors (hard links) a committed plan still has to remove. */
export const ANCHORS_KEY = 'a'

/** Append `more` to `ops` one by one: `ops.push(...more)` overflows the call stack for big lists. */
export function append<T> (ops: T[], more: Iterable<T>): T[] {
  for (const op of more) ops.push(op)
  return ops
}

/** The directories of `dirs` that are not below another one of them. */
function outermost (dirs: string[]): string[] {
  const out: string[] = []
  for (const d of [...new Set(dirs)].sort((a, b) => a.length - b.length)) if (!out.some(o => isWithin(d, o))) out.push(d)
  return out
}

/** After a plan verified: the real paths it wrote are what cpfs knows of them now. */
export function recordFingerprints (session: Session, paths: Iterable<string>, removedDirs: string[]): void {
  const inos = new Set<number>()
  // One pass over the fingerprints for all removed directories (the outermost ones suffice):
  // a pass per directory was quadratic for a plan that removes many.
  const tops = outermost(removedDirs)
  if (tops.length) {
    const gone: string[] = []
    for (const [q, f] of session.capture.fingerprints) {
      if (!tops.some(d => q !== d && isWithin(q, d))) continue
      if (f.type !== null && f.type !== 'd') inos.add(f.ino) // a name that went with its directory
      gone.push(q)
    }
    for (const q of gone) session.capture.setFingerprint(q, null)
  }
  for (const p of paths) {
    const old = session.capture.fingerprints.get(p)
    // A name removed or replaced moved the ctime of the file it was (its other names').
    if (old && old.type !== null && old.type !== 'd') inos.add(old.ino)
    const st = lstatReal(session.lower, p)
    session.capture.setFingerprint(p, fingerprintOf(st))
    if (st.type !== null && st.type !== 'd' && st.nlink > 1) inos.add(st.ino)
  }
  // A file rewritten in place, linked or unlinked changed its other names too (hard links):
  // those still that file are known as they are now.
  if (inos.size) {
    for (const [q, f] of [...session.capture.fingerprints]) {
      if (f.type === null || f.type === 'd' || !inos.has(f.ino)) continue
      const st = lstatReal(session.lower, q)
      if (st.ino === f.ino) session.capture.setFingerprint(q, fingerprintOf(st))
    }
  }
}

/** Remove the anchors a committed plan left (applier.ts), then forget them. */
export async function dropAnchors (session: Session): Promise<void> {
  const raw = session.store.getSync(ANCHORS_KEY)
  if (!raw) return
  const { id, ops } = decode<{ id: string, ops: PlanOp[] }>(raw)
  const inos = removeAnchors(session.lower, ops, id)
  // Losing the anchor name moved those files' ctime: their names are known as they are now,
  // or the next plan would take that for a change made outside cpfs.
  for (const [q, f] of [...session.capture.fingerprints]) if (f.type !== null && f.type !== 'd' && inos.has(f.ino)) session.capture.setFingerprint(q, fingerprintOf(lstatReal(session.lower, q)))
  await session.store.batch([...session.capture.fingerprintOps(), { type: 'del', key: ANCHORS_KEY }], true)
}

/**
 * One synced batch: the real directory holds the view of `stack` now, and the history change
 * that goes with it (if any) takes effect — never one without the other.
 */
export async function commitPlan (session: Session, stack: number[], after: StackChange | undefined, extra: BatchOp[]): Promise<void> {
  const ops: BatchOp[] = []
  if (after) {
    await session.history.load([...after.newLayers, ...after.stack])
    append(ops, session.applyChange(after))
  }
  // The records `after` writes are not in the store yet: sealing the head must see its own.
  append(ops, session.appliedOps(stack, after?.records))
  await writeFingerprints(session)
  ops.push(session.store.metaOp())
  append(ops, extra)
  await session.store.batch(ops, true)
}

/**
 * Fingerprints changed by a plan go to LevelDB in unsynced slices, ahead of the synced batch
 * that commits it (which makes them durable: LevelDB writes its log in order). In that batch
 * they were a few hundred megabytes for 1,000,000 files. Written before the commit they say
 * what the real directory already holds; a crash before the commit leaves the journal, and
 * `recover` verifies and writes them again.
 */
export async function writeFingerprints (session: Session): Promise<void> {
  for (let ops = session.capture.fingerprintOps(FINGERPRINTS_PER_BATCH); ops.length; ops = session.capture.fingerprintOps(FINGERPRINTS_PER_BATCH)) {
    await session.store.batch(ops)
  }
}

const FINGERPRINTS_PER_BATCH = 20_000
