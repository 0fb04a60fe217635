// Reading the real directory for plans, without ever following a symlink that is found in
// it: every path is reached through a directory handle opened below the workspace's own
// without following any symlink (Lower.dirHandle: an agent can plant `d -> /etc`; `d/f` must
// then not resolve).
import * as fs from 'node:fs'
import { SEEK_DATA, SEEK_HOLE, native } from '../native/index.js'
import { hashChunk, isZero, type ChunkStore } from '../store/chunks.js'
import { CHUNK_SIZE, S_IFMT, chunkLen, fromNs, type LiveEntry, type Meta, type Whiteout } from '../store/entries.js'
import { failedAt, kindOf, realXattrs, type Lower } from './lower.js'
import { ancestorsDown, isWithin, parentOf } from '../paths/paths.js'
import { openFile } from './nofollow.js'
import { countBytes } from '../progress.js'
import type { RealState } from './stat.js'

/** Where the chunks of real files read go: the store, or (a push) a remote's packs. */
export type ChunkSink = Pick<ChunkStore, 'put'>

/** File content as a sparse list of [chunk index, SHA-256 hex] for every chunk that is not all zeros. */
export type Sparse = Array<[number, string]>

/** Hash (and with `store`, keep) one chunk's bytes; null for zeros. */
export function chunkHex (piece: Buffer, store: ChunkSink | null): string | null {
  if (isZero(piece)) return null
  return (store ? store.put(piece) : hashChunk(piece)).toString('hex')
}


const ABSENT: RealState = { type: null, fmt: 0, rdev: 0, mode: 0, size: 0, atime: 0, mtime: 0, ctime: 0, atimeNs: 0, mtimeNs: 0, ctimeNs: 0, ino: 0, nlink: 0, uid: 0, gid: 0 }

export function lstatReal (lower: Lower, p: string): RealState {
  let path: string
  try {
    path = lower.reach(p) // its directory reached without following a symlink, or an error
  } catch (err: any) {
    if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR' && err.code !== 'ELOOP') throw err
    return blocked(lower, p, failedAt(err))
  }
  const st = fs.lstatSync(path, { bigint: true, throwIfNoEntry: false })
  if (!st) return ABSENT
  const mode = Number(st.mode)
  const fmt = mode & S_IFMT
  const type = kindOf(mode)
  const a = fromNs(st.atimeNs)
  const m = fromNs(st.mtimeNs)
  const c = fromNs(st.ctimeNs)
  const out: RealState = { type, fmt, rdev: Number(st.rdev), mode: mode & 0o7777, size: Number(st.size), atime: a.ms, mtime: m.ms, ctime: c.ms, atimeNs: a.ns, mtimeNs: m.ns, ctimeNs: c.ns, ino: Number(st.ino), nlink: Number(st.nlink), uid: Number(st.uid), gid: Number(st.gid) }
  if (type === 'l') out.target = fs.readlinkSync(path)
  return out
}

/**
 * p cannot be reached: absent, or (blockedBy) a file or symlink stands where an ancestor
 * directory should. `at`: the directory where reaching p stopped (failedAt); those above it
 * were opened as directories, so the look starts there. It started at the top, after listing
 * every ancestor: O(depth) strings and lstats per path, O(depth²) for a plan over a deep tree.
 */
function blocked (lower: Lower, p: string, at?: string): RealState {
  const from = at !== undefined && at !== '/' && isWithin(parentOf(p), at) ? at : '/'
  for (const a of ancestorsDown(p, from)) {
    let st: fs.Stats | undefined
    try {
      st = fs.lstatSync(lower.reach(a), { throwIfNoEntry: false })
    } catch (err: any) {
      // Changed while being looked at: whatever stands in the way now, p is not reachable.
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR' || err.code === 'ELOOP') return ABSENT
      throw err
    }
    if (!st) return ABSENT
    if (!st.isDirectory()) return { ...ABSENT, blockedBy: a }
  }
  return ABSENT
}

/**
 * The real file at p (reached through the lower's directory handle, never following a
 * symlink): only its data extents are read.
 */
export function realContent (lower: Lower, p: string, store: ChunkSink | null): RealContent {
  const steps = realContentSteps(lower, p, store)
  for (;;) {
    const r = steps.next()
    if (r.done) return r.value
  }
}

export interface RealContent { size: number, data: Sparse }

/** realContent one chunk at a time: it yields after each, so a caller can let other work run. */
export function * realContentSteps (lower: Lower, p: string, store: ChunkSink | null): Generator<void, RealContent> {
  const fd = openFile(lower.realPath(p), fs.constants.O_RDONLY)
  try {
    const size = fs.fstatSync(fd).size
    const data: Sparse = []
    const buf = Buffer.allocUnsafe(CHUNK_SIZE)
    let next = 0 // first chunk index not hashed yet
    let pos = 0
    while (pos < size) {
      const start = native.lseek(fd, pos, SEEK_DATA)
      if (start < 0) break
      let end = native.lseek(fd, start, SEEK_HOLE)
      if (end < 0 || end > size) end = size
      for (let idx = Math.max(next, Math.floor(start / CHUNK_SIZE)); idx * CHUNK_SIZE < end; idx++) {
        const len = chunkLen(size, idx)
        let got = 0
        while (got < len) {
          const n = fs.readSync(fd, buf, got, len - got, idx * CHUNK_SIZE + got)
          if (n === 0) break
          got += n
        }
        if (got < len) buf.fill(0, got, len)
        const hex = chunkHex(buf.subarray(0, len), store)
        if (hex) data.push([idx, hex])
        countBytes(len)
        next = idx + 1
        yield
      }
      pos = Math.max(end, next * CHUNK_SIZE)
    }
    return { size, data }
  } finally {
    fs.closeSync(fd)
  }
}

/** The real state of p as an entry (a whiteout when there is nothing); content is stored. */
export function realEntry (lower: Lower, chunks: ChunkSink, p: string, content?: RealContent, st = lstatReal(lower, p)): LiveEntry | Whiteout {
  if (st.blockedBy || st.type === null) return { kind: 'w' }
  const meta: Meta = { mode: st.mode, uid: st.uid, gid: st.gid, atime: st.atime, mtime: st.mtime, ctime: st.ctime, ino: st.ino }
  if (st.atimeNs) meta.atimeNs = st.atimeNs
  if (st.mtimeNs) meta.mtimeNs = st.mtimeNs
  if (st.ctimeNs) meta.ctimeNs = st.ctimeNs
  const x = realXattrs(lower.realPath(p))
  if (x) meta.xattrs = x
  // A file with other names: as a base entry it still shares the real inode (View.resolve).
  if (st.type !== 'd' && st.nlink > 1) meta.links = st.nlink
  if (st.type === 'd') return { kind: 'd', ...meta }
  if (st.type === 'l') return { kind: 'l', ...meta, target: st.target! }
  if (st.type === 'n') return { kind: 'n', ...meta, fmt: st.fmt, rdev: st.rdev }
  const real = content ?? realContent(lower, p, chunks)
  return { kind: 'f', ...meta, size: real.size, chunks: new Map(real.data.map(([idx, hex]) => [idx, Buffer.from(hex, 'hex')])) }
}

