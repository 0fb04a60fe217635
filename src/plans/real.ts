// Reading the real directory for plans, without ever following a symlink that is found in
// it: every path is reached through the workspace's directory handle, and each ancestor is
// checked with lstat first (an agent can plant `d -> /etc`; `d/f` must then not resolve).
import * as fs from 'node:fs'
import type { Origin } from '../overlay/origin.js'
import { ancestors } from '../overlay/paths.js'
import { ChunkStore } from '../store/chunks.js'
import { CHUNK_SIZE, S_IFMT, fromNs, type Kind } from '../store/entries.js'
import { kindOf } from '../overlay/origin.js'

export interface RealState {
  type: Kind | null
  /** S_IFMT bits and device number of a special node ('n'). */
  fmt: number
  rdev: number
  mode: number
  size: number
  atime: number
  mtime: number
  ctime: number
  atimeNs: number
  mtimeNs: number
  ctimeNs: number
  ino: number
  uid: number
  gid: number
  target?: string
  /** A non-directory ancestor that stands where the path should go through. */
  blockedBy?: string
}

const ABSENT: RealState = { type: null, fmt: 0, rdev: 0, mode: 0, size: 0, atime: 0, mtime: 0, ctime: 0, atimeNs: 0, mtimeNs: 0, ctimeNs: 0, ino: 0, uid: 0, gid: 0 }

export function lstatReal (origin: Origin, p: string): RealState {
  const chain = [...ancestors(p)].reverse().slice(1) // outermost first, without '/'
  for (const a of chain) {
    const st = fs.lstatSync(origin.realPath(a), { throwIfNoEntry: false })
    if (!st) return ABSENT
    if (!st.isDirectory()) return { ...ABSENT, blockedBy: a }
  }
  const st = fs.lstatSync(origin.realPath(p), { bigint: true, throwIfNoEntry: false })
  if (!st) return ABSENT
  const mode = Number(st.mode)
  const fmt = mode & S_IFMT
  const type = kindOf(mode)
  const a = fromNs(st.atimeNs)
  const m = fromNs(st.mtimeNs)
  const c = fromNs(st.ctimeNs)
  const out: RealState = { type, fmt, rdev: Number(st.rdev), mode: mode & 0o7777, size: Number(st.size), atime: a.ms, mtime: m.ms, ctime: c.ms, atimeNs: a.ns, mtimeNs: m.ns, ctimeNs: c.ns, ino: Number(st.ino), uid: Number(st.uid), gid: Number(st.gid) }
  if (type === 'l') out.target = fs.readlinkSync(origin.realPath(p))
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
