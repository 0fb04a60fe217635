// Fingerprints: what cpfs last knew of a real path — its type, inode, size, mode and change
// times — recorded when the mount first changes the path (before anything could depend on
// it) and again after every plan that wrote it. A plan compares each path it will touch with
// its fingerprint and refuses on any difference: that is how a write that bypassed the mount
// (a shell whose cwd was inside the directory before the mount, another sandbox, an editor
// between sessions) is never silently overwritten. ctime moves on every change to a file,
// including chmod, chown, link and xattr changes, so comparing it catches all of them.
import type { Kind } from './entries.js'

/** What an lstat of the real path says (the overlay's RealState has these fields). */
export interface RealStat {
  type: Kind | null
  blockedBy?: string
  ino: number
  size: number
  mode: number
  mtime: number
  mtimeNs: number
  ctime: number
  ctimeNs: number
}

export interface Fingerprint {
  /** null: the path did not exist. */
  t: Kind | null
  ino: number
  size: number
  mode: number
  /** mtime and ctime, milliseconds and the nanoseconds within them. */
  m: number
  mn: number
  c: number
  cn: number
  /** When cpfs recorded it (ms): files below a removed directory changed after this are drift. */
  at: number
}

export const FINGERPRINT_PREFIX = 'o'

export function fingerprintKey (path: string): string {
  return FINGERPRINT_PREFIX + path
}

export function fingerprintOf (st: RealStat, at = Date.now()): Fingerprint {
  if (st.type === null || st.blockedBy) return { t: null, ino: 0, size: 0, mode: 0, m: 0, mn: 0, c: 0, cn: 0, at }
  return { t: st.type, ino: st.ino, size: st.size, mode: st.mode, m: st.mtime, mn: st.mtimeNs, c: st.ctime, cn: st.ctimeNs, at }
}

/** How the real state differs from what cpfs last knew, in words; null when it does not. */
export function fingerprintDrift (f: Fingerprint, st: RealStat): string | null {
  const t = st.blockedBy ? null : st.type
  if (f.t !== t) return t === null ? 'was removed' : f.t === null ? `was created (${kindName(t)})` : `was replaced by a ${kindName(t)}`
  if (t === null) return null
  if (st.ino !== f.ino) return 'was replaced'
  // A directory's times move whenever entries are added or removed in it; that is checked on
  // the entries themselves. Its own mode is what belongs to it.
  if (t === 'd') return st.mode !== f.mode ? `mode changed to ${st.mode.toString(8)}` : null
  if (st.size !== f.size) return 'content changed'
  if (st.mtime !== f.m || st.mtimeNs !== f.mn) return 'content changed'
  if (st.mode !== f.mode) return `mode changed to ${st.mode.toString(8)}`
  if (st.ctime !== f.c || st.ctimeNs !== f.cn) return 'metadata changed'
  return null
}

function kindName (t: Kind): string {
  return t === 'f' ? 'file' : t === 'd' ? 'directory' : t === 'l' ? 'symlink' : 'special file'
}
