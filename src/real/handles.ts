// Directory handles of the real directory (Lower.realPath): O_PATH descriptors of real
// directories, each opened below the workspace's own handle or a kept one by
// native.openDirBeneath (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or a walk of
// O_NOFOLLOW components), so that no symlink an agent plants is ever followed on the way.
// Kept for reuse, least recently used going first: going down a deep tree costs one component
// per new directory, and going up (or anywhere) at most one openat2 from an anchor, whatever
// the depth (docs/decisions.md, "An untrusted agent and the real directory" and "Plans of any
// size").
import * as fs from 'node:fs'
import { native } from '../native/index.js'
import { isWithin, parentOf } from '../paths/paths.js'
import { pathKey } from '../paths/path-map.js'

/** Directory handles kept open (O_PATH descriptors; the daemon's limit is far above). */
const DIR_HANDLES = 1024
/** Ancestors looked up for a kept handle before dirHandle opens from an anchor or the top. */
const ANCESTORS_TRIED = 4
/**
 * Characters of path between anchors. With the component that spans the cut (at most 255
 * bytes) it is at most (1024 + 255) × 3 bytes of UTF-8: under PATH_MAX (4096), so one
 * openat2 reaches any directory from its anchor.
 */
const ANCHOR_SPAN = 1024

/**
 * The first directory on the way to a path that Lower.dirHandle could not open (`/a/b` when
 * `/a/b` is missing, a file or a symlink), when the error says; every directory above it was
 * opened as one.
 */
export function failedAt (err: any): string | undefined {
  return typeof err?.at === 'string' ? err.at : undefined
}

interface Kept {
  dir: string
  fd: number
}

export class DirHandles {
  private readonly root: number
  /** Kept handles, least recently used first (the objects themselves are keys: no hashing of paths). */
  private readonly lru = new Set<Kept>()
  /** Kept handles by pathKey of their path (path-map.ts: lookups are of new strings; paths that share a key share the list). */
  private readonly byKey = new Map<string, Kept[]>()
  /**
   * Anchors: directories whose paths end just before a multiple k of ANCHOR_SPAN characters
   * (by k; the last one opened for each k). A directory none of whose nearest ancestors is
   * kept is opened from its deepest anchor in one openat2, the anchors themselves each from the
   * one before. Without them it was opened from the top: beyond PATH_MAX that is one openat
   * per level, and a plan that goes up a deep tree (it sets directory modes and times children
   * first) found no ancestor kept at every level above the kept 1,024 — O(depth²) system calls,
   * 25 s of the 35 s that unmount took for 5,000 levels. The number of anchors is bounded by
   * the longest path (/ ANCHOR_SPAN), not by the number of directories.
   */
  private readonly anchors = new Map<number, Kept>()

  constructor (root: number) {
    this.root = root
  }

  /**
   * An O_PATH handle of real directory dir (never through a symlink), kept for reuse. Throws
   * ENOENT, ENOTDIR or ELOOP (a symlink or a file stands where a directory should), with `at`
   * (failedAt) naming the directory on the way that could not be opened.
   */
  get (dir: string): number {
    if (dir === '/') return this.root
    const k = this.find(dir)
    if (k) return this.use(k).fd
    // The nearest kept ancestor among the closest few (plans and walks go parent before
    // child, so it is nearly always the parent); else the deepest anchor. Looking further up
    // would cost O(depth) strings of O(depth) length per miss: O(depth²) in a deep tree
    // whose directories do not exist yet.
    let from: Kept | undefined
    for (let up = parentOf(dir), i = 0; up !== '/' && i <= ANCESTORS_TRIED; up = parentOf(up), i++) {
      from = this.find(up)
      if (from) break
    }
    if (!from && dir.length > ANCHOR_SPAN) from = this.anchorFor(dir)
    return this.open(from, dir).fd
  }

  /** The kept handle of dir, if any. */
  private find (dir: string): Kept | undefined {
    const list = this.byKey.get(pathKey(dir))
    if (list) for (const k of list) if (k.dir === dir) return k
    return undefined
  }

  /** k, now the most recently used. */
  private use (k: Kept): Kept {
    this.lru.delete(k)
    this.lru.add(k)
    return k
  }

  /** Open dir below kept directory `from` (an ancestor; undefined: the top) and keep it. */
  private open (from: Kept | undefined, dir: string): Kept {
    const fromFd = from ? this.use(from).fd : this.root
    let fd: number
    try {
      fd = native.openDirBeneath(fromFd, dir.slice(from ? from.dir.length + 1 : 1))
    } catch (err: any) {
      // The native walk names the prefix that failed (relative to `from`): the directories above
      // it were opened as directories, so lstatReal and ensureParents look from there on
      // instead of at every ancestor (O(depth) lstats of O(depth)-long paths, per path).
      if (typeof err?.path === 'string' && err.path !== '.') err.at = from ? `${from.dir}/${err.path}` : `/${err.path}`
      throw err
    }
    if (this.lru.size >= DIR_HANDLES) this.drop(this.lru.values().next().value as Kept)
    const k: Kept = { dir, fd }
    this.lru.add(k)
    const key = pathKey(dir)
    const list = this.byKey.get(key)
    if (list) list.push(k)
    else this.byKey.set(key, [k])
    return k
  }

  /** Close k and forget it. */
  private drop (k: Kept): void {
    try { fs.closeSync(k.fd) } catch {}
    this.lru.delete(k)
    const key = pathKey(k.dir)
    const list = this.byKey.get(key)
    if (!list) return
    const i = list.indexOf(k)
    if (i >= 0) list.splice(i, 1)
    if (list.length === 0) this.byKey.delete(key)
  }

  /**
   * The deepest anchor of dir, kept: the ones missing below the deepest kept one (or the top)
   * are opened, each from the one before. Undefined when dir has none.
   */
  private anchorFor (dir: string): Kept | undefined {
    const last = Math.floor((dir.length - 1) / ANCHOR_SPAN)
    let from: Kept | undefined
    let k = last
    for (; k > 0; k--) {
      const a = this.anchors.get(k)
      if (a !== undefined && this.lru.has(a) && a.dir.length < dir.length && isWithin(dir, a.dir)) {
        from = a
        break
      }
    }
    for (k++; k <= last; k++) {
      const i = dir.lastIndexOf('/', k * ANCHOR_SPAN)
      if (i <= (from ? from.dir.length : 1)) continue // a component longer than the span: the next cut
      const a = dir.slice(0, i)
      from = this.find(a) ?? this.open(from, a)
      this.anchors.set(k, from)
    }
    return from
  }

  /** Close every handle. */
  closeAll (): void {
    for (const k of this.lru) {
      try { fs.closeSync(k.fd) } catch {}
    }
    this.lru.clear()
    this.byKey.clear()
    this.anchors.clear()
  }

  /** Close the handle of p and, with `below`, of every directory under it. */
  forget (p: string, below: boolean): void {
    if (!below) {
      const k = this.find(p)
      if (k) this.drop(k)
      return
    }
    for (const k of [...this.lru]) if (isWithin(k.dir, p)) this.drop(k)
  }
}

/** Read handles of real files kept open by path (Lower.read), at most FILE_HANDLES of them. */
const FILE_HANDLES = 256

export class FileHandles {
  private readonly fds = new Map<string, number>()

  /** The kept handle of p, or one `open` makes (all are closed when too many are kept). */
  of (p: string, open: () => number): number {
    let fd = this.fds.get(p)
    if (fd !== undefined) return fd
    fd = open()
    if (this.fds.size > FILE_HANDLES) this.closeAll()
    this.fds.set(p, fd)
    return fd
  }

  closeAll (): void {
    for (const fd of this.fds.values()) {
      try { fs.closeSync(fd) } catch {}
    }
    this.fds.clear()
  }

  /** Close the handle of p and, with `below`, of every path under it. */
  forget (p: string, below: boolean): void {
    if (!below) {
      const fd = this.fds.get(p)
      if (fd === undefined) return
      try { fs.closeSync(fd) } catch {}
      this.fds.delete(p)
      return
    }
    for (const [q, fd] of this.fds) {
      if (!isWithin(q, p)) continue
      try { fs.closeSync(fd) } catch {}
      this.fds.delete(q)
    }
  }
}
