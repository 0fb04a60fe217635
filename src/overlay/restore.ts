// `cpfs restore`: make a path (and everything below it) what it is in another view of the same
// lower. Entries are copied, never file data: restored files point at the same chunks and
// lower ranges, and a restored directory redirects to its lower children.
import { fsError } from '../errors.js'
import { cloneEntry, isInoKey, type DirEntry, type LiveEntry } from '../store/entries.js'
import { attrOf, metaOf, type Caller } from './attr.js'
import type { HeadLayer } from './head-layer.js'
import type { OverlayHooks } from './hooks.js'
import type { Namespace } from './namespace.js'
import type { Lower } from '../real/lower.js'
import { isWithin, parentOf } from '../paths/paths.js'
import { resolvedType, type Resolved, type View } from './view.js'

export class Restorer {
  constructor (
    private readonly layer: HeadLayer,
    private readonly namespace: Namespace,
    private readonly lower: Lower,
    private readonly hooks: OverlayHooks,
    /** The owner of parent directories restore recreates. */
    private readonly self: Caller
  ) {}

  /**
   * Make path p (and everything below it) what it is in another view of the same lower —
   * `cpfs restore`. Entries are copied, never file data: restored files point at the same
   * chunks and lower ranges, and a restored directory redirects to its lower children.
   * Missing parent directories are recreated from the source view. A restored name of a linked
   * file becomes a file of its own (with a new inode number): its other names keep their state.
   */
  restore (p: string, src: View): void {
    const r = src.resolve(p)
    if (r && p !== '/') this.makeParents(p, src)
    this.removeCurrent(p)
    if (!r) return
    if (resolvedType(r) !== 'd') this.restoreLeaf(p, r)
    else this.restoreDir(p, r, src)
  }

  /** Recreate p's missing parent directories (or replace what stands there) as src has them. */
  private makeParents (p: string, src: View): void {
    const parents = []
    for (let a = parentOf(p); a !== '/'; a = parentOf(a)) parents.unshift(a)
    for (const a of parents) {
      const live = this.layer.view.resolve(a)
      if (live && resolvedType(live) === 'd') continue
      const ra = src.resolve(a)
      if (!ra || resolvedType(ra) !== 'd') throw fsError('ENOTDIR', a, 'the parent is not a directory in the turn restored from')
      if (live) this.layer.removePath(a, false)
      const d: DirEntry = { kind: 'd', ...this.layer.newMeta(attrOf(ra).mode & 0o7777, this.self), opaque: 1, fresh: 1 }
      if (!this.layer.needsWhiteout(a)) d.newInTurn = 1
      this.layer.setHead(a, d)
    }
  }

  /** Remove what p is now (all of it, for a directory). */
  private removeCurrent (p: string): void {
    const cur = this.layer.view.resolve(p)
    if (!cur) return
    // Every name that goes counts: linked inodes lose those links.
    if (resolvedType(cur) !== 'd') this.namespace.dropName(p, cur)
    else {
      for (const names of [...this.layer.view.names.values()]) {
        for (const q of [...names]) {
          const rq = isWithin(q, p) ? this.layer.view.resolve(q) : null
          if (rq) this.namespace.dropName(q, rq)
        }
      }
      for (const [q] of [...this.layer.nodes]) if (!isInoKey(q) && isWithin(q, p)) this.namespace.detachNode(q, this.layer.view.resolve(q))
    }
    if (p === '/') this.layer.dropBelow(p)
    else this.layer.removePath(p, resolvedType(cur) === 'd')
  }

  private restoreLeaf (p: string, r: Resolved): void {
    const e = this.ownCopy(r)
    this.layer.stamp(e, false)
    if (this.layer.needsWhiteout(p)) delete e.newInTurn
    else e.newInTurn = 1
    this.layer.setHead(p, e)
  }

  private restoreDir (p: string, r: Resolved, src: View): void {
    const dir: DirEntry = { ...metaOf(attrOf(r)), kind: 'd', opaque: 1, fresh: 1 }
    const x = r.kind === 'upper' ? r.entry.xattrs : 'nlink' in r.stat ? this.lower.xattrs(r.lowerPath) : r.stat.xattrs
    if (x) dir.xattrs = x
    this.layer.stamp(dir, false)
    const lowerDir = src.dirLowerPath(p)
    if (lowerDir !== null && this.lower.stat(lowerDir)?.kind === 'd') dir.redirect = lowerDir
    if (!this.layer.needsWhiteout(p)) dir.newInTurn = 1
    this.layer.setHead(p, dir)
    for (const [q, e] of src.subtree(p)) {
      const needed = this.layer.needsWhiteout(q)
      if (e.kind === 'w') {
        if (needed) this.layer.setHead(q, { kind: 'w' })
        continue
      }
      let c: LiveEntry
      if (e.kind === 'h') {
        const rq = src.resolve(q)
        if (!rq) continue
        c = this.ownCopy(rq)
      } else {
        c = cloneEntry(e)
      }
      if (needed) delete c.newInTurn
      else c.newInTurn = 1
      this.layer.setHead(q, c)
    }
  }

  /** A copy of r's state as an entry of its own (a linked file's gets a new inode number). */
  private ownCopy (r: Resolved): LiveEntry {
    const e = r.kind === 'upper' ? cloneEntry(r.entry) : this.layer.fromLower(r)
    if (isInoKey(r.key)) {
      delete e.links
      delete e.realPath
      e.ino = this.hooks.allocIno()
    }
    return e
  }
}
