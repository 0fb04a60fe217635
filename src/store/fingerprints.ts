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
  type: Kind | null
  ino: number
  size: number
  mode: number
  /** mtime and ctime, milliseconds and the nanoseconds within them. */
  mtime: number
  mtimeNs: number
  ctime: number
  ctimeNs: number
  /** When cpfs recorded it (ms): files below a removed directory changed after this are drift. */
  at: number
}

export const FINGERPRINT_PREFIX = 'o'

export function fingerprintKey (path: string): string {
  return FINGERPRINT_PREFIX + path
}

/** A fingerprint as stored; store versions 1 to 3 named its fields t, m, mn, c and cn. */
export function storedFingerprint (raw: any): Fingerprint {
  if (raw.type === null || (raw.type === undefined && raw.t === null)) return ABSENT
  if (raw.type !== undefined) return raw as Fingerprint
  return { type: raw.t, ino: raw.ino, size: raw.size, mode: raw.mode, mtime: raw.m, mtimeNs: raw.mn, ctime: raw.c, ctimeNs: raw.cn, at: raw.at }
}

/**
 * The fingerprint of a path that did not exist, one shared object: most paths a session
 * creates have one (npm ci: ~12,000), and an object each was ~250 bytes of the daemon's heap.
 * Its `at` is 0: only a directory's `at` is ever read (drift below a removed directory).
 */
export const ABSENT: Fingerprint = Object.freeze({ type: null, ino: 0, size: 0, mode: 0, mtime: 0, mtimeNs: 0, ctime: 0, ctimeNs: 0, at: 0 })

export function fingerprintOf (st: RealStat, at = Date.now()): Fingerprint {
  if (st.type === null || st.blockedBy) return ABSENT
  return { type: st.type, ino: st.ino, size: st.size, mode: st.mode, mtime: st.mtime, mtimeNs: st.mtimeNs, ctime: st.ctime, ctimeNs: st.ctimeNs, at }
}

/** How the real state differs from what cpfs last knew, in words; null when it does not. */
export function fingerprintDrift (f: Fingerprint, st: RealStat): string | null {
  const t = st.blockedBy ? null : st.type
  if (f.type !== t) return t === null ? 'was removed' : f.type === null ? `was created (${kindName(t)})` : `was replaced by a ${kindName(t)}`
  if (t === null) return null
  if (st.ino !== f.ino) return 'was replaced'
  // A directory's times move whenever entries are added or removed in it; that is checked on
  // the entries themselves. Its own mode is what belongs to it.
  if (t === 'd') return st.mode !== f.mode ? `mode changed to ${st.mode.toString(8)}` : null
  if (st.size !== f.size) return 'content changed'
  if (st.mtime !== f.mtime || st.mtimeNs !== f.mtimeNs) return 'content changed'
  if (st.mode !== f.mode) return `mode changed to ${st.mode.toString(8)}`
  if (st.ctime !== f.ctime || st.ctimeNs !== f.ctimeNs) return 'metadata changed'
  return null
}

function kindName (t: Kind): string {
  return t === 'f' ? 'file' : t === 'd' ? 'directory' : t === 'l' ? 'symlink' : 'special file'
}
