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
import { lstatReal } from '../real/read.js'
import { fingerprintDrift, fingerprintOf, type RealStat } from '../store/fingerprints.js'
import type { Session } from './session.js'


/**
 * The view's p is the real directory's p itself, nothing in the history stands in between:
 * no entry for p, and every directory above reaches the real directory at its own path.
 */
export function plainPath (view: View, p: string): boolean {
  if (view.entries.has(p) || view.lowerPathFor(p) !== p) return false
  const r = view.resolve(p)
  return r === null || (r.kind === 'lower' && r.lowerPath === p)
}

/** Born (statx birth time; ctime where the filesystem has none) at or after `since`. */
function bornSince (session: Session, p: string, since: number): boolean | null {
  try {
    const st = fs.lstatSync(session.lower.reach(p))
    return (st.birthtimeMs > 0 ? st.birthtimeMs : st.ctimeMs) >= since
  } catch {
    return null
  }
}

/**
 * Files up to this size are kept before another process opens them underneath. Any open counts
 * (`sed -i` reads the file it then renames over), so a process underneath that reads a whole
 * tree copies it into the store once; bigger files (data sets, images) are left to their
 * writers, and a change to one is recorded as not kept.
 */
const KEEP_BYTES = Number(process.env.CPFS_UNDERNEATH_KEEP_BYTES ?? 64 * 1024 * 1024)

/**
 * Another process is about to open real file p: keep what it holds now as p's original, once.
 * A file made after the watch began has no original (it did not exist): the change record
 * says so instead. Returns true when it kept something.
 */
export async function keepBeforeOpen (session: Session, p: string, since: number): Promise<boolean> {
  if (!session.lower.servedByReal(p) || !plainPath(session.overlay.view, p)) return false
  return await keepAsOriginal(session, p, p, since)
}

/**
 * A file moved underneath from `from` to `to` before cpfs kept it: a move changes no byte, so
 * what `to` holds now is what `from` held — kept as from's original, and from's fingerprint
 * says it was there. With `to` counted as made (the caller notes it), a rewind puts the file
 * back where it was.
 */
export async function keepMoved (session: Session, from: string, to: string, since: number): Promise<boolean> {
  if (!session.lower.servedByReal(from) || session.capture.fingerprints.has(from) || !plainPath(session.overlay.view, from)) return false
  return await keepAsOriginal(session, from, to, since)
}

/**
 * Keep what real file `source` holds as p's original (its base entry), with p's fingerprint
 * when cpfs had none. Only a regular file older than the watch (one made since had no
 * original), within KEEP_BYTES and the room the store's disk can spare.
 */
async function keepAsOriginal (session: Session, p: string, source: string, since: number): Promise<boolean> {
  const lower = session.lower
  const before = lstatReal(lower, source)
  if (before.type !== 'f' || before.blockedBy || before.size > KEEP_BYTES || !session.space.roomToSpare(before.size)) return false
  if (bornSince(session, source, since) !== false) return false
  const e = await session.capture.realEntryAsync(source) // its chunks go to the store as they are read
  // Changed while it was read (an open let go after its wait): that is not the original.
  if (fingerprintDrift(fingerprintOf(before), lstatReal(lower, source)) || !lower.servedByReal(p)) return false
  lower.setBase(p, e)
  if (!session.capture.fingerprints.has(p)) session.capture.setFingerprint(p, fingerprintOf(before))
  await session.persister.storeNow([session.store.baseOp(p, e)])
  return true
}

/**
 * Before the changes made underneath to p are recorded (plans/absorb.ts finds them as drift
 * from p's fingerprint): a name made there had nothing before it, which its fingerprint must
 * say when cpfs had none (a new file, a new directory).
 */
export function noteMade (session: Session, p: string): void {
  if (session.capture.fingerprints.has(p)) return
  session.capture.setFingerprint(p, fingerprintOf({ type: null } as RealStat))
}
