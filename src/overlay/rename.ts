// rename(2) and renameat2(2). Open files follow their names: path-keyed nodes move with the
// path (and with every path below a moved directory); a linked file's node stays with its inode.
import { fsError } from '../errors.js'
import { cloneEntry, inoOfKey, isInoKey, type DirEntry, type LiveEntry, type HardLinkEntry } from '../store/entries.js'
import { metaOf } from './attr.js'
import type { HeadLayer } from './head-layer.js'
import type { OverlayHooks } from './hooks.js'
import type { Namespace } from './namespace.js'
import type { Lower } from '../real/lower.js'
import { isWithin, parentOf, rebase } from '../paths/paths.js'
import { resolvedType, type Resolved } from './view.js'

export class Renamer {
  constructor (
    private readonly layer: HeadLayer,
    private readonly namespace: Namespace,
    private readonly lower: Lower,
    private readonly hooks: OverlayHooks
  ) {}

  /**
   * rename(2) and renameat2(2): `noReplace` fails with EEXIST when dst exists; `exchange`
   * swaps two existing paths atomically (both must exist). Returns false when nothing changed
   * (the same path, or two names of one inode: POSIX leaves both).
   */
  rename (src: string, dst: string, flags: { noReplace?: boolean, exchange?: boolean } = {}): boolean {
    if (flags.exchange) return this.exchange(src, dst)
    const rs = this.layer.resolve(src)
    if (src === dst) return false
    if (isWithin(dst, src)) throw fsError('EINVAL', dst)
    this.namespace.parentDir(dst)
    const rd = this.layer.view.resolve(dst)
    if (rd && flags.noReplace) throw fsError('EEXIST', dst)
    const srcIsDir = resolvedType(rs) === 'd'
    if (rd) {
      const dstIsDir = resolvedType(rd) === 'd'
      if (srcIsDir && !dstIsDir) throw fsError('ENOTDIR', dst)
      if (!srcIsDir && dstIsDir) throw fsError('EISDIR', dst)
      if (dstIsDir && this.layer.view.hasEntries(dst)) throw fsError('ENOTEMPTY', dst)
      if (isInoKey(rs.key) && rs.key === rd.key) return false
    }
    this.hooks.checkSpace(0)
    if (rd) {
      this.namespace.dropName(dst, rd)
      this.layer.removePath(dst, srcIsDir)
    }
    if (srcIsDir) this.renameDir(src, dst, rs)
    else this.renameLeaf(src, dst, rs)
    this.namespace.touchParent(src)
    if (parentOf(dst) !== parentOf(src)) this.namespace.touchParent(dst)
    return true
  }

  /** RENAME_EXCHANGE: three moves through a name no real path can have, in one synchronous op. */
  private exchange (a: string, b: string): boolean {
    this.layer.resolve(a)
    this.layer.resolve(b)
    if (a === b) return false
    if (isWithin(a, b) || isWithin(b, a)) throw fsError('EINVAL', b)
    const tmp = parentOf(a) === '/' ? '/\u0000cpfs-exchange' : parentOf(a) + '/\u0000cpfs-exchange'
    this.rename(a, tmp)
    this.rename(b, a)
    this.rename(tmp, b)
    return true
  }

  private renameLeaf (src: string, dst: string, rs: Resolved): void {
    let moved: LiveEntry | HardLinkEntry
    if (isInoKey(rs.key)) {
      // A name of a linked inode moves; the inode (its record) stays, with a new ctime.
      const rec = this.layer.headRecord(rs)
      this.layer.stamp(rec, false)
      this.hooks.onChange(rs.key)
      moved = { kind: 'h', ino: inoOfKey(rs.key) }
    } else if (rs.kind === 'upper') {
      moved = this.layer.head.get(src) === rs.entry ? rs.entry : cloneEntry(rs.entry)
    } else {
      moved = this.layer.fromLower(rs)
    }
    this.layer.removePath(src, false)
    if (this.layer.needsWhiteout(dst)) delete moved.newInTurn
    else moved.newInTurn = 1
    if (moved.kind !== 'h') this.layer.stamp(moved, false)
    this.layer.setHead(dst, moved)
    if (!isInoKey(rs.key)) this.layer.moveNode(src, dst, moved)
  }

  private renameDir (src: string, dst: string, rs: Resolved): void {
    // The moved directory keeps its lower children by pointing at them (redirect), so a
    // lower directory of any size moves in O(upper entries below it).
    let lowerDir: string | null
    let attrs: LiveEntry
    if (rs.kind === 'upper') {
      const e = rs.entry as DirEntry
      attrs = e
      lowerDir = e.redirect ?? (e.opaque ? null : this.layer.view.lowerPathFor(src))
    } else {
      attrs = this.layer.fromLower(rs)
      lowerDir = rs.lowerPath
    }
    if (lowerDir !== null && this.lower.stat(lowerDir)?.kind !== 'd') lowerDir = null
    const moved = this.layer.view.subtree(src).map(([q, e]) => [rebase(q, src, dst), e, this.layer.head.get(q) === e] as const)
    this.layer.removePath(src, true)
    const dir: DirEntry = { ...metaOf(attrs), kind: 'd', opaque: 1, fresh: 1 }
    if (attrs.xattrs) dir.xattrs = attrs.xattrs
    this.layer.stamp(dir, false)
    if (lowerDir !== null) dir.redirect = lowerDir
    if (!this.layer.needsWhiteout(dst)) dir.newInTurn = 1
    this.layer.setHead(dst, dir)
    for (const [q, e, own] of moved) {
      const c = own ? e : cloneEntry(e)
      const existed = this.layer.needsWhiteout(q)
      if (c.kind === 'w') {
        if (existed) this.layer.setHead(q, { kind: 'w' })
        continue
      }
      if (existed) delete c.newInTurn
      else c.newInTurn = 1
      this.layer.setHead(q, c)
    }
    for (const p of [...this.layer.nodes.keys()]) {
      if (!isInoKey(p) && isWithin(p, src)) {
        const q = rebase(p, src, dst)
        this.layer.moveNode(p, q, this.layer.head.get(q))
      }
    }
  }
}
