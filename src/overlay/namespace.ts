// The namespace: names made and removed (create, mkdir, mknod, symlink, unlink, rmdir, link).
//  - Hard links: `link` turns the file into an inode record (store/entries.ts) with a link
//    count, and every name points at it. A real file that already has several names gets its
//    record (keyed by its real inode number) when one of them first changes, so all of them
//    see the change. Unlinking a name drops one link; the record goes with the last one.
//  - Losing the last name detaches an open file's node, so it stays readable and writable
//    through its handles.
//  - A directory entry added or removed moves its directory's mtime and ctime (as ext4 does).
import { fsError } from '../errors.js'
import {
  cloneEntry, inoKey, inoOfKey, isInoKey,
  type DirEntry, type FileEntry, type SymlinkEntry, type LiveEntry, type HardLinkEntry, type NodeEntry
} from '../store/entries.js'
import { attrOf, type Attr, type Caller } from './attr.js'
import { FileNode } from './file-node.js'
import type { HeadLayer } from './head-layer.js'
import type { OverlayHooks } from './hooks.js'
import { parentOf } from '../paths/paths.js'
import { resolvedType, type Resolved } from './view.js'

/** Linux's limit for a symlink's target (PATH_MAX including the NUL). */
const SYMLINK_MAX = 4095

export class Namespace {
  constructor (private readonly layer: HeadLayer, private readonly hooks: OverlayHooks) {}

  /** Check that p's parent is a directory; returns its attributes. */
  parentDir (p: string): Attr {
    const parent = parentOf(p)
    const r = this.layer.view.resolve(parent)
    if (!r) throw fsError('ENOENT', parent)
    if (resolvedType(r) !== 'd') throw fsError('ENOTDIR', parent)
    return attrOf(r)
  }

  /** New entries in a setgid directory take its group; new directories keep the bit (as ext4). */
  private inherit (parent: Attr, meta: { mode: number, gid: number }, isDir: boolean): void {
    if ((parent.mode & 0o2000) === 0) return
    meta.gid = parent.gid
    if (isDir) meta.mode |= 0o2000
  }

  /** A directory entry was added to or removed from p's directory: its mtime and ctime move (as ext4). */
  touchParent (p: string): void {
    const dir = parentOf(p)
    const e = this.layer.headEntry(dir)
    this.layer.stamp(e, true)
    this.hooks.onChange(dir)
  }

  /** A new empty file at p, and the node its first handle opens (the caller adds the handle). */
  create (p: string, mode: number, caller: Caller): FileNode {
    if (this.layer.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    const n = this.layer.needsWhiteout(p) ? undefined : 1
    const e: FileEntry = { kind: 'f', ...this.layer.newMeta(mode & 0o7777, caller), size: 0, chunks: new Map() }
    this.inherit(parent, e, false)
    if (n) e.newInTurn = 1
    this.layer.setHead(p, e)
    this.touchParent(p)
    const node = new FileNode(p, e, null)
    this.layer.nodes.set(p, node)
    return node
  }

  mkdir (p: string, mode: number, caller: Caller): void {
    if (this.layer.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    const n = this.layer.needsWhiteout(p) ? undefined : 1
    // A new directory has no old children: opaque, so nothing below it is ever looked up.
    const e: DirEntry = { kind: 'd', ...this.layer.newMeta(mode & 0o7777, caller), opaque: 1, fresh: 1 }
    this.inherit(parent, e, true)
    if (n) e.newInTurn = 1
    this.layer.dropBelow(p)
    this.layer.setHead(p, e)
    this.touchParent(p)
  }

  /** A FIFO, socket or device node (mknod(2) of anything but a regular file). */
  mknod (p: string, fmt: number, mode: number, rdev: number, caller: Caller): void {
    if (this.layer.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    const n = this.layer.needsWhiteout(p) ? undefined : 1
    const e: NodeEntry = { kind: 'n', ...this.layer.newMeta(mode & 0o7777, caller), fmt, rdev }
    this.inherit(parent, e, false)
    if (n) e.newInTurn = 1
    this.layer.setHead(p, e)
    this.touchParent(p)
  }

  symlink (target: string, p: string, caller: Caller): void {
    if (Buffer.byteLength(target) > SYMLINK_MAX) throw fsError('ENAMETOOLONG', p, 'the symlink target is longer than 4095 bytes')
    if (this.layer.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    const n = this.layer.needsWhiteout(p) ? undefined : 1
    const e: SymlinkEntry = { kind: 'l', ...this.layer.newMeta(0o777, caller), target }
    this.inherit(parent, e, false)
    if (n) e.newInTurn = 1
    this.layer.setHead(p, e)
    this.touchParent(p)
  }

  unlink (p: string): void {
    const r = this.layer.resolve(p)
    if (resolvedType(r) === 'd') throw fsError('EISDIR', p)
    this.dropName(p, r)
    this.layer.removePath(p, false)
    this.touchParent(p)
  }

  /**
   * p, one name of what r resolves to, is going away. A linked inode loses a link (its ctime
   * moves, as ext4's does) and goes with its last one; an open file that loses its last name
   * keeps its content for its handles.
   */
  dropName (p: string, r: Resolved): void {
    if (!isInoKey(r.key)) {
      this.detachNode(p, r)
      return
    }
    const rec = this.layer.headRecord(r)
    rec.links = Math.max(0, (rec.links ?? 1) - 1)
    this.layer.stamp(rec, false)
    this.hooks.onChange(r.key)
    if (rec.links > 0) return
    this.detachNode(r.key, { kind: 'upper', entry: rec, key: r.key })
    const h = this.layer.head.get(r.key)
    if (h && h.newInTurn === 1) {
      this.layer.head.delete(r.key)
      this.layer.view.delete(r.key)
      this.hooks.onChange(r.key)
    } else {
      this.layer.setHead(r.key, { kind: 'w' })
    }
  }

  /** The open file at key (if any) has no name any more: it keeps its content for its handles. */
  detachNode (key: string, r: Resolved | null): void {
    const node = this.layer.nodes.get(key)
    if (!node) return
    this.layer.nodes.delete(key)
    if (!node.entry && r && r.kind === 'lower') node.entry = this.layer.fromLower(r) as FileEntry
    if (node.entry) {
      node.entry = cloneEntry(node.entry)
      delete node.entry.links
    }
    node.key = null
  }

  rmdir (p: string): void {
    const r = this.layer.resolve(p)
    if (resolvedType(r) !== 'd') throw fsError('ENOTDIR', p)
    if (p === '/') throw fsError('EPERM', p)
    if (this.layer.view.hasEntries(p)) throw fsError('ENOTEMPTY', p)
    this.layer.removePath(p, true)
    this.touchParent(p)
  }

  /**
   * link(2): dst becomes another name of src's inode. The first link turns src's entry into an
   * inode record keyed by the inode number the file already shows (so st_ino stays), and src
   * into a name of it; an open node of src follows (a write through any name reaches it).
   */
  link (src: string, dst: string): void {
    const rs = this.layer.resolve(src)
    if (resolvedType(rs) === 'd') throw fsError('EPERM', src)
    if (this.layer.view.resolve(dst)) throw fsError('EEXIST', dst)
    this.parentDir(dst)
    this.hooks.checkSpace(0)
    const { key, rec } = this.linked(src, rs)
    rec.links = (rec.links ?? 1) + 1
    this.layer.stamp(rec, false)
    this.hooks.onChange(key)
    const name: HardLinkEntry = { kind: 'h', ino: inoOfKey(key) }
    if (!this.layer.needsWhiteout(dst)) name.newInTurn = 1
    this.layer.setHead(dst, name)
    this.touchParent(dst)
  }

  /** The head-layer inode record of what src names, made from src's own entry when it has none. */
  private linked (src: string, rs: Resolved): { key: string, rec: LiveEntry } {
    if (isInoKey(rs.key)) return { key: rs.key, rec: this.layer.headRecord(rs) }
    const own = this.layer.head.get(src)
    let rec: LiveEntry
    if (rs.kind === 'upper') {
      rec = own === rs.entry ? rs.entry : cloneEntry(rs.entry)
    } else {
      rec = this.layer.fromLower(rs)
      rec.realPath = rs.lowerPath
    }
    const key = inoKey(rec.ino)
    delete rec.newInTurn
    rec.links = 1
    if (!this.layer.view.entries.has(key)) rec.newInTurn = 1
    this.layer.setHead(key, rec)
    const name: HardLinkEntry = { kind: 'h', ino: rec.ino }
    if (own && own.newInTurn === 1) name.newInTurn = 1 // src itself is still new this turn
    this.layer.setHead(src, name)
    this.layer.moveNode(src, key, rec)
    return { key, rec }
  }
}
