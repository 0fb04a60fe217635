// The attributes the overlay answers with (a stat, as FUSE sends it back), what a SETATTR may
// change, and how attributes are made from whatever a path resolves to.
import { S_IFMT, storedBytes, typeBits, type LiveEntry, type Time } from '../store/entries.js'
import type { Resolved } from './view.js'
import type { Attr } from '../real/stat.js'

export type { Attr } from '../real/stat.js'

/** Who asks: the owner new files get (from the FUSE request header). */
export interface Caller {
  uid: number
  gid: number
}

/** A time to set: a value, the current time, or leave it as it is. */
export type TimeSet = Time | 'now' | null

/** What a SETATTR changes; absent fields stay. */
export interface SetAttr {
  mode?: number
  uid?: number
  gid?: number
  size?: number
  atime?: TimeSet
  mtime?: TimeSet
  /** An explicit ctime (otherwise the change sets it to now). */
  ctime?: Time
  /** The kernel asks the filesystem to clear set-ID bits (truncate or chown, HANDLE_KILLPRIV_V2). */
  killSuidGid?: KillSetId
}

/**
 * Set-ID bits are to be cleared (the caller lacks CAP_FSETID); inGroup says whether the caller
 * is in a group or may act as if (a non-executable set-group-ID file keeps its bit for them).
 */
export interface KillSetId {
  inGroup: (gid: number) => boolean
}

/** Attributes of a resolved path (a directory's nlink only by getattr, which knows its path). */
export function attrOf (r: Resolved): Attr {
  if (r.kind === 'lower' && 'nlink' in r.stat) {
    const st = r.stat
    return { mode: st.mode, uid: st.uid, gid: st.gid, size: st.size, atime: st.atime, mtime: st.mtime, ctime: st.ctime, atimeNs: st.atimeNs, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, ino: st.ino, nlink: st.nlink, blocks: st.blocks, rdev: st.rdev }
  }
  const e = r.kind === 'upper' ? r.entry : r.stat as LiveEntry
  // A directory the mount made or changed is one ext4 block, as most are on ext4: size 4096,
  // 8 sectors (docs/decisions.md, "Directory sizes"). Untouched ones show the real stat.
  // FIFOs, sockets and device nodes have size 0, as on ext4.
  const size = e.kind === 'f' ? e.size : e.kind === 'l' ? Buffer.byteLength(e.target) : e.kind === 'd' ? 4096 : 0
  return {
    mode: (e.mode & ~S_IFMT) | typeBits(e),
    uid: e.uid,
    gid: e.gid,
    size,
    atime: e.atime,
    mtime: e.mtime,
    ctime: e.ctime,
    atimeNs: e.atimeNs ?? 0,
    mtimeNs: e.mtimeNs ?? 0,
    ctimeNs: e.ctimeNs ?? 0,
    ino: e.ino,
    nlink: e.kind === 'd' ? 2 : e.links ?? 1,
    blocks: e.kind === 'f' ? Math.ceil(storedBytes(e) / 512) : e.kind === 'd' ? 8 : 0,
    rdev: e.kind === 'n' ? e.rdev : 0
  }
}

/** The metadata of an entry built from attributes (type bits dropped). */
export function metaOf (a: Attr | LiveEntry) {
  const m: any = { mode: a.mode & 0o7777, uid: a.uid, gid: a.gid, atime: a.atime, mtime: a.mtime, ctime: a.ctime, ino: a.ino }
  if (a.atimeNs) m.atimeNs = a.atimeNs
  if (a.mtimeNs) m.mtimeNs = a.mtimeNs
  if (a.ctimeNs) m.ctimeNs = a.ctimeNs
  return m as { mode: number, uid: number, gid: number, atime: number, mtime: number, ctime: number, ino: number, atimeNs?: number, mtimeNs?: number, ctimeNs?: number }
}
