// The one stat of the overlay: the attributes it answers with (as FUSE sends them back), and
// what it keeps of a real file's lstat (the same, with its kind).
import type { Kind } from '../store/entries.js'

export interface Attr {
  /** Full st_mode, type bits included. */
  mode: number
  uid: number
  gid: number
  size: number
  /** Times in milliseconds, and the nanoseconds within the millisecond. */
  atime: number
  mtime: number
  ctime: number
  atimeNs: number
  mtimeNs: number
  ctimeNs: number
  ino: number
  nlink: number
  blocks: number
  rdev: number
}

/** A real path's lstat as the mount shows it (Origin's cache): the attributes, and the kind. */
export interface OriginStat extends Attr {
  kind: Kind
}
