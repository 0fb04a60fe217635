// The applier: executes a prepared plan against the real directory. Every operation is
// idempotent ("make path p be X"), so re-running a journaled plan after a crash finishes it.
// Files are written to a temporary name in their own directory and renamed into place, so a
// reader (or a crash) sees the old file or the new one, never a half-written one.
// Hard links (planner.ts): an `anchor` op puts the real file of an inode record under a name of
// the plan's own in the workspace root (`.cpfs-link-<plan>-<ino>`), a `link` op links a name
// to it (link to a temporary name, renamed into place). Anchors stay until the plan has
// committed (commit.ts removes them), so a plan finished after a crash still finds them.
import * as fs from 'node:fs'
import type { Lower } from '../real/lower.js'
import { isSafePath, isWithin, parentOf } from '../paths/paths.js'
import { CpfsError, isCpfsError } from '../errors.js'
import type { ChunkStore } from '../store/chunks.js'
import { lstatReal } from '../real/read.js'
import type { AnchorOp, PlanOp } from './planner.js'
import { AT_FDCWD, native } from '../native/index.js'
import { canChown, chmodNode, setFileAttrs, setMeta, setTimes, setXattrs } from './real-meta.js'
import { verifyPaths, type Expect } from './verifier.js'
import type { Faults } from './faults.js'
import { ensureParents, fingerprint, removeReal, rewriteFile, samePrint, writeNew, type Fingerprint, type Keep, type ReadContent } from './real-tree.js'

export interface ApplyResult {
  done: number
  bytesWritten: number
  /** Paths another process changed after the plan was checked: left as that process left them. */
  skipped: string[]
}

export interface ApplyOptions {
  planId: string
  /** Where a write op without chunk hashes gets its bytes (fork reads another view). */
  readContent?: ReadContent
  /** Called after each operation (progress). */
  onOp?: (index: number, op: PlanOp) => void
  /** What the tests make go wrong (faults.ts); none in production. */
  faults?: Faults
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
export function anchorPath (lower: Lower, planId: string, ino: number): string {
  return lower.realPath(`/.cpfs-link-${planId}-${ino}`)
}

/** Remove a plan's anchors (after it committed, or rolled back); returns the real inode numbers that lost that name (their ctime moved). */
export function removeAnchors (lower: Lower, ops: PlanOp[], planId: string): Set<number> {
  const inos = new Set<number>()
  for (const op of ops) {
    if (op.op !== 'anchor') continue
    try {
      const path = anchorPath(lower, planId, op.ino)
      const st = fs.lstatSync(path, { throwIfNoEntry: false })
      if (!st) continue
      fs.rmSync(path, { force: true })
      inos.add(st.ino)
    } catch {}
  }
  return inos
}

function tmpName (lower: Lower, p: string, planId: string, index: number): string {
  const dir = parentOf(p)
  return lower.realPath(dir === '/' ? `/.cpfs-tmp-${planId}-${index}` : `${dir}/.cpfs-tmp-${planId}-${index}`)
}

/**
 * An inode record's real file under its anchor name: a link to the real file at op.from (its
 * content rewritten in place unless the plan knows it is the same), or a new file; then its
 * owner, mode, xattrs and times. Idempotent: an anchor that exists is the plan's own.
 */
function makeAnchor (lower: Lower, chunks: ChunkStore, op: AnchorOp, index: number, opts: ApplyOptions): number {
  const planId = opts.planId
  const anchor = anchorPath(lower, planId, op.ino)
  let bytes = 0
  let fresh = false
  if (!fs.lstatSync(anchor, { throwIfNoEntry: false })) {
    const real = op.from !== undefined ? lstatReal(lower, op.from) : null
    if (real && real.type === op.type && (op.type !== 'l' || real.target === op.target) && (op.type !== 'n' || (real.fmt === op.fmt && real.rdev === op.rdev))) {
      fs.linkSync(lower.realPath(op.from!), anchor) // link(2) never follows a symlink
    } else {
      // A new file, made under a temporary name first so that the anchor is never half written.
      const tmp = tmpName(lower, '/x', planId, index)
      fs.rmSync(tmp, { force: true })
      if (op.type === 'f') bytes += writeNew(tmp, chunks, op, opts.readContent, opts.faults?.afterWrite)
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
  setXattrs(anchor, op.xattrs)
  setTimes(anchor, op)
  return bytes
}

export function applyOps (lower: Lower, chunks: ChunkStore, ops: PlanOp[], opts: ApplyOptions): ApplyResult {
  const run = new PlanRun(lower, chunks, ops, opts)
  ops.forEach((op, index) => {
    try {
      run.applyOne(op, index)
    } catch (err: any) {
      // Never leave a temporary file behind, whatever failed (the roll-back does not know it).
      if (usesTemp(op)) {
        try { fs.rmSync(tmpName(lower, op.op === 'anchor' ? '/x' : op.path, opts.planId, index), { force: true }) } catch {}
      }
      if (isCpfsError(err) && err.code === 'UNSAFE_PATH') throw err
      const why = String(err?.message ?? err).split('\n')[0].replace(/\/proc\/self\/fd\/\d+\//g, '')
      throw Object.assign(new Error(`${op.op} ${op.path.slice(1) || '.'}: ${why}`), { code: err?.code, cause: err })
    }
  })
  makeDurable(lower)
  return { done: run.done, bytesWritten: run.bytesWritten, skipped: run.skipped }
}

/**
 * Make what the plan wrote durable before it is verified and committed: one syncfs of the
 * workspace's filesystem rather than an fsync per file. A failure is thrown, never ignored: it
 * means the writeback of some of the plan's data failed, while the page cache may still hold
 * the new bytes, so the verifier (which reads through that cache) would pass a plan whose data
 * is not on the disk, and the commit would record as applied what a power cut can undo. Thrown
 * here, the plan counts as one that could not be applied and is rolled back from its captures
 * (finish.ts), and that roll-back must sync in turn; if it cannot, the journal stays for the
 * next command. Linux reports such an error to each open file description once, so it cannot
 * be retried away by calling again.
 */
function makeDurable (lower: Lower): void {
  try {
    native.syncfs(lower.dirFd)
  } catch (err: any) {
    throw Object.assign(new Error(`syncfs: ${err?.code ?? err?.message ?? err}: what the plan wrote may not be on the disk`), { code: err?.code, cause: err })
  }
}

/** One run of applyOps: what it has done so far, and each operation as a step of its own. */
class PlanRun {
  bytesWritten = 0
  done = 0
  readonly skipped: string[] = []
  /** Paths this plan has changed already: what is there is its own. */
  private readonly seen = new Set<string>()
  private readonly keep: Keep
  /** Paths a resumed plan found already as it makes them: their operations are done. */
  private readonly finished = new Set<string>()
  private readonly firstOp = new Map<string, number>()
  private readonly lastOp = new Map<string, number>()
  /** Real inodes this plan has changed already (anchors, rewrites in place): all their names moved. */
  private readonly ours = new Set<number>()

  constructor (private readonly lower: Lower, private readonly chunks: ChunkStore, ops: PlanOp[], private readonly opts: ApplyOptions) {
    this.keep = { prints: opts.prints, kept: [], seen: this.seen }
    ops.forEach((op, i) => {
      if (!this.firstOp.has(op.path)) this.firstOp.set(op.path, i)
      this.lastOp.set(op.path, i)
    })
  }

  applyOne (op: PlanOp, index: number): void {
    const p = op.path
    this.opts.faults?.beforeOp?.(index, op, this.lower)
    this.opts.faults?.failOp?.(index)
    if (this.leftAlone(p)) return
    this.seen.add(p)
    this.opts.progress?.(index, true)
    // Replacing or removing one name of a real file with several moves its ctime for the others.
    const cur = lstatReal(this.lower, p)
    if (cur.type !== null && cur.type !== 'd' && cur.nlink > 1) this.ours.add(cur.ino)
    if (!isSafePath(p)) throw new CpfsError('UNSAFE_PATH', `refusing to touch ${JSON.stringify(p)} outside the workspace`, 'the journal was tampered with')
    if (!this.perform(op, index)) return
    this.done++
    // A directory the op replaced or removed was forgotten with everything below it (removeReal).
    this.lower.forget(p, false)
    this.opts.progress?.(index, false)
    this.opts.onOp?.(index, op)
    this.opts.faults?.afterOp?.(index)
  }

  /**
   * Re-check a path right before the plan first touches it: if another process changed it
   * since the plan was checked, leave it (and what the plan would put below it) alone. A
   * name of a file the plan itself changed through another name is still the file it was.
   */
  private leftAlone (p: string): boolean {
    if (this.skipped.some(q => isWithin(p, q)) || this.finished.has(p)) return true
    const print = this.opts.prints?.get(p)
    if (!print || this.seen.has(p)) return false
    const now = fingerprint(this.lower, p)
    const unchanged = samePrint(print, now) || (now.type === print.type && now.ino === print.ino && this.ours.has(now.ino))
    const first = this.firstOp.get(p)!
    const last = this.lastOp.get(p)!
    const resume = this.opts.resume
    const inProgress = resume !== undefined && ((first < resume.done && resume.done <= last) || (first <= resume.partial && resume.partial <= last))
    if (unchanged || inProgress) return false
    // Finishing after a crash: a path already as the plan makes it is done (the crash came
    // after it); anything else was changed by someone else since.
    const want = resume?.expect.get(p)
    if (want && verifyPaths(this.lower, new Map([[p, want]])).mismatches.length === 0) this.finished.add(p)
    else this.skipped.push(p)
    return true
  }

  /** Removes what is at p for a replacement; false (p skipped) when something below it is another process's. */
  private clear (p: string): boolean {
    const before = this.keep.kept.length
    if (removeReal(this.lower, p, this.ours, this.keep)) return true
    this.skipped.push(p, ...this.keep.kept.slice(before).filter(q => q !== p))
    return false
  }

  /** Carry out op; false when it was left undone (p, or something below it, is another process's). */
  private perform (op: PlanOp, index: number): boolean {
    switch (op.op) {
      case 'remove': return this.remove(op)
      case 'mkdir': return this.mkdir(op.path)
      case 'write': return this.write(op, index)
      case 'symlink': return this.symlink(op, index)
      case 'mknod': return this.mknod(op, index)
      case 'anchor': return this.anchor(op, index)
      case 'link': return this.link(op, index)
      case 'chmod': return this.chmod(op)
    }
  }

  private remove (op: Extract<PlanOp, { op: 'remove' }>): boolean {
    const st = lstatReal(this.lower, op.path)
    if (st.blockedBy) return true
    // Idempotent: remove only what the plan expects there (a re-run must not remove
    // what a later op of the same plan already put in its place).
    if (st.type === op.type && !this.clear(op.path)) return false
    return true
  }

  private mkdir (p: string): boolean {
    ensureParents(this.lower, p)
    const st = lstatReal(this.lower, p)
    if (st.type === 'd') return true
    if (st.type && !this.clear(p)) return false
    fs.mkdirSync(this.lower.realPath(p), { mode: 0o700 })
    return true
  }

  private write (op: Extract<PlanOp, { op: 'write' }>, index: number): boolean {
    const p = op.path
    ensureParents(this.lower, p)
    const real = lstatReal(this.lower, p)
    if (real.type === 'f' && real.nlink > 1 && op.ino === real.ino) {
      // The real file has other names (hard links): rewrite it in place so that they all
      // see the edit, as they would have on the real disk. A crash midway leaves it
      // partly written until the next cpfs command finishes the journaled plan.
      this.bytesWritten += rewriteFile(this.lower.realPath(p), this.chunks, op)
      this.ours.add(real.ino)
      return true
    }
    return this.viaTemp(p, index, (tmp) => { this.bytesWritten += writeNew(tmp, this.chunks, op, this.opts.readContent, this.opts.faults?.afterWrite) }, () => lstatReal(this.lower, p).type === 'd')
  }

  private symlink (op: Extract<PlanOp, { op: 'symlink' }>, index: number): boolean {
    ensureParents(this.lower, op.path)
    const st = lstatReal(this.lower, op.path)
    if (st.type === 'l' && st.target === op.target) return true
    return this.viaTemp(op.path, index, (tmp) => {
      fs.symlinkSync(op.target, tmp)
      if (canChown) fs.lchownSync(tmp, op.uid, op.gid)
      setXattrs(tmp, op.xattrs)
      setTimes(tmp, op)
    }, () => st.type === 'd')
  }

  private mknod (op: Extract<PlanOp, { op: 'mknod' }>, index: number): boolean {
    ensureParents(this.lower, op.path)
    const st = lstatReal(this.lower, op.path)
    if (st.type === 'n' && st.fmt === op.fmt && st.rdev === op.rdev) return true
    // Made under a temporary name and renamed into place, like files: never half there.
    return this.viaTemp(op.path, index, (tmp) => {
      native.mknodat(AT_FDCWD, tmp, op.fmt | (op.mode & 0o777), op.rdev)
      if (canChown) fs.lchownSync(tmp, op.uid, op.gid)
      chmodNode(tmp, op.mode) // mknod applies the umask; set the exact bits
      setXattrs(tmp, op.xattrs)
      setTimes(tmp, op)
    }, () => st.type === 'd')
  }

  private anchor (op: AnchorOp, index: number): boolean {
    this.bytesWritten += makeAnchor(this.lower, this.chunks, op, index, this.opts)
    const st = fs.lstatSync(anchorPath(this.lower, this.opts.planId, op.ino), { throwIfNoEntry: false })
    if (st) this.ours.add(st.ino)
    return true
  }

  private link (op: Extract<PlanOp, { op: 'link' }>, index: number): boolean {
    const p = op.path
    const anchor = fs.lstatSync(anchorPath(this.lower, this.opts.planId, op.ino), { throwIfNoEntry: false })
    if (!anchor) {
      // Its anchor was left alone (another process changed the path it comes from).
      this.skipped.push(p)
      return false
    }
    ensureParents(this.lower, p)
    const st = lstatReal(this.lower, p)
    if (st.type !== null && st.ino === Number(anchor.ino)) return true
    if (st.type === 'd' && !this.clear(p)) return false
    // A directory in the way is gone already (cleared before the link was made).
    return this.viaTemp(p, index, (tmp) => fs.linkSync(anchorPath(this.lower, this.opts.planId, op.ino), tmp), () => false)
  }

  private chmod (op: Extract<PlanOp, { op: 'chmod' }>): boolean {
    const p = op.path
    const st = lstatReal(this.lower, p)
    // chmod follows symlinks: never apply it to one.
    if (st.type === 'l' && canChown) fs.lchownSync(this.lower.realPath(p), op.uid, op.gid)
    if (st.type === 'l') setXattrs(this.lower.realPath(p), op.xattrs)
    if (st.type === 'f' || st.type === 'd' || st.type === 'n') setMeta(this.lower.realPath(p), st, op)
    return true
  }

  /**
   * Make p's new version under a temporary name in its directory (`make`), then rename it over
   * p, so that a reader (or a crash) sees the old version or the new one, never half of one.
   * `dirInTheWay` says, once it is made, whether a directory stands at p: it is removed first,
   * and when something below it is another process's (p skipped), the temporary name goes.
   */
  private viaTemp (p: string, index: number, make: (tmp: string) => void, dirInTheWay: () => boolean): boolean {
    const tmp = tmpName(this.lower, p, this.opts.planId, index)
    // Whatever is at a temporary name is a leftover (or planted): it goes.
    fs.rmSync(tmp, { force: true })
    make(tmp)
    if (dirInTheWay() && !this.clear(p)) {
      fs.rmSync(tmp, { force: true })
      return false
    }
    fs.renameSync(tmp, this.lower.realPath(p))
    return true
  }
}

/** Does op make its result under a temporary name first (tmpName)? */
function usesTemp (op: PlanOp): boolean {
  return op.op === 'write' || op.op === 'symlink' || op.op === 'mknod' || op.op === 'link' || op.op === 'anchor'
}

/** Remove temporary files a crashed plan may have left (recovery). */
export function cleanTemps (lower: Lower, ops: PlanOp[], planId: string): void {
  ops.forEach((op, index) => {
    if (!usesTemp(op)) return
    const tmp = tmpName(lower, op.op === 'anchor' ? '/x' : op.path, planId, index)
    try {
      fs.rmSync(tmp, { force: true })
    } catch {}
  })
}
