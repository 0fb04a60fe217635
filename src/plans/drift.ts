// Drift: where the real directory differs from what cpfs last knew of it. A plan is refused
// over drift (unless --force), so that nothing another process wrote is replaced unseen.
import type { View } from '../overlay/view.js'
import { join } from '../paths/paths.js'
import { realNames, type Lower } from '../real/lower.js'
import { ABSENT, fingerprintDrift } from '../store/fingerprints.js'
import type { Session } from '../session/session.js'
import { lstatReal } from '../real/read.js'
import type { RealState } from '../real/stat.js'
import { realContent, sameContent } from './content.js'
import { planViews, type PlanOp } from './planner.js'
import { expectOf } from './expect.js'
import { realToStack } from './views.js'

/** Why the real state of p differs from what the expected view says, or null. */
function driftOf (session: Session, expected: View, p: string, real: RealState): string | null {
  const r = expected.resolve(p)
  // A path below a non-directory does not exist; whether that ancestor drifted is checked
  // on its own when the plan touches it.
  if (!r) return real.type && !real.blockedBy ? `exists (${real.type}) but cpfs expected nothing there` : null
  if (real.blockedBy) return `is missing (${real.blockedBy.slice(1)} is not a directory)`
  const want = expectOf(session, expected, p, new Map())
  if (real.type !== want.type) return `is ${real.type ?? 'missing'}, cpfs expected ${want.type}`
  if (want.type !== 'l' && real.mode !== want.mode) return `mode ${real.mode.toString(8)}, cpfs expected ${want.mode!.toString(8)}`
  if (want.type === 'l' && real.target !== want.target) return 'symlink target changed'
  if (want.type === 'n' && (real.fmt !== want.fmt || real.rdev !== want.rdev)) return 'node type changed'
  if (want.type === 'f') {
    // Lower content that the real directory itself serves cannot have drifted from itself.
    if (r.kind === 'lower' && r.lowerPath === p && session.lower.servedByReal(p)) return null
    if (real.size !== want.size) return 'content changed'
    if (!sameContent(realContent(session.lower, p, null).data, want.data!)) return 'content changed'
  }
  return null
}

/**
 * Paths (with the reason) where the real directory differs from what cpfs last knew: its
 * fingerprint where cpfs has one (store/fingerprints.ts), otherwise the expected view. A
 * directory the plan removes is checked all the way down: anything below it that changed
 * since cpfs last looked would be lost with it.
 */
export function findDrift (session: Session, expected: View, ops: PlanOp[]): string[] {
  const drifted: string[] = []
  const seen = new Set<string>()
  const say = (p: string, why: string) => drifted.push(`${p.slice(1) || '.'} (${why})`)
  for (const op of ops) {
    if (seen.has(op.path)) continue
    seen.add(op.path)
    const real = lstatReal(session.lower, op.path)
    const f = session.capture.fingerprints.get(op.path)
    const why = f ? fingerprintDrift(f, real) : driftOf(session, expected, op.path, real) ?? unseen(session, op.path, real)
    if (why) {
      say(op.path, why)
      continue
    }
    if (op.op === 'remove' && op.type === 'd' && real.type === 'd') {
      const since = f?.at ?? session.openedAt
      walkReal(session.lower, op.path, (q, st) => {
        const fq = session.capture.fingerprints.get(q)
        const w = fq ? fingerprintDrift(fq, st) : st.ctime > since ? unseen(session, q, st) ?? 'changed after cpfs last saw it' : null
        if (w) say(q, w)
      })
    }
  }
  return drifted
}

/**
 * A real path cpfs has no fingerprint for is one the history never changed: the view shows the
 * real directory there, so it is what cpfs last knew unless it changed after the session
 * began (made or edited outside the mount while it was live, e.g. in a directory the mount
 * replaced: its entries are listed from the real directory now). Such a path gets a
 * fingerprint saying cpfs knew nothing there, so that a later command (after this plan is
 * refused, the session has ended) still finds it, and --force keeps it in the history as an
 * outside change (plans/absorb.ts).
 */
function unseen (session: Session, p: string, real: RealState): string | null {
  if (real.type === null || real.blockedBy || real.type === 'd' || real.ctime <= session.openedAt) return null
  session.capture.setFingerprint(p, ABSENT)
  return 'changed outside cpfs after the session began'
}

/**
 * Before a --force plan: outside changes cpfs has no fingerprint for get one (`unseen`), so
 * that keeping the displaced versions (plans/absorb.ts) records them with the others.
 */
export async function noteUnseenChanges (session: Session): Promise<void> {
  const { expected, target, touched } = await realToStack(session, session.meta.stack.slice())
  if (touched.size) findDrift(session, expected, planViews(expected, target, touched).ops)
}

/**
 * Every path below real directory p (not following symlinks), with its state: depth first,
 * a directory's entries before what is below them, with an explicit stack (a tree can be
 * deeper than the call stack).
 */
export function walkReal (lower: Lower, p: string, fn: (q: string, st: RealState) => void): void {
  const stack = [p]
  for (let dir = stack.pop(); dir !== undefined; dir = stack.pop()) {
    let names: string[]
    try {
      names = realNames(lower.realPath(dir))
    } catch {
      continue
    }
    const subdirs: string[] = []
    for (const name of names) {
      const q = join(dir, name)
      const st = lstatReal(lower, q)
      fn(q, st)
      if (st.type === 'd') subdirs.push(q)
    }
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i])
  }
}
