// Freeze: when a mounted session ends, the history may still depend on real files it has not
// applied — a file written in the mount that points at its original bytes (copy-up is O(1):
// `src`), a directory moved in the mount (its children stay at the old place: `redirect`),
// the state a discarded or rewound turn started from. Outside edits between sessions must not
// change those turns, so their lower is captured into the store now (base entries), once;
// applied turns need nothing: the plan that applied them captured every path it changed.
import { lstatReal } from '../real/read.js'
import type { Session } from '../session/session.js'
import type { BatchOp } from '../store/keys.js'
import { capture } from './capture.js'
import { fingerprintDrift } from '../store/fingerprints.js'
import { isInoKey } from '../store/entries.js'
import { keptStacks } from '../store/branches.js'
import { depth, parentOf } from '../paths/paths.js'

export async function freezeLower (session: Session): Promise<number> {
  const meta = session.meta
  const applied = new Set(session.history.expand(meta.applied))
  const ids = new Set<number>(session.history.expand(keptStacks(meta).flat()))
  const files = new Set<string>()
  const trees = new Set<string>()
  for (const id of ids) {
    if (applied.has(id)) continue
    await session.history.load([id])
    for (const [p, e] of session.history.layers.get(id)!) {
      if (!isInoKey(p)) files.add(p)
      if (e.kind === 'f' && e.src !== undefined) files.add(e.src)
      if (e.kind !== 'w' && e.kind !== 'h' && e.realPath !== undefined) files.add(e.realPath)
      if (e.kind === 'd' && e.redirect !== undefined) trees.add(e.redirect)
    }
  }
  const ops: BatchOp[] = []
  const lower = session.lower
  for (const p of trees) await capture(session, p, true, ops)
  // Parents first: below a path the real directory does not have, nothing is there either
  // (most paths a session made), and that is known without looking. Looking (servedByReal,
  // lstatReal) costs O(depth) per path: hours for the 10,000 paths of a 10,000-level tree.
  // Likewise below a path given a whiteout base here: the lower is that whiteout, not the
  // real directory (servedByReal is false).
  const absent = new Set<string>()
  const hidden = new Set<string>()
  for (const p of [...files].map(p => ({ p, d: depth(p) })).sort((a, b) => a.d - b.d).map(x => x.p)) {
    const f = session.capture.fingerprints.get(p)
    const parent = p === '/' ? null : parentOf(p)
    if (parent !== null && hidden.has(parent)) {
      hidden.add(p)
      continue
    }
    if (!f && parent !== null && absent.has(parent)) {
      absent.add(p)
      continue
    }
    if (!lower.servedByReal(p)) continue
    if (f && f.type === null) {
      // cpfs knew nothing was there; what may be there now came from outside.
      lower.setBase(p, { kind: 'w' })
      ops.push(session.store.baseOp(p, { kind: 'w' }))
      hidden.add(p)
      continue
    }
    const real = lstatReal(lower, p)
    if (real.type === null) { // nothing real there: nothing to keep
      absent.add(p)
      continue
    }
    // Changed outside since cpfs saw it: that is not the original (absorb and drift deal with it).
    if (f && fingerprintDrift(f, real)) continue
    await capture(session, p, false, ops)
  }
  if (ops.length === 0) return 0
  for (const op of session.capture.fingerprintOps()) ops.push(op) // no push(...): it can be 100,000s
  await session.persister.syncBatch(ops)
  return ops.length
}
