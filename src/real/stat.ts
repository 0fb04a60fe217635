// The one stat: the attributes the overlay answers with (Attr). Every other stat type is Attr
// with what its place adds: the lower layer's cache of a real lstat (LowerStat: its kind), a
// plan's look at a real path (RealState: absent, or blocked), the FUSE wire (WireAttr:
// blksize, fuse/wire.ts). A layer entry's attributes are the store's record (entries.ts Meta).
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

/** A real path's lstat as the mount shows it (Lower's cache): the attributes, and the kind. */
export interface LowerStat extends Attr {
  kind: Kind
}

/** A plan's look at a real path now (real/read.ts lstatReal): absent, blocked, or its attributes. */
export interface RealState extends Omit<Attr, 'mode' | 'blocks'> {
  /** null: nothing there (or blockedBy). */
  type: Kind | null
  /** Permission bits only: the type is `type`, with `fmt` (S_IFMT bits) for a special node ('n'). */
  mode: number
  fmt: number
  target?: string
  /** A non-directory ancestor that stands where the path should go through. */
  blockedBy?: string
}
