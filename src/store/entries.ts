// Layer records. A layer maps workspace paths to entries; the view at turn T is the lower
// tree with layers 1..T-1 merged on top (later layers win). Domain rules:
//  - A whiteout ('w') says the path no longer exists; it also hides everything below it.
//  - A directory with `opaque` hides every older child (older layers and the lower tree);
//    `mkdir` always makes an opaque directory, since a new directory has no old children.
//  - A directory with `redirect` is opaque too, but its children come from the lower tree at
//    the redirect path: that is how a lower directory is renamed without copying it.
//  - Opacity hides only what is older than the entry that made the directory: `fresh` marks
//    that entry (mkdir, rename). A later layer that merely changes the directory's mode keeps
//    `opaque`/`redirect` (they say where children come from) but not `fresh`, so it hides
//    nothing that the layers in between recorded below it.
//  - A file's content is sparse: a map from chunk index (fixed CHUNK_SIZE pieces) to the
//    SHA-256 of a stored chunk, or null (zeros that hide the lower). An index with no entry
//    reads from the lower file `src` below `srcSize` (that is how copy-up stays O(1) and a
//    4 KiB write into a 1 GiB lower file stores one chunk), and as zeros (a hole) elsewhere.
//    Memory and store grow with the bytes written, never with the file's size: a truncate
//    to 10 TiB costs nothing. Files are limited to MAX_FILE_SIZE (ext4's 16 TiB).
//  - `newInTurn` marks an entry of the head layer whose path did not exist when the turn began:
//    removing it needs no whiteout.
//  - Hard links: a file (or symlink, FIFO, socket, device) with more than one name lives in an
//    inode record, a layer record keyed `#<ino>` (inoKey) rather than by a path. It holds the
//    whole state (content, mode, owner, times, xattrs) plus `links`, the number of names it has
//    (names outside the workspace included, for a real file that had them). Each name is a
//    link entry ('h') that points at the record. Records change per layer like any entry, so a
//    rewind drops a link, a write through one name or its nlink together, in one step.
//    A real (lower) file that already has several names is keyed by its real inode number: a
//    record `#<real ino>` then also serves every real name of that file that has no entry of
//    its own (View.resolve). cpfs's own inode numbers start at 2^52, so the two never meet.

export const CHUNK_SIZE = 64 * 1024
/** The largest file cpfs holds (ext4's limit with 4 KiB blocks); beyond it, EFBIG. */
export const MAX_FILE_SIZE = 16 * 1024 ** 4

/** A stored chunk's hash, or null: zeros that hide what the lower file has there. */
export type ChunkRef = Buffer | null

export interface Meta {
  mode: number
  uid: number
  gid: number
  /** Times: whole milliseconds since the epoch, plus the nanoseconds within that millisecond. */
  atime: number
  mtime: number
  ctime: number
  atimeNs?: number
  mtimeNs?: number
  ctimeNs?: number
  ino: number
  newInTurn?: 1
  /** Extended attributes (name → value), copied from the lower at copy-up; absent = none. */
  xattrs?: Record<string, Buffer>
  /** Inode records only: how many names (links) the inode has, its st_nlink. */
  links?: number
  /** Inode records made from a real file: the real path it was first reached by. */
  realPath?: string
}

export interface FileEntry extends Meta {
  kind: 'f'
  size: number
  /** Chunk index → stored chunk (see above). */
  chunks: Map<number, ChunkRef>
  /** The lower file whose bytes show through where no chunk is recorded, below srcSize. */
  src?: string
  srcSize?: number
}

export interface DirEntry extends Meta {
  kind: 'd'
  opaque?: 1
  redirect?: string
  fresh?: 1
}

export interface SymlinkEntry extends Meta {
  kind: 'l'
  target: string
}

/** A FIFO, socket or device node: `fmt` is its S_IFMT type, `rdev` its device number. */
export interface NodeEntry extends Meta {
  kind: 'n'
  fmt: number
  rdev: number
}

export interface Whiteout {
  kind: 'w'
  newInTurn?: 1
}

/** A hard link: one name of an inode record, whose state is the record's, at inoKey(ino). */
export interface HardLinkEntry {
  kind: 'h'
  ino: number
  newInTurn?: 1
}

export type Entry = FileEntry | DirEntry | SymlinkEntry | NodeEntry | Whiteout | HardLinkEntry
export type LiveEntry = FileEntry | DirEntry | SymlinkEntry | NodeEntry

/** The layer key of inode ino's record. Paths start with '/', so the two kinds of key never meet. */
export function inoKey (ino: number): string {
  return '#' + ino
}

export function isInoKey (key: string): boolean {
  return key.charCodeAt(0) === 35 // '#'
}

export function inoOfKey (key: string): number {
  return Number(key.slice(1))
}

export const S_IFMT = 0o170000
export const S_IFREG = 0o100000
export const S_IFDIR = 0o040000
export const S_IFLNK = 0o120000
export const S_IFIFO = 0o010000
export const S_IFCHR = 0o020000
export const S_IFBLK = 0o060000
export const S_IFSOCK = 0o140000

/** The kinds of node a view holds: regular file, directory, symlink, or a special node. */
export type Kind = 'f' | 'd' | 'l' | 'n'

export function typeBits (e: LiveEntry): number {
  return e.kind === 'f' ? S_IFREG : e.kind === 'd' ? S_IFDIR : e.kind === 'l' ? S_IFLNK : e.fmt
}

export function cloneEntry<T extends Entry> (e: T): T {
  const c: any = e.kind === 'f' ? { ...e, chunks: new Map(e.chunks) } : { ...e }
  if (c.xattrs) c.xattrs = { ...c.xattrs }
  return c
}

// ---- times ----------------------------------------------------------------------------------

export interface Time {
  ms: number
  ns: number
}

const wallBaseNs = BigInt(Date.now()) * 1000000n
const monoBase = process.hrtime.bigint()

/** The current time with nanosecond resolution (wall clock at start + monotonic progress). */
export function now (): Time {
  const t = wallBaseNs + (process.hrtime.bigint() - monoBase)
  return { ms: Number(t / 1000000n), ns: Number(t % 1000000n) }
}

export function fromSecNs (sec: number, nsec: number): Time {
  return { ms: sec * 1000 + Math.floor(nsec / 1000000), ns: nsec % 1000000 }
}

export function toSecNs (ms: number, ns = 0): { sec: number, nsec: number } {
  const sec = Math.floor(ms / 1000)
  return { sec, nsec: (ms - sec * 1000) * 1000000 + ns }
}

/** A bigint nanosecond timestamp (fs.Stats with bigint) as ms + ns. */
export function fromNs (t: bigint): Time {
  const ms = t / 1000000n
  let rem = t % 1000000n
  let m = ms
  if (rem < 0n) { rem += 1000000n; m -= 1n }
  return { ms: Number(m), ns: Number(rem) }
}

export function setTime (e: Meta, which: 'a' | 'm' | 'c', t: Time): void {
  if (which === 'a') { e.atime = t.ms; if (t.ns) e.atimeNs = t.ns; else delete e.atimeNs }
  else if (which === 'm') { e.mtime = t.ms; if (t.ns) e.mtimeNs = t.ns; else delete e.mtimeNs }
  else { e.ctime = t.ms; if (t.ns) e.ctimeNs = t.ns; else delete e.ctimeNs }
}

export function sameTime (a: Meta, b: Meta, which: 'a' | 'm' | 'c'): boolean {
  if (which === 'a') return a.atime === b.atime && (a.atimeNs ?? 0) === (b.atimeNs ?? 0)
  if (which === 'm') return a.mtime === b.mtime && (a.mtimeNs ?? 0) === (b.mtimeNs ?? 0)
  return a.ctime === b.ctime && (a.ctimeNs ?? 0) === (b.ctimeNs ?? 0)
}

export function chunkCount (size: number): number {
  return Math.ceil(size / CHUNK_SIZE)
}

/** Bytes of chunk idx that lie inside a file of this size. */
export function chunkLen (size: number, idx: number): number {
  return Math.max(0, Math.min(CHUNK_SIZE, size - idx * CHUNK_SIZE))
}

/** Lower bytes that still show through in e (its src cut by truncations). */
export function srcBytes (e: FileEntry): number {
  return e.src === undefined ? 0 : Math.min(e.srcSize ?? 0, e.size)
}

/** Bytes the store really holds for e, at chunk granularity (st_blocks reports this). */
export function storedBytes (e: FileEntry): number {
  let n = 0
  for (const [idx, ref] of e.chunks) if (ref) n += chunkLen(e.size, idx)
  const src = srcBytes(e)
  if (src > 0) {
    n += src
    for (const idx of e.chunks.keys()) if (idx * CHUNK_SIZE < src) n -= Math.min(CHUNK_SIZE, src - idx * CHUNK_SIZE)
  }
  return n
}
