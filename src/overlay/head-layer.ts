// The head layer: the only layer an entry may be written in, and the view it is merged into.
// Every change of the overlay goes through here:
//  - An entry is never mutated once its layer is sealed: the first change in a new turn clones
//    it into the head layer (`headState`, `headRecord` and `headFile` are the only ways to get a
//    writable entry).
//  - Removing a path writes a whiteout only when the path existed when the turn began.
//  - Every head-layer change is reported to `onChange` (the session persists them).
// The open files' nodes are kept here too, because making an entry writable must point the node
// of that file at the new entry.
import { fsError } from '../errors.js'
import { S_IFMT, cloneEntry, isInoKey, now, setTime, type Entry, type FileEntry, type LiveEntry } from '../store/entries.js'
import type { Caller } from './attr.js'
import type { FileNode } from './file-node.js'
import type { OverlayHooks } from './hooks.js'
import type { Lower } from '../real/lower.js'
import type { Resolved, View } from './view.js'

export class HeadLayer {
  view: View
  head: Map<string, Entry>
  /** Open files, by where their state lives: a path, or an inode record's key (#ino). */
  readonly nodes = new Map<string, FileNode>()

  constructor (view: View, head: Map<string, Entry>, private readonly lower: Lower, private readonly hooks: OverlayHooks) {
    this.view = view
    this.head = head
  }

  /** What p names, or ENOENT. */
  resolve (p: string): Resolved {
    const r = this.view.resolve(p)
    if (!r) throw fsError('ENOENT', p)
    return r
  }

  /** Does removing p need a whiteout (did p exist when the head turn began)? */
  needsWhiteout (p: string): boolean {
    const h = this.head.get(p)
    if (h) return h.newInTurn !== 1
    // An older whiteout counts too: the view holds one entry per path, so a head entry that
    // replaced it must leave a whiteout behind when it goes, or the lower would resurface.
    return this.view.entries.has(p) || this.view.resolve(p) !== null
  }

  /** Put e at p in the head layer and the view, and report the change. */
  setHead (p: string, e: Entry): void {
    this.head.set(p, e)
    this.view.set(p, e)
    this.hooks.onChange(p)
  }

  /** Drop every upper entry strictly below p (from the head layer and the view). */
  dropBelow (p: string): void {
    for (const q of this.view.below(p)) {
      if (this.head.delete(q)) this.hooks.onChange(q)
    }
    this.view.removeBelow(p)
  }

  /** Remove p (a file, symlink or empty directory) from the view. */
  removePath (p: string, isDir: boolean): void {
    const whiteout = this.needsWhiteout(p)
    if (isDir) this.dropBelow(p)
    if (whiteout) {
      this.setHead(p, { kind: 'w' })
    } else {
      this.head.delete(p)
      this.view.delete(p)
      this.hooks.onChange(p)
    }
  }

  /** The metadata of a new entry: owned by caller, made now, with a new inode number. */
  newMeta (mode: number, caller: Caller) {
    const t = now()
    const m = { mode, uid: caller.uid, gid: caller.gid, atime: t.ms, mtime: t.ms, ctime: t.ms, ino: this.hooks.allocIno() }
    if (t.ns) Object.assign(m, { atimeNs: t.ns, mtimeNs: t.ns, ctimeNs: t.ns })
    return m
  }

  /** Mark e changed now (ctime; with `modified`, mtime too). */
  stamp (e: LiveEntry, modified: boolean): void {
    const t = now()
    setTime(e, 'c', t)
    if (modified) setTime(e, 'm', t)
  }

  /** An entry made from what r shows below the upper layers (the lower, or a captured original). */
  fromLower (r: Extract<Resolved, { kind: 'lower' }>): LiveEntry {
    const st = r.stat
    if (!('nlink' in st)) {
      // A base entry (captured original): copy it, keeping its content references.
      const c = cloneEntry(st)
      delete c.newInTurn
      delete c.links
      return c
    }
    const meta: any = { mode: st.mode & ~S_IFMT, uid: st.uid, gid: st.gid, atime: st.atime, mtime: st.mtime, ctime: st.ctime, ino: st.ino }
    if (st.atimeNs) meta.atimeNs = st.atimeNs
    if (st.mtimeNs) meta.mtimeNs = st.mtimeNs
    if (st.ctimeNs) meta.ctimeNs = st.ctimeNs
    const x = this.lower.xattrs(r.lowerPath)
    if (x) meta.xattrs = x
    if (st.kind === 'f') return { kind: 'f', ...meta, size: st.size, chunks: new Map(), src: r.lowerPath, srcSize: st.size }
    if (st.kind === 'l') return { kind: 'l', ...meta, target: this.lower.readlink(r.lowerPath) }
    if (st.kind === 'n') return { kind: 'n', ...meta, fmt: st.mode & S_IFMT, rdev: st.rdev }
    return { kind: 'd', ...meta }
  }

  /**
   * A writable head-layer entry for the state the existing path p names (copy-up when needed):
   * p's own entry, or the inode record of a linked file. Returns it with the key it lives at.
   */
  headState (p: string): { e: LiveEntry, key: string } {
    const h = this.head.get(p)
    if (h && h.kind !== 'w' && h.kind !== 'h') return { e: h, key: p }
    const r = this.resolve(p)
    if (isInoKey(r.key)) return { e: this.headRecord(r), key: r.key }
    const e = r.kind === 'upper' ? cloneEntry(r.entry) : this.fromLower(r)
    delete e.newInTurn // p existed when the turn began (it resolved without a head entry)
    if (e.kind === 'd') delete e.fresh // a metadata copy hides nothing (see store/entries.ts)
    this.setHead(p, e)
    const node = this.nodes.get(p)
    if (node && e.kind === 'f') node.entry = e
    return { e, key: p }
  }

  /** The writable entry of the state p names (headState without its key). */
  headEntry (p: string): LiveEntry {
    return this.headState(p).e
  }

  /**
   * The writable head-layer copy of the inode record r resolves to. A real file with several
   * names that has no record yet gets one now, keyed by its real inode number and counting its
   * real links (names outside the workspace included, as the real st_nlink does).
   */
  headRecord (r: Resolved): LiveEntry {
    const key = r.key
    const h = this.head.get(key)
    if (h && h.kind !== 'w' && h.kind !== 'h') return h
    let e: LiveEntry
    if (r.kind === 'upper') {
      e = cloneEntry(r.entry)
      delete e.newInTurn
    } else {
      e = this.fromLower(r)
      e.links = 'nlink' in r.stat ? r.stat.nlink : r.stat.links ?? 1
      e.realPath = r.lowerPath
    }
    // Nothing older to hide: removing it later needs no whiteout.
    if (!this.view.entries.has(key)) e.newInTurn = 1
    this.setHead(key, e)
    const node = this.nodes.get(key)
    if (node && e.kind === 'f') node.entry = e
    return e
  }

  /** How an open node's key resolves now (its record may not exist yet: a real file with several names). */
  resolveNode (node: FileNode): Resolved {
    const key = node.key!
    if (!isInoKey(key)) return this.resolve(key)
    const rec = this.view.record(key)
    if (rec) return { kind: 'upper', entry: rec, key }
    const st = node.lowerPath !== null ? this.lower.stat(node.lowerPath) : null
    if (!st) throw fsError('ESTALE', key)
    return { kind: 'lower', lowerPath: node.lowerPath!, stat: st, key }
  }

  /** The writable entry of an open file, copied up on its first change. */
  headFile (node: FileNode): FileEntry {
    if (node.stale) throw fsError('ESTALE', node.label)
    if (node.key === null) {
      // Unlinked but still open: the detached entry takes writes (never persisted).
      if (!node.entry) throw fsError('ESTALE', '(unlinked)')
      return node.entry
    }
    if (!node.entry && node.lowerPath !== null && this.hooks.onCopyUp) {
      const st = this.lower.stat(node.lowerPath)
      if (st && st.kind === 'f' && 'nlink' in st) this.hooks.onCopyUp(node.lowerPath, st.size)
    }
    const e = isInoKey(node.key) ? this.headRecord(this.resolveNode(node)) : this.headEntry(node.key)
    if (e.kind !== 'f') throw fsError('EISDIR', node.key)
    node.entry = e
    return e
  }

  /** The open file at `from` (if any) now lives at `to` (a rename, or its first link), in e when e is a file. */
  moveNode (from: string, to: string, e: Entry | undefined): void {
    const node = this.nodes.get(from)
    if (!node) return
    this.nodes.delete(from)
    node.key = to
    if (e && e.kind === 'f') node.entry = e
    this.nodes.set(to, node)
  }
}
