// Reading the real directory for plans, without ever following a symlink that is found in
// it: every path is reached through the workspace's directory handle, and each ancestor is
// checked with lstat first (an agent can plant `d -> /etc`; `d/f` must then not resolve).
import * as fs from 'node:fs'
import type { Origin } from '../overlay/origin.js'
import { ancestors } from '../overlay/paths.js'
import { ChunkStore } from '../store/chunks.js'
import { CHUNK_SIZE, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG } from '../store/entries.js'

export interface RealState {
  type: 'f' | 'd' | 'l' | null
  mode: number
  size: number
  atime: number
  mtime: number
  ctime: number
  ino: number
  uid: number
  gid: number
  target?: string
  /** A non-directory ancestor that stands where the path should go through. */
  blockedBy?: string
}

const ABSENT: RealState = { type: null, mode: 0, size: 0, atime: 0, mtime: 0, ctime: 0, ino: 0, uid: 0, gid: 0 }

export function lstatReal (origin: Origin, p: string): RealState {
  const chain = [...ancestors(p)].reverse().slice(1) // outermost first, without '/'
  for (const a of chain) {
    const st = fs.lstatSync(origin.realPath(a), { throwIfNoEntry: false })
    if (!st) return ABSENT
    if (!st.isDirectory()) return { ...ABSENT, blockedBy: a }
  }
  const st = fs.lstatSync(origin.realPath(p), { throwIfNoEntry: false })
  if (!st) return ABSENT
  const fmt = st.mode & S_IFMT
  const type = fmt === S_IFREG ? 'f' : fmt === S_IFDIR ? 'd' : fmt === S_IFLNK ? 'l' : null
  const out: RealState = { type, mode: st.mode & 0o7777, size: st.size, atime: Math.floor(st.atimeMs), mtime: Math.floor(st.mtimeMs), ctime: Math.floor(st.ctimeMs), ino: st.ino, uid: st.uid, gid: st.gid }
  if (type === 'l') out.target = fs.readlinkSync(origin.realPath(p))
  if (fmt !== 0 && type === null) out.type = 'f' // a FIFO or device is "something else": treated as a file that differs
  return out
}

/** SHA-256 hex of each CHUNK_SIZE piece of the real file at p; stores the chunks if asked. */
export function hashReal (origin: Origin, p: string, chunks: ChunkStore | null, hash: (b: Buffer) => Buffer): string[] {
  const fd = fs.openSync(origin.realPath(p), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
  try {
    const out: string[] = []
    const buf = Buffer.allocUnsafe(CHUNK_SIZE)
    for (;;) {
      let n = 0
      while (n < CHUNK_SIZE) {
        const got = fs.readSync(fd, buf, n, CHUNK_SIZE - n, null)
        if (got === 0) break
        n += got
      }
      if (n === 0) break
      const piece = buf.subarray(0, n)
      out.push((chunks ? chunks.put(piece) : hash(piece)).toString('hex'))
      if (n < CHUNK_SIZE) break
    }
    return out
  } finally {
    fs.closeSync(fd)
  }
}
