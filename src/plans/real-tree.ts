// What the applier (applier.ts) does to the real directory, one path at a time: tell whether a
// path is still what the plan saw (fingerprints), write a file's content, remove a tree
// without following symlinks, make a path's parents directories.
import * as fs from 'node:fs'
import { failedAt, realNames, type Lower } from '../real/lower.js'
import { ancestorsDown, isWithin, join, parentOf } from '../paths/paths.js'
import { isZero, type ChunkStore } from '../store/chunks.js'
import { CHUNK_SIZE, type Kind } from '../store/entries.js'
import { lstatReal } from '../real/read.js'
import { openFile } from '../real/nofollow.js'
import type { Attrs, PlanOp } from './planner.js'
import { native } from '../native/index.js'
import { countBytes } from '../progress.js'
import { setFileMeta } from './real-meta.js'
import type { Faults } from './faults.js'

/** What a path looked like when the plan was checked; compared right before it is replaced. */
export interface Fingerprint {
  type: Kind | null
  size: number
  mtime: number
  ctime: number
  ino: number
}

export function fingerprint (lower: Lower, p: string): Fingerprint {
  const st = lstatReal(lower, p)
  return { type: st.type, size: st.size, mtime: st.mtime, ctime: st.ctime, ino: st.ino }
}

export function samePrint (a: Fingerprint, b: Fingerprint): boolean {
  // A directory's times move whenever the plan itself adds or removes children: compare
  // what it is, not when it last changed.
  if (a.type === 'd' && b.type === 'd') return a.ino === b.ino
  return a.type === b.type && a.size === b.size && a.mtime === b.mtime && a.ctime === b.ctime && a.ino === b.ino
}

/** Where a write op without chunk hashes gets its bytes (fork reads another view). */
export type ReadContent = (op: Extract<PlanOp, { op: 'write' }>) => (buf: Buffer, off: number, len: number, pos: number) => number

/** Write a plan's content into the existing file at path (same inode): data, holes, size, attributes. */
export function rewriteFile (path: string, chunks: ChunkStore, op: { size: number, data?: Array<[number, string]>, mode: number, atime: number, atimeNs: number, mtime: number, mtimeNs: number } & Attrs): number {
  const PUNCH = 0x02 | 0x01 // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
  const fd = openFile(path, fs.constants.O_RDWR)
  let written = 0
  try {
    const zero = (from: number, to: number) => {
      if (to <= from) return
      try {
        native.fallocate(fd, PUNCH, from, to - from)
      } catch {
        writeAll(fd, Buffer.alloc(to - from), from) // no hole punching here: write the zeros
      }
    }
    let at = 0
    for (const [idx, hex] of op.data ?? []) {
      zero(at, Math.min(idx * CHUNK_SIZE, op.size))
      const data = chunks.get(Buffer.from(hex, 'hex'))
      writeAll(fd, data, idx * CHUNK_SIZE)
      written += data.length
      countBytes(data.length)
      at = idx * CHUNK_SIZE + CHUNK_SIZE
    }
    fs.ftruncateSync(fd, op.size)
    zero(at, op.size)
    setFileMeta(fd, op)
  } finally {
    fs.closeSync(fd)
  }
  return written
}

/**
 * Write a new file's content at path (created, or truncated): only data, every chunk left out
 * stays a hole. Owner, mode, xattrs and times follow.
 */
export function writeNew (path: string, chunks: ChunkStore, op: { path: string, size: number, data?: Array<[number, string]>, mode: number, atime: number, atimeNs: number, mtime: number, mtimeNs: number } & Attrs, readContent: ReadContent | undefined, afterWrite?: Faults['afterWrite']): number {
  let bytes = 0
  // A temporary name: whatever is there is a leftover (or planted) and goes; the file is then
  // made anew (O_EXCL), so nothing that appears in between is ever written through.
  fs.rmSync(path, { force: true })
  const fd = openFile(path, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600)
  try {
    if (op.data) {
      for (const [idx, hex] of op.data) {
        const data = chunks.get(Buffer.from(hex, 'hex'))
        writeAll(fd, data, idx * CHUNK_SIZE)
        bytes += data.length
        countBytes(data.length)
      }
    } else if (readContent) {
      const read = readContent(op as Extract<PlanOp, { op: 'write' }>)
      const buf = Buffer.alloc(CHUNK_SIZE)
      for (let pos = 0; pos < op.size; pos += CHUNK_SIZE) {
        const n = Math.min(CHUNK_SIZE, op.size - pos)
        buf.fill(0)
        read(buf, 0, n, pos)
        if (isZero(buf.subarray(0, n))) continue
        writeAll(fd, buf.subarray(0, n), pos)
        bytes += n
        countBytes(n)
      }
    }
    fs.ftruncateSync(fd, op.size)
    // The tests flip a byte here (faults.ts) to show that verification catches it.
    afterWrite?.(op.path, op.size, fd)
    setFileMeta(fd, op)
  } finally {
    fs.closeSync(fd)
  }
  return bytes
}

function writeAll (fd: number, data: Buffer, pos: number): void {
  let off = 0
  while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off, pos + off)
}

/** Where removeReal reports what it left: entries below a removed directory that are not what the plan saw. */
export interface Keep {
  prints?: Map<string, Fingerprint>
  kept: string[]
  /** Paths this plan has changed already: what is there is its own. */
  seen: Set<string>
}

/**
 * Remove p and, for a directory, everything below it; never following a symlink. With
 * fingerprints, an entry below p that has none (made after the plan was checked) or no longer
 * matches its own is kept, and so are the directories above it. Returns false when something
 * was kept (p is still there). Walks with a stack of its own, not by recursion: a tree of any
 * depth can be removed.
 */
export function removeReal (lower: Lower, root: string, ours?: Set<number>, keep?: Keep): boolean {
  interface Dir { p: string, names: string[], next: number, all: boolean }
  const stack: Dir[] = []
  /** Removes a non-directory at once (true/false); a directory is pushed (null: not done yet). */
  const visit = (p: string, below: boolean): boolean | null => {
    const st = fs.lstatSync(lower.realPath(p), { throwIfNoEntry: false })
    if (!st) return true
    if (below && keep?.prints && !keep.seen.has(p)) {
      const print = keep.prints.get(p)
      const now = fingerprint(lower, p)
      // A file this plan changed through another name (a link, an anchor) is still the file it was.
      if (!print || (!samePrint(print, now) && !(now.type === print.type && now.ino === print.ino && ours?.has(now.ino)))) {
        keep.kept.push(p)
        return false
      }
    }
    if (!st.isDirectory()) {
      // A file with other names: their ctime moves (the plan's own change, for its re-checks).
      if (st.nlink > 1) ours?.add(st.ino)
      fs.unlinkSync(lower.realPath(p))
      return true
    }
    stack.push({ p, names: realNames(lower.realPath(p)), next: 0, all: true })
    return null
  }
  /** A directory whose entries have all been visited: removed unless something in it was kept. */
  const close = (d: Dir): boolean => {
    lower.forget(d.p)
    if (!d.all) return false
    try {
      fs.rmdirSync(lower.realPath(d.p))
    } catch (err: any) {
      // Something was made in it since it was listed: another process's, left alone.
      if (!keep || (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST')) throw err
      keep.kept.push(d.p)
      return false
    }
    return true
  }
  const first = visit(root, false)
  if (first !== null) return first
  for (;;) {
    const top = stack[stack.length - 1]
    if (top.next < top.names.length) {
      const done = visit(join(top.p, top.names[top.next++]), true)
      if (done !== null) top.all = done && top.all
      continue
    }
    stack.pop()
    const removed = close(top)
    if (stack.length === 0) return removed
    stack[stack.length - 1].all = removed && stack[stack.length - 1].all
  }
}

/**
 * Make every ancestor of p a real directory (replacing planted files or symlinks). The usual
 * case, a parent that is a directory all the way down, is one kept handle (Lower.dirHandle);
 * only when that walk fails is the chain looked at name by name.
 */
export function ensureParents (lower: Lower, p: string): void {
  let from = '/'
  try {
    lower.dirHandle(parentOf(p))
    return
  } catch (err: any) {
    if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR' && err.code !== 'ELOOP') throw err
    // Those above where the walk stopped were directories: start there, not at the top (every
    // ancestor of every path was O(depth²) for a plan over a deep tree).
    const at = failedAt(err)
    if (at !== undefined && isWithin(parentOf(p), at)) from = at
  }
  for (const a of ancestorsDown(p, from)) {
    const st = fs.lstatSync(lower.realPath(a), { throwIfNoEntry: false })
    if (st?.isDirectory()) continue
    if (st) fs.unlinkSync(lower.realPath(a))
    fs.mkdirSync(lower.realPath(a), { mode: 0o755 })
  }
}
