// The live overlay: the head layer over the merged view of older layers and the origin.
// Every mutation goes through here, synchronously (the FUSE edge runs one op at a time on
// the JavaScript thread, so no op sees another half-done). Rules this module keeps:
//  - Reads never copy up. A file is copied up on its first modification, in O(1): its new
//    entry points at the origin file (`src`) and only the chunks later written are stored.
//  - An entry is never mutated once its layer is sealed: the first change in a new turn
//    clones it into the head layer (`headFile`, `headDir`, `headMeta` are the only ways
//    to get a writable entry).
//  - Removing a path writes a whiteout only when the path existed when the turn began.
//  - Open files are nodes keyed by where their state lives: their current path, or the inode
//    record of a file with several names (hard links), so a write through any name reaches one
//    node. Renames move path-keyed nodes; losing the last name detaches a node, so it stays
//    readable and writable through its handles.
//  - Hard links: `link` turns the file into an inode record (store/entries.ts) with a link
//    count, and every name points at it. A real file that already has several names gets its
//    record (keyed by its real inode number) when one of them first changes, so all of them
//    see the change. Unlinking a name drops one link; the record goes with the last one.
//  - A directory entry added or removed moves its directory's mtime and ctime (as ext4 does).
// Persistence is not done here: every head-layer change is reported to `onChange`, and the
// session batches those changes into LevelDB.
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import { isZero, type ChunkStore } from '../store/chunks.js'
import {
  CHUNK_SIZE, MAX_FILE_SIZE, S_IFMT, chunkCount, chunkLen, cloneEntry, inoKey, inoOfKey, isInoKey, now, setTime, srcBytes,
  type DirEntry, type Entry, type FileEntry, type LinkEntry, type LiveEntry, type NameEntry, type NodeEntry
} from '../store/entries.js'
import { attrOf, metaOf, type Attr, type Caller, type KillSetId, type SetAttr } from './attr.js'
import { FileNode } from './file-node.js'
import type { OverlayHooks } from './hooks.js'
import { readEntry, type Origin, type SrcRead } from './origin.js'
import { ACL_ACCESS, aclAfterChmod, modeFromAcl } from './acl.js'
import { isWithin, parentOf, rebase } from './paths.js'
import { CAPABILITY, dropPrivileges } from './privileges.js'
import { View, resolvedType, type Resolved } from './view.js'

export type { Attr, Caller, KillSetId, SetAttr, TimeSet } from './attr.js'
export { FileNode } from './file-node.js'
export type { OverlayHooks } from './hooks.js'

// Linux's limits for extended attributes (limits.h: XATTR_NAME_MAX, XATTR_SIZE_MAX, XATTR_LIST_MAX).
const XATTR_NAME_MAX = 255
const XATTR_SIZE_MAX = 65536
const XATTR_LIST_MAX = 65536

/** Linux's limit for a symlink's target (PATH_MAX including the NUL). */
const SYMLINK_MAX = 4095

interface Handle {
  node: FileNode
  writable: boolean
}

export class Overlay {
  view: View
  head: Map<string, Entry>
  readonly origin: Origin
  readonly chunks: ChunkStore
  private readonly hooks: OverlayHooks
  readonly nodes = new Map<string, FileNode>()
  private readonly handles = new Map<number, Handle>()
  private nextFh = 1
  /** The daemon's own user: the owner when no caller is known (the control socket, tests). */
  readonly self: Caller = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }

  constructor (view: View, head: Map<string, Entry>, origin: Origin, chunks: ChunkStore, hooks: OverlayHooks) {
    this.view = view
    this.head = head
    this.origin = origin
    this.chunks = chunks
    this.hooks = hooks
  }

  /** Swap in a new stack (after a turn, rewind or redo). Open handles become stale. */
  reset (view: View, head: Map<string, Entry>, keepHandles: boolean): void {
    this.view = view
    this.head = head
    if (!keepHandles) {
      for (const node of this.nodes.values()) node.stale = true
      for (const h of this.handles.values()) h.node.stale = true
      this.nodes.clear()
    }
  }

  // ---- lookups -------------------------------------------------------------------------

  private resolve (p: string): Resolved {
    const r = this.view.resolve(p)
    if (!r) throw fsError('ENOENT', p)
    return r
  }

  getattr (p: string): Attr {
    const r = this.resolve(p)
    const a = this.attrOf(r)
    if (resolvedType(r) === 'd') a.nlink = this.view.dirNlink(p, r)
    return a
  }

  /** Attributes of a resolved path (a directory's nlink only by getattr, which knows its path). */
  attrOf (r: Resolved): Attr {
    return attrOf(r)
  }

  /** Attributes through an open handle (fstat), or by path when the handle is unknown. */
  fgetattr (fh: number, p: string | null): Attr {
    const h = this.handles.get(fh)
    if (!h) {
      if (p === null) throw fsError('EBADF', String(fh))
      return this.getattr(p)
    }
    return this.nodeAttr(this.live(h))
  }

  /** Some open handle of node (for changes to a file that lost its name), or null. */
  handleOf (node: FileNode): number | null {
    for (const [fh, h] of this.handles) if (h.node === node) return fh
    return null
  }

  /** The open file behind a handle (the FUSE layer keeps it when the file loses its name). */
  fileOf (fh: number): FileNode | null {
    return this.handles.get(fh)?.node ?? null
  }

  /** The open file that path p names, if any. */
  fileAt (p: string): FileNode | null {
    const byPath = this.nodes.get(p)
    if (byPath) return byPath
    const r = this.view.resolve(p)
    return r ? this.nodes.get(r.key) ?? null : null
  }

  readdir (p: string): string[] {
    const r = this.resolve(p)
    if (resolvedType(r) !== 'd') throw fsError('ENOTDIR', p)
    return this.view.readdir(p)
  }

  readlink (p: string): string {
    const r = this.resolve(p)
    if (resolvedType(r) !== 'l') throw fsError('EINVAL', p)
    return r.kind === 'upper' ? (r.entry as LinkEntry).target : this.origin.readlink(r.originPath)
  }

  access (p: string): void {
    this.resolve(p)
  }

  statfs (): fs.StatsFs {
    return fs.statfsSync(this.origin.realPath('/'))
  }

  // ---- head-layer bookkeeping -----------------------------------------------------------

  /** Does removing p need a whiteout (did p exist when the head turn began)? */
  private needsWhiteout (p: string): boolean {
    const h = this.head.get(p)
    if (h) return h.n !== 1
    // An older whiteout counts too: the view holds one entry per path, so a head entry that
    // replaced it must leave a whiteout behind when it goes, or the origin would resurface.
    return this.view.entries.has(p) || this.view.resolve(p) !== null
  }

  private setHead (p: string, e: Entry): void {
    this.head.set(p, e)
    this.view.set(p, e)
    this.hooks.onChange(p)
  }

  /** Drop every upper entry strictly below p (from the head layer and the view). */
  private dropBelow (p: string): void {
    for (const q of this.view.below(p)) {
      if (this.head.delete(q)) this.hooks.onChange(q)
    }
    this.view.removeBelow(p)
  }

  /** Remove p (a file, symlink or empty directory) from the view. */
  private removePath (p: string, isDir: boolean): void {
    const whiteout = this.needsWhiteout(p)
    if (isDir) this.dropBelow(p)
    if (whiteout) {
      this.setHead(p, { t: 'w' })
    } else {
      this.head.delete(p)
      this.view.delete(p)
      this.hooks.onChange(p)
    }
  }

  private newMeta (mode: number, caller: Caller) {
    const t = now()
    const m = { mode, uid: caller.uid, gid: caller.gid, atime: t.ms, mtime: t.ms, ctime: t.ms, ino: this.hooks.allocIno() }
    if (t.ns) Object.assign(m, { atimeNs: t.ns, mtimeNs: t.ns, ctimeNs: t.ns })
    return m
  }

  /** Mark e changed now (ctime; with `modified`, mtime too). */
  private stamp (e: LiveEntry, modified: boolean): void {
    const t = now()
    setTime(e, 'c', t)
    if (modified) setTime(e, 'm', t)
  }

  private fromOrigin (r: Extract<Resolved, { kind: 'origin' }>): LiveEntry {
    const st = r.stat
    if (!('nlink' in st)) {
      // A base entry (captured original): copy it, keeping its content references.
      const c = cloneEntry(st)
      delete c.n
      delete c.links
      return c
    }
    const meta: any = { mode: st.mode & ~S_IFMT, uid: st.uid, gid: st.gid, atime: st.atime, mtime: st.mtime, ctime: st.ctime, ino: st.ino }
    if (st.atimeNs) meta.atimeNs = st.atimeNs
    if (st.mtimeNs) meta.mtimeNs = st.mtimeNs
    if (st.ctimeNs) meta.ctimeNs = st.ctimeNs
    const x = this.origin.xattrs(r.originPath)
    if (x) meta.x = x
    if (st.t === 'f') return { t: 'f', ...meta, size: st.size, chunks: new Map(), src: r.originPath, srcSize: st.size }
    if (st.t === 'l') return { t: 'l', ...meta, target: this.origin.readlink(r.originPath) }
    if (st.t === 'n') return { t: 'n', ...meta, fmt: st.mode & S_IFMT, rdev: st.rdev }
    return { t: 'd', ...meta }
  }

  /**
   * A writable head-layer entry for the state the existing path p names (copy-up when needed):
   * p's own entry, or the inode record of a linked file. Returns it with the key it lives at.
   */
  private headState (p: string): { e: LiveEntry, key: string } {
    const h = this.head.get(p)
    if (h && h.t !== 'w' && h.t !== 'h') return { e: h, key: p }
    const r = this.resolve(p)
    if (isInoKey(r.key)) return { e: this.headRecord(r), key: r.key }
    const e = r.kind === 'upper' ? cloneEntry(r.entry) : this.fromOrigin(r)
    delete e.n // p existed when the turn began (it resolved without a head entry)
    if (e.t === 'd') delete e.fresh // a metadata copy hides nothing (see store/entries.ts)
    this.setHead(p, e)
    const node = this.nodes.get(p)
    if (node && e.t === 'f') node.entry = e
    return { e, key: p }
  }

  private headEntry (p: string): LiveEntry {
    return this.headState(p).e
  }

  /**
   * The writable head-layer copy of the inode record r resolves to. A real file with several
   * names that has no record yet gets one now, keyed by its real inode number and counting its
   * real links (names outside the workspace included, as the real st_nlink does).
   */
  private headRecord (r: Resolved): LiveEntry {
    const key = r.key
    const h = this.head.get(key)
    if (h && h.t !== 'w' && h.t !== 'h') return h
    let e: LiveEntry
    if (r.kind === 'upper') {
      e = cloneEntry(r.entry)
      delete e.n
    } else {
      e = this.fromOrigin(r)
      e.links = 'nlink' in r.stat ? r.stat.nlink : r.stat.links ?? 1
      e.o = r.originPath
    }
    // Nothing older to hide: removing it later needs no whiteout.
    if (!this.view.entries.has(key)) e.n = 1
    this.setHead(key, e)
    const node = this.nodes.get(key)
    if (node && e.t === 'f') node.entry = e
    return e
  }

  /** How an open node's key resolves now (its record may not exist yet: a real file with several names). */
  private resolveNode (node: FileNode): Resolved {
    const key = node.key!
    if (!isInoKey(key)) return this.resolve(key)
    const rec = this.view.record(key)
    if (rec) return { kind: 'upper', entry: rec, key }
    const st = node.originPath !== null ? this.origin.stat(node.originPath) : null
    if (!st) throw fsError('ESTALE', key)
    return { kind: 'origin', originPath: node.originPath!, stat: st, key }
  }

  private headFile (node: FileNode): FileEntry {
    if (node.stale) throw fsError('ESTALE', node.label)
    if (node.key === null) {
      // Unlinked but still open: the detached entry takes writes (never persisted).
      if (!node.entry) throw fsError('ESTALE', '(unlinked)')
      return node.entry
    }
    if (!node.entry && node.originPath !== null && this.hooks.onCopyUp) {
      const st = this.origin.stat(node.originPath)
      if (st && st.t === 'f' && 'nlink' in st) this.hooks.onCopyUp(node.originPath, st.size)
    }
    const e = isInoKey(node.key) ? this.headRecord(this.resolveNode(node)) : this.headEntry(node.key)
    if (e.t !== 'f') throw fsError('EISDIR', node.key)
    node.entry = e
    return e
  }

  private touched (): void {
    this.hooks.onWrite()
  }

  // ---- files ----------------------------------------------------------------------------

  private nodeFor (p: string): FileNode {
    const byPath = this.nodes.get(p)
    if (byPath) return byPath
    const r = this.resolve(p)
    let node = this.nodes.get(r.key)
    if (node) return node
    const t = resolvedType(r)
    if (t === 'd') throw fsError('EISDIR', p)
    if (t !== 'f') throw fsError('EINVAL', p)
    node = r.kind === 'upper'
      ? new FileNode(r.key, r.entry as FileEntry, null)
      : new FileNode(r.key, null, r.originPath)
    if (r.kind === 'origin' && !('nlink' in r.stat)) node.entry = this.fromOrigin(r) as FileEntry
    this.nodes.set(r.key, node)
    return node
  }

  open (p: string, flags: number): number {
    const node = this.nodeFor(p)
    const acc = flags & 3 // O_ACCMODE
    const writable = acc === fs.constants.O_WRONLY || acc === fs.constants.O_RDWR
    return this.addHandle(node, writable)
  }

  private addHandle (node: FileNode, writable: boolean): number {
    node.opens++
    const fh = this.nextFh++
    if (this.nextFh > 0x7fffffff) this.nextFh = 1
    this.handles.set(fh, { node, writable })
    return fh
  }

  create (p: string, mode: number, caller: Caller = this.self): number {
    if (this.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    this.touched()
    const n = this.needsWhiteout(p) ? undefined : 1
    const e: FileEntry = { t: 'f', ...this.newMeta(mode & 0o7777, caller), size: 0, chunks: new Map() }
    this.inherit(parent, e, false)
    if (n) e.n = 1
    this.setHead(p, e)
    this.touchParent(p)
    const node = new FileNode(p, e, null)
    this.nodes.set(p, node)
    return this.addHandle(node, true)
  }

  private live (h: Handle): FileNode {
    if (h.node.stale) throw fsError('ESTALE', h.node.label)
    return h.node
  }

  private handle (fh: number): Handle {
    const h = this.handles.get(fh)
    if (!h) throw fsError('EBADF', String(fh))
    return h
  }

  read (fh: number, buf: Buffer, len: number, pos: number): number {
    const node = this.live(this.handle(fh))
    const e = node.entry
    if (!e) return this.origin.read(node.originPath!, buf, 0, len, pos)
    return readEntry(e, this.chunks, buf, 0, len, pos, this.srcReader(e), node.dirty)
  }

  private srcReader (e: FileEntry): SrcRead | null {
    const src = e.src
    if (src === undefined) return null
    return (b, off, len, pos) => this.origin.read(src, b, off, len, pos)
  }

  /** The dirty buffer for chunk idx, loaded with the chunk's current bytes. */
  private dirtyChunk (node: FileNode, e: FileEntry, idx: number): Buffer {
    let d = node.dirty.get(idx)
    if (d) return d
    d = Buffer.alloc(CHUNK_SIZE)
    const start = idx * CHUNK_SIZE
    if (start < e.size) readEntry(e, this.chunks, d, 0, chunkLen(e.size, idx), start, this.srcReader(e))
    node.dirty.set(idx, d)
    return d
  }

  /** Writes all of buf; true when that cleared set-ID bits (so cached attributes are stale). */
  write (fh: number, buf: Buffer, len: number, pos: number, kill: KillSetId | null = null): boolean {
    const h = this.handle(fh)
    const node = this.live(h)
    if (!h.writable) throw fsError('EBADF', node.label)
    if (pos + len > MAX_FILE_SIZE) throw fsError('EFBIG', node.label)
    this.hooks.checkSpace(len)
    this.touched()
    const e = this.headFile(node)
    const modeChanged = (kill !== null || e.x?.[CAPABILITY] !== undefined) && dropPrivileges(e, kill)
    const end = pos + len
    let done = 0
    while (done < len) {
      const at = pos + done
      const idx = Math.floor(at / CHUNK_SIZE)
      const within = at - idx * CHUNK_SIZE
      const n = Math.min(CHUNK_SIZE - within, len - done)
      const d = this.dirtyChunk(node, e, idx)
      buf.copy(d, within, done, done + n)
      done += n
    }
    if (end > e.size) e.size = end
    this.stamp(e, true)
    if (node.key) (this.hooks.onData ?? this.hooks.onChange)(node.key)
    return modeChanged
  }

  /**
   * Make [from, to) of e read as zeros, keeping the size: whole chunks become holes (no data,
   * O(1) each), the partial chunks at the ends are rewritten.
   */
  private zeroRange (node: FileNode, e: FileEntry, from: number, to: number): void {
    to = Math.min(to, e.size)
    if (from >= to) return
    const first = Math.floor(from / CHUNK_SIZE)
    const last = Math.floor((to - 1) / CHUNK_SIZE)
    const srcEnd = srcBytes(e)
    const whole = (idx: number): void => {
      node.dirty.delete(idx)
      if (idx * CHUNK_SIZE < srcEnd) e.chunks.set(idx, null)
      else e.chunks.delete(idx)
    }
    if (first === last) {
      if (from % CHUNK_SIZE === 0 && (to % CHUNK_SIZE === 0 || to === e.size)) whole(first)
      else this.dirtyChunk(node, e, first).fill(0, from - first * CHUNK_SIZE, to - first * CHUNK_SIZE)
      return
    }
    if (from % CHUNK_SIZE === 0) whole(first)
    else this.dirtyChunk(node, e, first).fill(0, from - first * CHUNK_SIZE)
    if (to % CHUNK_SIZE === 0 || to === e.size) whole(last)
    else this.dirtyChunk(node, e, last).fill(0, 0, to - last * CHUNK_SIZE)
    // The chunks in between: only those that hold something need a change (a 10 TiB hole
    // in a sparse file costs what is stored there, not its length).
    const inner = (idx: number) => idx > first && idx < last
    for (const idx of [...e.chunks.keys(), ...node.dirty.keys()]) if (inner(idx)) whole(idx)
    const srcLast = Math.floor((srcEnd - 1) / CHUNK_SIZE)
    for (let idx = first + 1; idx < last && idx <= srcLast; idx++) whole(idx)
  }

  private truncateNode (node: FileNode, size: number, kill: KillSetId | null = null): void {
    if (size > MAX_FILE_SIZE) throw fsError('EFBIG', node.label)
    this.touched()
    const e = this.headFile(node)
    dropPrivileges(e, kill)
    if (size < e.size) {
      // What lies past the new end is dropped, and the chunk holding the new end is cut, so
      // old bytes never reappear when the file grows again.
      const keep = chunkCount(size)
      const within = size % CHUNK_SIZE
      if (within !== 0 && (node.dirty.has(keep - 1) || e.chunks.get(keep - 1))) this.dirtyChunk(node, e, keep - 1).fill(0, within)
      for (const idx of [...e.chunks.keys()]) if (idx >= keep) e.chunks.delete(idx)
      for (const idx of [...node.dirty.keys()]) if (idx >= keep) node.dirty.delete(idx)
      if (e.src !== undefined && (e.srcSize ?? 0) > size) e.srcSize = size
    } else {
      this.hooks.checkSpace(0)
    }
    e.size = size
    this.stamp(e, true)
    if (node.key) this.hooks.onChange(node.key)
  }

  truncate (p: string, size: number, kill: KillSetId | null = null): void {
    const node = this.nodeFor(p)
    this.truncateNode(node, size, kill)
    if (node.opens === 0) {
      this.flushNode(node)
      if (node.key) this.nodes.delete(node.key)
    }
  }

  ftruncate (fh: number, size: number): void {
    const h = this.handle(fh)
    this.truncateNode(this.live(h), size)
  }

  /**
   * fallocate(2): mode 0 grows the file (holes: cpfs stores nothing until data comes);
   * KEEP_SIZE alone changes nothing; PUNCH_HOLE (with KEEP_SIZE) and ZERO_RANGE make the
   * range read as zeros. Other modes (collapse, insert) are EOPNOTSUPP.
   */
  fallocate (fh: number, mode: number, offset: number, length: number): void {
    const KEEP_SIZE = 0x01
    const PUNCH_HOLE = 0x02
    const ZERO_RANGE = 0x10
    const h = this.handle(fh)
    const node = this.live(h)
    if (!h.writable) throw fsError('EBADF', node.label)
    if (mode & ~(KEEP_SIZE | PUNCH_HOLE | ZERO_RANGE)) throw fsError('ENOTSUP', node.label)
    if ((mode & PUNCH_HOLE) && !(mode & KEEP_SIZE)) throw fsError('EINVAL', node.label)
    if (offset < 0 || length <= 0) throw fsError('EINVAL', node.label)
    const end = offset + length
    if (end > MAX_FILE_SIZE) throw fsError('EFBIG', node.label)
    this.touched()
    const e = this.headFile(node)
    if (mode & (PUNCH_HOLE | ZERO_RANGE)) this.zeroRange(node, e, offset, end)
    if (!(mode & KEEP_SIZE) && end > e.size) e.size = end
    this.stamp(e, true)
    if (node.key) this.hooks.onChange(node.key)
  }

  /**
   * lseek(2) SEEK_DATA / SEEK_HOLE at chunk granularity: stored chunks, unflushed ones and
   * origin bytes are data; everything else is a hole, and the end of the file is one too.
   * Returns -1 for "no data from here" (ENXIO).
   */
  lseek (fh: number, offset: number, whence: 'data' | 'hole'): number {
    const node = this.live(this.handle(fh))
    const size = node.entry ? node.entry.size : this.nodeAttr(node).size
    if (offset >= size) return -1
    if (!node.entry) return whence === 'data' ? offset : size // an untouched origin file: all data
    const e = node.entry
    const srcEnd = srcBytes(e)
    const isData = (idx: number) => node.dirty.has(idx) || Boolean(e.chunks.get(idx)) || (idx * CHUNK_SIZE < srcEnd && !e.chunks.has(idx))
    const idx = Math.floor(offset / CHUNK_SIZE)
    if (whence === 'data') {
      if (isData(idx)) return offset
      const cands = [...node.dirty.keys(), ...[...e.chunks].filter(([, r]) => r).map(([i]) => i)].filter(i => i > idx)
      if (srcEnd > 0) for (let i = idx + 1; i * CHUNK_SIZE < srcEnd; i++) if (isData(i)) { cands.push(i); break }
      if (cands.length === 0) return -1
      const at = Math.min(...cands) * CHUNK_SIZE
      return at < size ? at : -1
    }
    let i = idx
    while (i * CHUNK_SIZE < size && isData(i)) i++
    return i === idx ? offset : Math.min(size, i * CHUNK_SIZE)
  }

  /** Hash the dirty chunks of a node into its entry (called by the session). */
  flushNode (node: FileNode): void {
    const e = node.entry
    if (!e || node.dirty.size === 0) return
    const srcEnd = srcBytes(e)
    for (const [idx, d] of node.dirty) {
      const valid = chunkLen(e.size, idx)
      if (valid === 0) continue
      const piece = d.subarray(0, valid)
      // A chunk of zeros is a hole: nothing stored (null where it must hide origin bytes).
      if (isZero(piece)) {
        if (idx * CHUNK_SIZE < srcEnd) e.chunks.set(idx, null)
        else e.chunks.delete(idx)
      } else {
        e.chunks.set(idx, this.chunks.put(piece, true))
      }
    }
    node.dirty.clear()
  }

  release (fh: number): FileNode | null {
    const h = this.handles.get(fh)
    if (!h) return null
    this.handles.delete(fh)
    const node = h.node
    node.opens--
    if (node.opens <= 0) {
      if (node.key && this.nodes.get(node.key) === node) {
        // Keep the node only while it holds unflushed data; the session flushes it.
        if (node.dirty.size === 0) this.nodes.delete(node.key)
      }
      this.hooks.onLastClose?.()
    }
    return node
  }

  /**
   * The chunks (hex) that files still open read from: a file unlinked or replaced by a rename
   * while open keeps its content for its readers, as on any POSIX filesystem.
   */
  openChunks (): Set<string> {
    const out = new Set<string>()
    const done = new Set<FileNode>()
    for (const { node } of this.handles.values()) {
      if (done.has(node) || !node.entry) continue
      done.add(node)
      // Still the entry of its name (or record): its chunks are the head's, counted there.
      // (Only files whose name went hold chunks of their own: usually none or a few.)
      if (node.key !== null && this.head.get(node.key) === node.entry) continue
      for (const h of node.entry.chunks.values()) if (h) out.add(h.toString('hex'))
    }
    return out
  }

  // ---- namespace ------------------------------------------------------------------------

  /** Check that p's parent is a directory; returns its attributes. */
  private parentDir (p: string): Attr {
    const parent = parentOf(p)
    const r = this.view.resolve(parent)
    if (!r) throw fsError('ENOENT', parent)
    if (resolvedType(r) !== 'd') throw fsError('ENOTDIR', parent)
    return this.attrOf(r)
  }

  /** New entries in a setgid directory take its group; new directories keep the bit (as ext4). */
  private inherit (parent: Attr, meta: { mode: number, gid: number }, isDir: boolean): void {
    if ((parent.mode & 0o2000) === 0) return
    meta.gid = parent.gid
    if (isDir) meta.mode |= 0o2000
  }

  /** A directory entry was added to or removed from p's directory: its mtime and ctime move (as ext4). */
  private touchParent (p: string): void {
    const dir = parentOf(p)
    const e = this.headEntry(dir)
    this.stamp(e, true)
    this.hooks.onChange(dir)
  }

  mkdir (p: string, mode: number, caller: Caller = this.self): void {
    if (this.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    this.touched()
    const n = this.needsWhiteout(p) ? undefined : 1
    // A new directory has no old children: opaque, so nothing below it is ever looked up.
    const e: DirEntry = { t: 'd', ...this.newMeta(mode & 0o7777, caller), opaque: 1, fresh: 1 }
    this.inherit(parent, e, true)
    if (n) e.n = 1
    this.dropBelow(p)
    this.setHead(p, e)
    this.touchParent(p)
  }

  /** A FIFO, socket or device node (mknod(2) of anything but a regular file). */
  mknod (p: string, fmt: number, mode: number, rdev: number, caller: Caller = this.self): void {
    if (this.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    this.touched()
    const n = this.needsWhiteout(p) ? undefined : 1
    const e: NodeEntry = { t: 'n', ...this.newMeta(mode & 0o7777, caller), fmt, rdev }
    this.inherit(parent, e, false)
    if (n) e.n = 1
    this.setHead(p, e)
    this.touchParent(p)
  }

  symlink (target: string, p: string, caller: Caller = this.self): void {
    if (Buffer.byteLength(target) > SYMLINK_MAX) throw fsError('ENAMETOOLONG', p, 'the symlink target is longer than 4095 bytes')
    if (this.view.resolve(p)) throw fsError('EEXIST', p)
    const parent = this.parentDir(p)
    this.hooks.checkSpace(0)
    this.touched()
    const n = this.needsWhiteout(p) ? undefined : 1
    const e: LinkEntry = { t: 'l', ...this.newMeta(0o777, caller), target }
    this.inherit(parent, e, false)
    if (n) e.n = 1
    this.setHead(p, e)
    this.touchParent(p)
  }

  unlink (p: string): void {
    const r = this.resolve(p)
    if (resolvedType(r) === 'd') throw fsError('EISDIR', p)
    this.touched()
    this.dropName(p, r)
    this.removePath(p, false)
    this.touchParent(p)
  }

  /**
   * p, one name of what r resolves to, is going away. A linked inode loses a link (its ctime
   * moves, as ext4's does) and goes with its last one; an open file that loses its last name
   * keeps its content for its handles.
   */
  private dropName (p: string, r: Resolved): void {
    if (!isInoKey(r.key)) {
      this.detachNode(p, r)
      return
    }
    const rec = this.headRecord(r)
    rec.links = Math.max(0, (rec.links ?? 1) - 1)
    this.stamp(rec, false)
    this.hooks.onChange(r.key)
    if (rec.links > 0) return
    this.detachNode(r.key, { kind: 'upper', entry: rec, key: r.key })
    const h = this.head.get(r.key)
    if (h && h.n === 1) {
      this.head.delete(r.key)
      this.view.delete(r.key)
      this.hooks.onChange(r.key)
    } else {
      this.setHead(r.key, { t: 'w' })
    }
  }

  /** The open file at key (if any) has no name any more: it keeps its content for its handles. */
  private detachNode (key: string, r: Resolved | null): void {
    const node = this.nodes.get(key)
    if (!node) return
    this.nodes.delete(key)
    if (!node.entry && r && r.kind === 'origin') node.entry = this.fromOrigin(r) as FileEntry
    if (node.entry) {
      node.entry = cloneEntry(node.entry)
      delete node.entry.links
    }
    node.key = null
  }

  rmdir (p: string): void {
    const r = this.resolve(p)
    if (resolvedType(r) !== 'd') throw fsError('ENOTDIR', p)
    if (p === '/') throw fsError('EPERM', p)
    if (this.view.hasEntries(p)) throw fsError('ENOTEMPTY', p)
    this.touched()
    this.removePath(p, true)
    this.touchParent(p)
  }

  /**
   * rename(2) and renameat2(2): `noReplace` fails with EEXIST when dst exists; `exchange`
   * swaps two existing paths atomically (both must exist). Returns false when nothing changed
   * (the same path, or two names of one inode: POSIX leaves both).
   */
  rename (src: string, dst: string, flags: { noReplace?: boolean, exchange?: boolean } = {}): boolean {
    if (flags.exchange) return this.exchange(src, dst)
    const rs = this.resolve(src)
    if (src === dst) return false
    if (isWithin(dst, src)) throw fsError('EINVAL', dst)
    this.parentDir(dst)
    const rd = this.view.resolve(dst)
    if (rd && flags.noReplace) throw fsError('EEXIST', dst)
    const srcIsDir = resolvedType(rs) === 'd'
    if (rd) {
      const dstIsDir = resolvedType(rd) === 'd'
      if (srcIsDir && !dstIsDir) throw fsError('ENOTDIR', dst)
      if (!srcIsDir && dstIsDir) throw fsError('EISDIR', dst)
      if (dstIsDir && this.view.hasEntries(dst)) throw fsError('ENOTEMPTY', dst)
      if (isInoKey(rs.key) && rs.key === rd.key) return false
    }
    this.hooks.checkSpace(0)
    this.touched()
    if (rd) {
      this.dropName(dst, rd)
      this.removePath(dst, srcIsDir)
    }
    if (srcIsDir) this.renameDir(src, dst, rs)
    else this.renameLeaf(src, dst, rs)
    this.touchParent(src)
    if (parentOf(dst) !== parentOf(src)) this.touchParent(dst)
    return true
  }

  /** RENAME_EXCHANGE: three moves through a name no real path can have, in one synchronous op. */
  private exchange (a: string, b: string): boolean {
    this.resolve(a)
    this.resolve(b)
    if (a === b) return false
    if (isWithin(a, b) || isWithin(b, a)) throw fsError('EINVAL', b)
    const tmp = parentOf(a) === '/' ? '/\u0000cpfs-exchange' : parentOf(a) + '/\u0000cpfs-exchange'
    this.rename(a, tmp)
    this.rename(b, a)
    this.rename(tmp, b)
    return true
  }

  private renameLeaf (src: string, dst: string, rs: Resolved): void {
    let moved: LiveEntry | NameEntry
    if (isInoKey(rs.key)) {
      // A name of a linked inode moves; the inode (its record) stays, with a new ctime.
      const rec = this.headRecord(rs)
      this.stamp(rec, false)
      this.hooks.onChange(rs.key)
      moved = { t: 'h', ino: inoOfKey(rs.key) }
    } else if (rs.kind === 'upper') {
      moved = this.head.get(src) === rs.entry ? rs.entry : cloneEntry(rs.entry)
    } else {
      moved = this.fromOrigin(rs)
    }
    this.removePath(src, false)
    if (this.needsWhiteout(dst)) delete moved.n
    else moved.n = 1
    if (moved.t !== 'h') this.stamp(moved, false)
    this.setHead(dst, moved)
    const node = isInoKey(rs.key) ? undefined : this.nodes.get(src)
    if (node) {
      this.nodes.delete(src)
      node.key = dst
      if (moved.t === 'f') node.entry = moved
      this.nodes.set(dst, node)
    }
  }

  private renameDir (src: string, dst: string, rs: Resolved): void {
    // The moved directory keeps its origin children by pointing at them (redirect), so a
    // lower directory of any size moves in O(upper entries below it).
    let originDir: string | null
    let attrs: LiveEntry
    if (rs.kind === 'upper') {
      const e = rs.entry as DirEntry
      attrs = e
      originDir = e.redirect ?? (e.opaque ? null : this.view.originPathFor(src))
    } else {
      attrs = this.fromOrigin(rs)
      originDir = rs.originPath
    }
    if (originDir !== null && this.origin.stat(originDir)?.t !== 'd') originDir = null
    const moved = this.view.subtree(src).map(([q, e]) => [rebase(q, src, dst), e, this.head.get(q) === e] as const)
    this.removePath(src, true)
    const dir: DirEntry = { ...metaOf(attrs), t: 'd', opaque: 1, fresh: 1 }
    if (attrs.x) dir.x = attrs.x
    this.stamp(dir, false)
    if (originDir !== null) dir.redirect = originDir
    if (!this.needsWhiteout(dst)) dir.n = 1
    this.setHead(dst, dir)
    for (const [q, e, own] of moved) {
      const c = own ? e : cloneEntry(e)
      const existed = this.needsWhiteout(q)
      if (c.t === 'w') {
        if (existed) this.setHead(q, { t: 'w' })
        continue
      }
      if (existed) delete c.n
      else c.n = 1
      this.setHead(q, c)
    }
    for (const [p, node] of [...this.nodes]) {
      if (!isInoKey(p) && isWithin(p, src)) {
        this.nodes.delete(p)
        const q = rebase(p, src, dst)
        node.key = q
        const e = this.head.get(q)
        if (e && e.t === 'f') node.entry = e
        this.nodes.set(q, node)
      }
    }
  }

  /**
   * link(2): dst becomes another name of src's inode. The first link turns src's entry into an
   * inode record keyed by the inode number the file already shows (so st_ino stays), and src
   * into a name of it; an open node of src follows (a write through any name reaches it).
   */
  link (src: string, dst: string): void {
    const rs = this.resolve(src)
    if (resolvedType(rs) === 'd') throw fsError('EPERM', src)
    if (this.view.resolve(dst)) throw fsError('EEXIST', dst)
    this.parentDir(dst)
    this.hooks.checkSpace(0)
    this.touched()
    const { key, rec } = this.linked(src, rs)
    rec.links = (rec.links ?? 1) + 1
    this.stamp(rec, false)
    this.hooks.onChange(key)
    const name: NameEntry = { t: 'h', ino: inoOfKey(key) }
    if (!this.needsWhiteout(dst)) name.n = 1
    this.setHead(dst, name)
    this.touchParent(dst)
  }

  /** The head-layer inode record of what src names, made from src's own entry when it has none. */
  private linked (src: string, rs: Resolved): { key: string, rec: LiveEntry } {
    if (isInoKey(rs.key)) return { key: rs.key, rec: this.headRecord(rs) }
    const own = this.head.get(src)
    let rec: LiveEntry
    if (rs.kind === 'upper') {
      rec = own === rs.entry ? rs.entry : cloneEntry(rs.entry)
    } else {
      rec = this.fromOrigin(rs)
      rec.o = rs.originPath
    }
    const key = inoKey(rec.ino)
    delete rec.n
    rec.links = 1
    if (!this.view.entries.has(key)) rec.n = 1
    this.setHead(key, rec)
    const name: NameEntry = { t: 'h', ino: rec.ino }
    if (own && own.n === 1) name.n = 1 // src itself is still new this turn
    this.setHead(src, name)
    const node = this.nodes.get(src)
    if (node) {
      this.nodes.delete(src)
      node.key = key
      if (rec.t === 'f') node.entry = rec
      this.nodes.set(key, node)
    }
    return { key, rec }
  }

  /**
   * chmod, chown, truncate and utimens in one step (a FUSE SETATTR): `p` names the file, or
   * `fh` the open handle it goes through (ftruncate, and files whose name is gone).
   */
  setattr (p: string | null, fh: number | null, s: SetAttr): Attr {
    const h = fh !== null ? this.handles.get(fh) : undefined
    const node = h ? this.live(h) : null
    const kill = s.killSuidGid ?? null
    if (s.size !== undefined) {
      if (node) this.truncateNode(node, s.size, kill)
      else if (p !== null) this.truncate(p, s.size, kill)
    }
    const meta = s.mode !== undefined || s.uid !== undefined || s.gid !== undefined || s.atime || s.mtime || s.ctime ||
      (kill !== null && s.size === undefined)
    if (meta) {
      this.touched()
      let key: string | null
      let e: LiveEntry
      if (node) {
        e = this.headFile(node)
        key = node.key
      } else {
        ({ e, key } = this.headState(p!))
      }
      const t = now()
      // chown drops capabilities and set-ID bits first; an explicit mode in the same call wins.
      if (s.uid !== undefined || s.gid !== undefined || (kill !== null && s.size === undefined)) dropPrivileges(e, kill)
      if (s.mode !== undefined) {
        e.mode = s.mode & 0o7777
        const acl = e.x?.[ACL_ACCESS]
        if (acl) e.x = { ...e.x, [ACL_ACCESS]: aclAfterChmod(acl, e.mode) }
      }
      if (s.uid !== undefined) e.uid = s.uid
      if (s.gid !== undefined) e.gid = s.gid
      if (s.atime) setTime(e, 'a', s.atime === 'now' ? t : s.atime)
      if (s.mtime) setTime(e, 'm', s.mtime === 'now' ? t : s.mtime)
      setTime(e, 'c', s.ctime ?? t)
      if (key) this.hooks.onChange(key)
    }
    if (node) return this.nodeAttr(node)
    return this.getattr(p!)
  }

  /** Attributes of an open file, whether or not it still has a name (nlink 0 when not). */
  nodeAttr (node: FileNode): Attr {
    if (node.stale) throw fsError('ESTALE', node.label)
    const a = this.attrOf(node.entry ? { kind: 'upper', entry: node.entry, key: node.label } : this.resolveNode(node))
    if (node.key === null) a.nlink = 0
    if (node.dirty.size && node.entry) {
      // Unflushed chunks count as stored.
      let extra = 0
      for (const idx of node.dirty.keys()) if (!node.entry.chunks.get(idx)) extra += chunkLen(node.entry.size, idx)
      a.blocks += Math.ceil(extra / 512)
    }
    return a
  }

  // ---- extended attributes ----------------------------------------------------------------
  // Kept with each entry (copied from the origin at copy-up), so they are captured per turn,
  // rewound and applied like modes. The kernel checks the namespaces (user.* only on files and
  // directories, trusted.* for root); POSIX ACLs are system.posix_acl_* values, stored and
  // applied as they are (the mount checks mode bits, not ACLs).

  private xattrsOf (p: string): Record<string, Buffer> | undefined {
    const r = this.resolve(p)
    if (r.kind === 'upper') return r.entry.x
    return 'nlink' in r.stat ? this.origin.xattrs(r.originPath) : r.stat.x
  }

  getxattr (p: string, name: string): Buffer {
    const v = this.xattr(p, name)
    if (!v) throw fsError('ENODATA', p, name)
    return v
  }

  /** The value of attribute `name` of p, or undefined when p has no such attribute. */
  xattr (p: string, name: string): Buffer | undefined {
    return this.xattrsOf(p)?.[name]
  }

  listxattr (p: string): string[] {
    return Object.keys(this.xattrsOf(p) ?? {})
  }

  setxattr (p: string, name: string, value: Buffer, flags: { create?: boolean, replace?: boolean } = {}): void {
    if (Buffer.byteLength(name) > XATTR_NAME_MAX || name.length === 0) throw fsError('ERANGE', p, 'attribute name too long')
    if (value.length > XATTR_SIZE_MAX) throw fsError('E2BIG', p, 'attribute value too large')
    const had = this.xattrsOf(p)?.[name] !== undefined
    if (flags.create && had) throw fsError('EEXIST', p, name)
    if (flags.replace && !had) throw fsError('ENODATA', p, name)
    const total = Object.entries(this.xattrsOf(p) ?? {}).reduce((n, [k, v]) => k === name ? n : n + k.length + 1 + v.length, 0)
    if (total + name.length + 1 + value.length > XATTR_LIST_MAX) throw fsError('ENOSPC', p, 'no room for more attributes')
    let keep = true
    let mode: number | undefined
    if (name === ACL_ACCESS) {
      const m = modeFromAcl(this.getattr(p).mode, value)
      if (!m) throw fsError('EINVAL', p, 'not a valid access ACL')
      mode = m.mode
      keep = m.keep
    }
    this.hooks.checkSpace(value.length)
    this.touched()
    const { e, key } = this.headState(p)
    const x = { ...e.x, [name]: Buffer.from(value) }
    // An ACL that says no more than the mode bits is stored as the mode (as ext4 does).
    if (!keep) delete x[name]
    if (Object.keys(x).length) e.x = x
    else delete e.x
    if (mode !== undefined) e.mode = mode & 0o7777
    this.stamp(e, false)
    this.hooks.onChange(key)
  }

  removexattr (p: string, name: string): void {
    if (this.xattrsOf(p)?.[name] === undefined) throw fsError('ENODATA', p, name)
    this.touched()
    const { e, key } = this.headState(p)
    const x = { ...e.x }
    delete x[name]
    if (Object.keys(x).length) e.x = x
    else delete e.x
    this.stamp(e, false)
    this.hooks.onChange(key)
  }

  /**
   * Make path p (and everything below it) what it is in another view of the same origin —
   * `cpfs restore`. Entries are copied, never file data: restored files point at the same
   * chunks and origin ranges, and a restored directory redirects to its origin children.
   * Missing parent directories are recreated from the source view. A restored name of a linked
   * file becomes a file of its own (with a new inode number): its other names keep their state.
   */
  restore (p: string, src: View): void {
    const r = src.resolve(p)
    this.touched()
    if (r && p !== '/') {
      const parents = []
      for (let a = parentOf(p); a !== '/'; a = parentOf(a)) parents.unshift(a)
      for (const a of parents) {
        const live = this.view.resolve(a)
        if (live && resolvedType(live) === 'd') continue
        const ra = src.resolve(a)
        if (!ra || resolvedType(ra) !== 'd') throw fsError('ENOTDIR', a, 'the parent is not a directory in the turn restored from')
        if (live) this.removePath(a, false)
        const d: DirEntry = { t: 'd', ...this.newMeta(this.attrOf(ra).mode & 0o7777, this.self), opaque: 1, fresh: 1 }
        if (!this.needsWhiteout(a)) d.n = 1
        this.setHead(a, d)
      }
    }
    const cur = this.view.resolve(p)
    if (cur) {
      // Every name that goes counts: linked inodes lose those links.
      if (resolvedType(cur) !== 'd') this.dropName(p, cur)
      else {
        for (const names of [...this.view.names.values()]) {
          for (const q of [...names]) {
            const rq = isWithin(q, p) ? this.view.resolve(q) : null
            if (rq) this.dropName(q, rq)
          }
        }
        for (const [q] of [...this.nodes]) if (!isInoKey(q) && isWithin(q, p)) this.detachNode(q, this.view.resolve(q))
      }
      if (p === '/') this.dropBelow(p)
      else this.removePath(p, resolvedType(cur) === 'd')
    }
    if (!r) return
    const n = (q: string) => this.needsWhiteout(q) ? undefined : 1 as const
    if (resolvedType(r) !== 'd') {
      const e = this.ownCopy(r)
      this.stamp(e, false)
      const nn = n(p)
      if (nn) e.n = nn
      else delete e.n
      this.setHead(p, e)
      return
    }
    const dir: DirEntry = { ...metaOf(this.attrOf(r)), t: 'd', opaque: 1, fresh: 1 }
    const x = r.kind === 'upper' ? r.entry.x : 'nlink' in r.stat ? this.origin.xattrs(r.originPath) : r.stat.x
    if (x) dir.x = x
    this.stamp(dir, false)
    const originDir = src.dirOriginPath(p)
    if (originDir !== null && this.origin.stat(originDir)?.t === 'd') dir.redirect = originDir
    const nn = n(p)
    if (nn) dir.n = nn
    this.setHead(p, dir)
    for (const [q, e] of src.subtree(p)) {
      const needed = this.needsWhiteout(q)
      if (e.t === 'w') {
        if (needed) this.setHead(q, { t: 'w' })
        continue
      }
      let c: LiveEntry
      if (e.t === 'h') {
        const rq = src.resolve(q)
        if (!rq) continue
        c = this.ownCopy(rq)
      } else {
        c = cloneEntry(e)
      }
      if (needed) delete c.n
      else c.n = 1
      this.setHead(q, c)
    }
  }

  /** A copy of r's state as an entry of its own (a linked file's gets a new inode number). */
  private ownCopy (r: Resolved): LiveEntry {
    const e = r.kind === 'upper' ? cloneEntry(r.entry) : this.fromOrigin(r)
    if (isInoKey(r.key)) {
      delete e.links
      delete e.o
      e.ino = this.hooks.allocIno()
    }
    return e
  }

  /** Every open node with unflushed data or an upper entry (for turn and fsync). */
  openNodes (): FileNode[] {
    return [...this.nodes.values()]
  }
}
