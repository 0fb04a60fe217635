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
//  - A file's content is a list of fixed-size chunks: a SHA-256 hash (content-addressed
//    chunk), null (a hole: zeros), or SRC (the same range of the lower file at `src`, which
//    is how copy-up stays O(1) and a 4 KiB write into a 1 GiB lower file stores one chunk).
//  - `n` marks an entry of the head layer whose path did not exist when the turn began:
//    removing it needs no whiteout.

export const CHUNK_SIZE = 64 * 1024
export const SRC = 1 as const

export type ChunkRef = Buffer | null | typeof SRC

export interface Meta {
  mode: number
  uid: number
  gid: number
  atime: number // milliseconds (fuse-native carries milliseconds)
  mtime: number
  ctime: number
  ino: number
  n?: 1
}

export interface FileEntry extends Meta {
  t: 'f'
  size: number
  chunks: ChunkRef[]
  src?: string
}

export interface DirEntry extends Meta {
  t: 'd'
  opaque?: 1
  redirect?: string
  fresh?: 1
}

export interface LinkEntry extends Meta {
  t: 'l'
  target: string
}

export interface Whiteout {
  t: 'w'
  n?: 1
}

export type Entry = FileEntry | DirEntry | LinkEntry | Whiteout
export type LiveEntry = FileEntry | DirEntry | LinkEntry

export const S_IFMT = 0o170000
export const S_IFREG = 0o100000
export const S_IFDIR = 0o040000
export const S_IFLNK = 0o120000

export function typeBits (e: LiveEntry): number {
  return e.t === 'f' ? S_IFREG : e.t === 'd' ? S_IFDIR : S_IFLNK
}

export function cloneEntry<T extends Entry> (e: T): T {
  if (e.t === 'f') return { ...e, chunks: e.chunks.slice() }
  return { ...e }
}

export function chunkCount (size: number): number {
  return Math.ceil(size / CHUNK_SIZE)
}
