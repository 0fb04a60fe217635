// The applier: executes a prepared plan against the real directory. Every operation is
// idempotent ("make path p be X"), so re-running a journaled plan after a crash finishes it.
// Files are written to a temporary name in their own directory and renamed into place, so a
// reader (or a crash) sees the old file or the new one, never a half-written one.
// Hard links (planner.ts): an `anchor` op puts the real file of an inode record under a name of
// the plan's own in the workspace root (`.cpfs-link-<plan>-<ino>`), a `link` op links a name
// to it (link to a temporary name, renamed into place). Anchors stay until the plan has
// committed (run.ts removes them), so a plan finished after a crash still finds them.
import * as fs from 'node:fs'
import { failedAt, realNames, type Origin } from '../overlay/origin.js'
import { ancestorsDown, isSafePath, isWithin, join, parentOf } from '../overlay/paths.js'
import { CpfsError, isCpfsError } from '../errors.js'
import { isZero, type ChunkStore } from '../store/chunks.js'
import { CHUNK_SIZE } from '../store/entries.js'
import { lstatReal } from '../overlay/real.js'
import { openFile } from '../overlay/nofollow.js'
import type { AnchorOp, Attrs, PlanOp } from './planner.js'
import { AT_FDCWD, native } from '../native/index.js'
import type { Kind } from '../store/entries.js'
import { countBytes } from '../progress.js'
import { canChown, chmodNode, setFileAttrs, setFileMeta, setMeta, setTimes, setXattrs } from './real-meta.js'
import { verifyPaths, type Expect } from './verifier.js'

export interface ApplyResult {
  done: number
  bytesWritten: number
  /** Paths another process changed after the plan was checked: left as that process left them. */
  skipped: string[]
}

/** What a path looked like when the plan was checked; compared right before it is replaced. */
export interface Fingerprint {
  type: Kind | null
  size: number
  mtime: number
  ctime: number
  ino: number
}

export function fingerprint (origin: Origin, p: string): Fingerprint {
  const st = lstatReal(origin, p)
  return { type: st.type, size: st.size, mtime: st.mtime, ctime: st.ctime, ino: st.ino }
}

function samePrint (a: Fingerprint, b: Fingerprint): boolean {
  // A directory's times move whenever the plan itself adds or removes children: compare
  // what it is, not when it last changed.
  if (a.type === 'd' && b.type === 'd') return a.ino === b.ino
  return a.type === b.type && a.size === b.size && a.mtime === b.mtime && a.ctime === b.ctime && a.ino === b.ino
}

export interface ApplyOptions {
  planId: string
  /** Where a write op without chunk hashes gets its bytes (fork reads another view). */
  readContent?: (op: Extract<PlanOp, { op: 'write' }>) => (buf: Buffer, off: number, len: number, pos: number) => number
  /** Called after each operation (progress, and the crash-injection hook of the tests). */
  onOp?: (index: number, op: PlanOp) => void
  /** Called before each operation (the tests use it to edit a file concurrently). */
  beforeOp?: (index: number, op: PlanOp) => void
  /**
   * Fingerprints taken before the plan captured anything (journaled with it): every path it
   * touches and everything below a real directory it replaces or removes. A path whose
   * fingerprint no longer matches when the plan reaches it, or an entry below a directory that
   * has none (made since), belongs to another process and is left alone.
   */
  prints?: Map<string, Fingerprint>
  /**
   * Finishing a plan a crash interrupted: operations before `done` had completed, the one at
   * `partial` (-1: none) may have begun; `expect` is what each path must end as. A path in the
   * middle of its operations is the plan's own; any other is re-checked: unchanged since the
   * plan was checked, it is (re)done; already as the plan makes it, it is done; otherwise
   * someone changed it after the crash, and it is left alone.
   */
  resume?: { done: number, partial: number, expect: Map<string, Expect> }
  /** Called right before an operation changes anything (`started`) and once it has. */
  progress?: (index: number, started: boolean) => void
}

/** The real path of a plan's anchor for inode record ino. */
export function anchorPath (origin: Origin, planId: string, ino: number): string {
  return origin.realPath(`/.cpfs-link-${planId}-${ino}`)
}

/** Remove the anchors of a plan's ops (after it committed, or rolled back). */
/** Remove a plan's anchors; returns the real inode numbers that lost that name (their ctime moved). */
export function removeAnchors (origin: Origin, ops: PlanOp[], planId: string): Set<number> {
  const inos = new Set<number>()
  for (const op of ops) {
    if (op.op !== 'anchor') continue
    try {
      const path = anchorPath(origin, planId, op.ino)
      const st = fs.lstatSync(path, { throwIfNoEntry: false })
      if (!st) continue
      fs.rmSync(path, { force: true })
      inos.add(st.ino)
    } catch {}
  }
  return inos
}

function tmpName (origin: Origin, p: string, planId: string, index: number): string {
  const dir = parentOf(p)
  return origin.realPath(dir === '/' ? `/.cpfs-tmp-${planId}-${index}` : `${dir}/.cpfs-tmp-${planId}-${index}`)
}


/** Write a plan's content into the existing file at p (same inode): data, holes, size, attributes. */
function rewriteInPlace (origin: Origin, chunks: ChunkStore, p: string, op: Extract<PlanOp, { op: 'write' }>): number {
  return rewriteFile(origin.realPath(p), chunks, op)
}

function rewriteFile (path: string, chunks: ChunkStore, op: { size: number, data?: Array<[number, string]>, mode: number, atime: number, atimeNs: number, mtime: number, mtimeNs: number } & Attrs): number {
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


let corrupted = false

/**
 * Write a new file's content at path (created, or truncated): only data, every chunk left out
 * stays a hole. Owner, mode, xattrs and times follow.
 */
function writeNew (path: string, chunks: ChunkStore, op: { path: string, size: number, data?: Array<[number, string]>, mode: number, atime: number, atimeNs: number, mtime: number, mtimeNs: number } & Attrs, readContent: ApplyOptions['readContent'] | undefined): number {
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
    if (process.env.CPFS_TEST_CORRUPT_WRITE === op.path && op.size > 0 && !corrupted) {
      // Test hook: flip one byte (once per process, so that the roll-back writes it right) so
      // the tests can show that verification catches it.
      corrupted = true
      const b = Buffer.alloc(1)
      fs.readSync(fd, b, 0, 1, 0)
      b[0] ^= 0xff
      fs.writeSync(fd, b, 0, 1, 0)
    }
    setFileMeta(fd, op)
  } finally {
    fs.closeSync(fd)
  }
  return bytes
}

/**
 * An inode record's real file under its anchor name: a link to the real file at op.from (its
 * content rewritten in place unless the plan knows it is the same), or a new file; then its
 * owner, mode, xattrs and times. Idempotent: an anchor that exists is the plan's own.
 */
function makeAnchor (origin: Origin, chunks: ChunkStore, op: AnchorOp, planId: string, index: number, readContent: ApplyOptions['readContent'] | undefined): number {
  const anchor = anchorPath(origin, planId, op.ino)
  let bytes = 0
  let fresh = false
  if (!fs.lstatSync(anchor, { throwIfNoEntry: false })) {
    const real = op.from !== undefined ? lstatReal(origin, op.from) : null
    if (real && real.type === op.type && (op.type !== 'l' || real.target === op.target) && (op.type !== 'n' || (real.fmt === op.fmt && real.rdev === op.rdev))) {
      fs.linkSync(origin.realPath(op.from!), anchor) // link(2) never follows a symlink
    } else {
      // A new file, made under a temporary name first so that the anchor is never half written.
      const tmp = tmpName(origin, '/x', planId, index)
      fs.rmSync(tmp, { force: true })
      if (op.type === 'f') bytes += writeNew(tmp, chunks, op, readContent)
      else if (op.type === 'l') fs.symlinkSync(op.target!, tmp)
      else native.mknodat(AT_FDCWD, tmp, op.fmt! | (op.mode & 0o777), op.rdev!)
      fs.renameSync(tmp, anchor)
      fresh = true
    }
  }
  if (op.type === 'f') {
    if (!fresh && !op.same) bytes += rewriteFile(anchor, chunks, op)
    else if (!fresh) setFileAttrs(anchor, op)
    return bytes
  }
  if (canChown) fs.lchownSync(anchor, op.uid, op.gid)
  if (op.type === 'n') chmodNode(anchor, op.mode)
  setXattrs(anchor, op.x)
  setTimes(anchor, op)
  return bytes
}



function writeAll (fd: number, data: Buffer, pos: number): void {
  let off = 0
  while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off, pos + off)
}


/** Where removeReal reports what it left: entries below a removed directory that are not what the plan saw. */
interface Keep {
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
function removeReal (origin: Origin, root: string, ours?: Set<number>, keep?: Keep): boolean {
  interface Dir { p: string, names: string[], next: number, all: boolean }
  const stack: Dir[] = []
  /** Removes a non-directory at once (true/false); a directory is pushed (null: not done yet). */
  const visit = (p: string, below: boolean): boolean | null => {
    const st = fs.lstatSync(origin.realPath(p), { throwIfNoEntry: false })
    if (!st) return true
    if (below && keep?.prints && !keep.seen.has(p)) {
      const print = keep.prints.get(p)
      const now = fingerprint(origin, p)
      // A file this plan changed through another name (a link, an anchor) is still the file it was.
      if (!print || (!samePrint(print, now) && !(now.type === print.type && now.ino === print.ino && ours?.has(now.ino)))) {
        keep.kept.push(p)
        return false
      }
    }
    if (!st.isDirectory()) {
      // A file with other names: their ctime moves (the plan's own change, for its re-checks).
      if (st.nlink > 1) ours?.add(st.ino)
      fs.unlinkSync(origin.realPath(p))
      return true
    }
    stack.push({ p, names: realNames(origin.realPath(p)), next: 0, all: true })
    return null
  }
  /** A directory whose entries have all been visited: removed unless something in it was kept. */
  const close = (d: Dir): boolean => {
    origin.forget(d.p)
    if (!d.all) return false
    try {
      fs.rmdirSync(origin.realPath(d.p))
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
 * case, a parent that is a directory all the way down, is one kept handle (Origin.dirHandle);
 * only when that walk fails is the chain looked at name by name.
 */
function ensureParents (origin: Origin, p: string): void {
  let from = '/'
  try {
    origin.dirHandle(parentOf(p))
    return
  } catch (err: any) {
    if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR' && err.code !== 'ELOOP') throw err
    // Those above where the walk stopped were directories: start there, not at the top (every
    // ancestor of every path was O(depth²) for a plan over a deep tree).
    const at = failedAt(err)
    if (at !== undefined && isWithin(parentOf(p), at)) from = at
  }
  for (const a of ancestorsDown(p, from)) {
    const st = fs.lstatSync(origin.realPath(a), { throwIfNoEntry: false })
    if (st?.isDirectory()) continue
    if (st) fs.unlinkSync(origin.realPath(a))
    fs.mkdirSync(origin.realPath(a), { mode: 0o755 })
  }
}



export function applyOps (origin: Origin, chunks: ChunkStore, ops: PlanOp[], opts: ApplyOptions): ApplyResult {
  let bytesWritten = 0
  let done = 0
  const skipped: string[] = []
  const seen = new Set<string>()
  const keep: Keep = { prints: opts.prints, kept: [], seen }
  /** Removes what is at p for a replacement; false (p skipped) when something below it is another process's. */
  const clear = (p: string): boolean => {
    const before = keep.kept.length
    if (removeReal(origin, p, ours, keep)) return true
    skipped.push(p, ...keep.kept.slice(before).filter(q => q !== p))
    return false
  }
  /** Paths a resumed plan found already as it makes them: their operations are done. */
  const finished = new Set<string>()
  const resume = opts.resume
  const firstOp = new Map<string, number>()
  const lastOp = new Map<string, number>()
  ops.forEach((op, i) => {
    if (!firstOp.has(op.path)) firstOp.set(op.path, i)
    lastOp.set(op.path, i)
  })
  /** Real inodes this plan has changed already (anchors, rewrites in place): all their names moved. */
  const ours = new Set<number>()
  const applyOne = (op: PlanOp, index: number): void => {
    const p = op.path
    opts.beforeOp?.(index, op)
    // Re-check a path right before the plan first touches it: if another process changed it
    // since the plan was checked, leave it (and what the plan would put below it) alone. A
    // name of a file the plan itself changed through another name is still the file it was.
    if (skipped.some(q => isWithin(p, q)) || finished.has(p)) return
    const print = opts.prints?.get(p)
    if (print && !seen.has(p)) {
      const now = fingerprint(origin, p)
      const unchanged = samePrint(print, now) || (now.type === print.type && now.ino === print.ino && ours.has(now.ino))
      const first = firstOp.get(p)!
      const last = lastOp.get(p)!
      const inProgress = resume !== undefined && ((first < resume.done && resume.done <= last) || (first <= resume.partial && resume.partial <= last))
      if (!unchanged && !inProgress) {
        // Finishing after a crash: a path already as the plan makes it is done (the crash came
        // after it); anything else was changed by someone else since.
        const want = resume?.expect.get(p)
        if (want && verifyPaths(origin, new Map([[p, want]])).mismatches.length === 0) finished.add(p)
        else skipped.push(p)
        return
      }
    }
    seen.add(p)
    opts.progress?.(index, true)
    // Replacing or removing one name of a real file with several moves its ctime for the others.
    const cur = lstatReal(origin, p)
    if (cur.type !== null && cur.type !== 'd' && cur.nlink > 1) ours.add(cur.ino)
    if (!isSafePath(p)) throw new CpfsError('UNSAFE_PATH', `refusing to touch ${JSON.stringify(p)} outside the workspace`, 'the journal was tampered with')
    switch (op.op) {
      case 'remove': {
        const st = lstatReal(origin, p)
        if (st.blockedBy) break
        // Idempotent: remove only what the plan expects there (a re-run must not remove
        // what a later op of the same plan already put in its place).
        if (st.type === op.type && !clear(p)) return
        break
      }
      case 'mkdir': {
        ensureParents(origin, p)
        const st = lstatReal(origin, p)
        if (st.type === 'd') break
        if (st.type && !clear(p)) return
        fs.mkdirSync(origin.realPath(p), { mode: 0o700 })
        break
      }
      case 'write': {
        ensureParents(origin, p)
        const real = lstatReal(origin, p)
        if (real.type === 'f' && real.nlink > 1 && op.ino === real.ino) {
          // The real file has other names (hard links): rewrite it in place so that they all
          // see the edit, as they would have on the real disk. A crash midway leaves it
          // partly written until the next cpfs command finishes the journaled plan.
          bytesWritten += rewriteInPlace(origin, chunks, p, op)
          ours.add(real.ino)
          break
        }
        const tmp = tmpName(origin, p, opts.planId, index)
        bytesWritten += writeNew(tmp, chunks, op, opts.readContent)
        const st = lstatReal(origin, p)
        if (st.type === 'd' && !clear(p)) return fs.rmSync(tmp, { force: true })
        fs.renameSync(tmp, origin.realPath(p))
        break
      }
      case 'symlink': {
        ensureParents(origin, p)
        const st = lstatReal(origin, p)
        if (st.type === 'l' && st.target === op.target) break
        const tmp = tmpName(origin, p, opts.planId, index)
        fs.rmSync(tmp, { force: true })
        fs.symlinkSync(op.target, tmp)
        if (canChown) fs.lchownSync(tmp, op.uid, op.gid)
        setXattrs(tmp, op.x)
        setTimes(tmp, op)
        if (st.type === 'd' && !clear(p)) return fs.rmSync(tmp, { force: true })
        fs.renameSync(tmp, origin.realPath(p))
        break
      }
      case 'mknod': {
        ensureParents(origin, p)
        const st = lstatReal(origin, p)
        if (st.type === 'n' && st.fmt === op.fmt && st.rdev === op.rdev) break
        // Made under a temporary name and renamed into place, like files: never half there.
        const tmp = tmpName(origin, p, opts.planId, index)
        fs.rmSync(tmp, { force: true })
        native.mknodat(AT_FDCWD, tmp, op.fmt | (op.mode & 0o777), op.rdev)
        if (canChown) fs.lchownSync(tmp, op.uid, op.gid)
        chmodNode(tmp, op.mode) // mknod applies the umask; set the exact bits
        setXattrs(tmp, op.x)
        setTimes(tmp, op)
        if (st.type === 'd' && !clear(p)) return fs.rmSync(tmp, { force: true })
        fs.renameSync(tmp, origin.realPath(p))
        break
      }
      case 'anchor': {
        bytesWritten += makeAnchor(origin, chunks, op, opts.planId, index, opts.readContent)
        const st = fs.lstatSync(anchorPath(origin, opts.planId, op.ino), { throwIfNoEntry: false })
        if (st) ours.add(st.ino)
        break
      }
      case 'link': {
        const anchor = fs.lstatSync(anchorPath(origin, opts.planId, op.ino), { throwIfNoEntry: false })
        if (!anchor) {
          // Its anchor was left alone (another process changed the path it comes from).
          skipped.push(p)
          return
        }
        ensureParents(origin, p)
        const st = lstatReal(origin, p)
        if (st.type !== null && st.ino === Number(anchor.ino)) break
        if (st.type === 'd' && !clear(p)) return
        const tmp = tmpName(origin, p, opts.planId, index)
        fs.rmSync(tmp, { force: true })
        fs.linkSync(anchorPath(origin, opts.planId, op.ino), tmp)
        fs.renameSync(tmp, origin.realPath(p))
        break
      }
      case 'chmod': {
        const st = lstatReal(origin, p)
        // chmod follows symlinks: never apply it to one.
        if (st.type === 'l' && canChown) fs.lchownSync(origin.realPath(p), op.uid, op.gid)
        if (st.type === 'l') setXattrs(origin.realPath(p), op.x)
        if (st.type === 'f' || st.type === 'd' || st.type === 'n') setMeta(origin.realPath(p), st, op)
        break
      }
    }
    done++
    // A directory the op replaced or removed was forgotten with everything below it (removeReal).
    origin.forget(p, false)
    opts.progress?.(index, false)
    opts.onOp?.(index, op)
  }
  ops.forEach((op, index) => {
    try {
      applyOne(op, index)
    } catch (err: any) {
      // Never leave a temporary file behind, whatever failed (the roll-back does not know it).
      if (usesTemp(op)) {
        try { fs.rmSync(tmpName(origin, op.op === 'anchor' ? '/x' : op.path, opts.planId, index), { force: true }) } catch {}
      }
      if (isCpfsError(err) && err.code === 'UNSAFE_PATH') throw err
      const why = String(err?.message ?? err).split('\n')[0].replace(/\/proc\/self\/fd\/\d+\//g, '')
      throw Object.assign(new Error(`${op.op} ${op.path.slice(1) || '.'}: ${why}`), { code: err?.code, cause: err })
    }
  })
  // Make the new files durable before the journal is retired (syncfs of the workspace's fs).
  native.syncfs(origin.dirFd)
  return { done, bytesWritten, skipped }
}

/** Does op make its result under a temporary name first (tmpName)? */
function usesTemp (op: PlanOp): boolean {
  return op.op === 'write' || op.op === 'symlink' || op.op === 'mknod' || op.op === 'link' || op.op === 'anchor'
}

/** Remove temporary files a crashed plan may have left (recovery). */
export function cleanTemps (origin: Origin, ops: PlanOp[], planId: string): void {
  ops.forEach((op, index) => {
    if (!usesTemp(op)) return
    const tmp = tmpName(origin, op.op === 'anchor' ? '/x' : op.path, planId, index)
    try {
      fs.rmSync(tmp, { force: true })
    } catch {}
  })
}
