// Changes made underneath the mount: by a process whose cwd, root or open descriptor was in
// the directory before `cpfs mount` covered it (a shell the mount was started from, an agent
// started before it), and so reaches the real files past cpfs. daemon/underneath.ts hears of
// them (fanotify); this module puts them in the history, as the mount's own writes are:
// - before such a process opens a real file, the file's content is kept as its original (its
//   base entry), so a truncating open or a `sed -i` cannot destroy bytes no turn holds;
// - after the change, the path's new state is recorded as changes made outside cpfs are when
//   nothing is mounted (plans/absorb.ts): in a turn of its own that the real directory holds,
//   after the turns it held and before the session's pending ones (one such turn per session,
//   extended as more is heard), with who made each change (`u` records: pid, command, time).
// So `cpfs log` lists the path, `cpfs rewind` to before that turn brings the original back,
// and a plan knows the real directory holds the change. A path the session changed too is
// left alone (the mount's version stays, and the next plan refuses to overwrite the outside
// one, as for any outside edit): the record says so.
import * as fs from 'node:fs'
import type { View } from '../overlay/view.js'
import { lstatReal } from '../overlay/real.js'
import { fingerprintOf, type RealStat } from '../store/fingerprints.js'
import type { Session } from './session.js'


/**
 * The view's p is the real directory's p itself, nothing in the history stands in between:
 * no entry for p, and every directory above reaches the real directory at its own path.
 */
export function plainPath (view: View, p: string): boolean {
  if (view.entries.has(p) || view.originPathFor(p) !== p) return false
  const r = view.resolve(p)
  return r === null || (r.kind === 'origin' && r.originPath === p)
}

/** Born (statx birth time; ctime where the filesystem has none) at or after `since`. */
function bornSince (session: Session, p: string, since: number): boolean | null {
  try {
    const st = fs.lstatSync(session.origin.reach(p))
    return (st.birthtimeMs > 0 ? st.birthtimeMs : st.ctimeMs) >= since
  } catch {
    return null
  }
}

/**
 * Another process is about to open real file p: keep what it holds now as p's original, once.
 * A file made after the watch began has no original (it did not exist): the change record
 * says so instead. Returns true when it kept something.
 */
export async function keepBeforeOpen (session: Session, p: string, since: number): Promise<boolean> {
  if (!session.origin.servedByReal(p) || !plainPath(session.overlay.view, p)) return false
  const st = lstatReal(session.origin, p)
  if (st.type !== 'f' || st.blockedBy) return false
  if (bornSince(session, p, since) !== false) return false
  const op = await session.captureBaseAsync(p)
  if (!op) return false
  await session.storeNow([op])
  return true
}

/**
 * Before the changes made underneath to p are recorded (plans/absorb.ts finds them as drift
 * from p's fingerprint): a name made there had nothing before it, which its fingerprint must
 * say when cpfs had none (a new file, a new directory).
 */
export function noteMade (session: Session, p: string): void {
  if (session.fingerprints.has(p)) return
  session.setFingerprint(p, fingerprintOf({ type: null } as RealStat))
}
