// The live overlay: the head layer over the merged view of older layers and the lower.
// Every mutation goes through here, synchronously (the FUSE edge runs one op at a time on
// the JavaScript thread, so no op sees another half-done). Overlay is the one door; the work
// is done by its parts, each keeping its own rules (see each file's top):
//  - head-layer.ts   the only place an entry is written: copy-up of metadata, whiteouts,
//                    the report of every change
//  - lookups.ts      what a path or an open file shows (stat, readdir, readlink)
//  - open-files.ts   file handles and the nodes of open files
//  - file-data.ts    read, write, truncate, holes; copy-up of content, in O(1)
//  - namespace.ts    create, mkdir, mknod, symlink, unlink, rmdir, link (hard links)
//  - rename.ts       rename and renameat2
//  - metadata.ts     SETATTR and extended attributes (the access ACL is the mode seen twice)
//  - restore.ts      `cpfs restore` of paths from another view
// Persistence is not done here: every head-layer change is reported to `onChange`, and the
// session batches those changes into LevelDB.
import type * as fs from 'node:fs'
import type { ChunkStore } from '../store/chunks.js'
import type { Entry } from '../store/entries.js'
import { attrOf, type Attr, type Caller, type KillSetId, type SetAttr } from './attr.js'
import { FileData } from './file-data.js'
import type { FileNode } from './file-node.js'
import { HeadLayer } from './head-layer.js'
import type { OverlayHooks } from './hooks.js'
import { Lookups } from './lookups.js'
import { Metadata } from './metadata.js'
import { Namespace } from './namespace.js'
import { OpenFiles } from './open-files.js'
import type { Lower } from '../real/lower.js'
import { Renamer } from './rename.js'
import { Restorer } from './restore.js'
import type { Resolved, View } from './view.js'

export type { Attr, Caller, KillSetId, SetAttr, TimeSet } from './attr.js'
export { FileNode } from './file-node.js'
export type { OverlayHooks } from './hooks.js'

export class Overlay {
  readonly lower: Lower
  readonly chunks: ChunkStore
  /** The daemon's own user: the owner when no caller is known (the control socket, tests). */
  readonly self: Caller = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }
  private readonly layer: HeadLayer
  private readonly files: OpenFiles
  private readonly lookups: Lookups
  private readonly data: FileData
  private readonly metadata: Metadata
  private readonly namespace: Namespace
  private readonly renamer: Renamer
  private readonly restorer: Restorer

  constructor (view: View, head: Map<string, Entry>, lower: Lower, chunks: ChunkStore, hooks: OverlayHooks) {
    this.lower = lower
    this.chunks = chunks
    this.layer = new HeadLayer(view, head, lower, hooks)
    this.files = new OpenFiles(this.layer, hooks)
    this.lookups = new Lookups(this.layer, this.files, lower)
    this.data = new FileData(this.layer, this.files, this.lookups, lower, chunks, hooks)
    this.metadata = new Metadata(this.layer, this.files, this.data, this.lookups, lower, hooks)
    this.namespace = new Namespace(this.layer, hooks)
    this.renamer = new Renamer(this.layer, this.namespace, lower, hooks)
    this.restorer = new Restorer(this.layer, this.namespace, lower, hooks, this.self)
  }

  /** The merged view of every layer, the head included. */
  get view (): View { return this.layer.view }
  set view (view: View) { this.layer.view = view }

  /** The head layer's entries (the session swaps in another layer's map when it seals a turn). */
  get head (): Map<string, Entry> { return this.layer.head }
  set head (head: Map<string, Entry>) { this.layer.head = head }

  /** Swap in a new stack (after a turn, rewind or redo). Open handles become stale. */
  reset (view: View, head: Map<string, Entry>, keepHandles: boolean): void {
    this.layer.view = view
    this.layer.head = head
    if (!keepHandles) this.files.markStale()
  }

  // ---- lookups (lookups.ts, open-files.ts) ----------------------------------------------

  getattr (p: string): Attr { return this.lookups.getattr(p) }
  /** Attributes of a resolved path (a directory's nlink only by getattr, which knows its path). */
  attrOf (r: Resolved): Attr { return attrOf(r) }
  /** Attributes through an open handle (fstat), or by path when the handle is unknown. */
  fgetattr (fh: number, p: string | null): Attr { return this.lookups.fgetattr(fh, p) }
  /** Attributes of an open file, whether or not it still has a name (nlink 0 when not). */
  nodeAttr (node: FileNode): Attr { return this.lookups.nodeAttr(node) }
  readdir (p: string): string[] { return this.lookups.readdir(p) }
  readlink (p: string): string { return this.lookups.readlink(p) }
  access (p: string): void { this.lookups.access(p) }
  statfs (): fs.StatsFs { return this.lookups.statfs() }
  /** Some open handle of node (for changes to a file that lost its name), or null. */
  handleOf (node: FileNode): number | null { return this.files.handleOf(node) }
  /** The open file behind a handle (the FUSE layer keeps it when the file loses its name). */
  fileOf (fh: number): FileNode | null { return this.files.fileOf(fh) }
  /** The open file that path p names, if any. */
  fileAt (p: string): FileNode | null { return this.files.fileAt(p) }
  /** Every open node with unflushed data or an upper entry (for turn and fsync). */
  openNodes (): FileNode[] { return this.files.openNodes() }

  // ---- files (open-files.ts, file-data.ts) ----------------------------------------------

  open (p: string, flags: number): number { return this.files.open(p, flags) }
  /** A new empty file at p, opened for writing. */
  create (p: string, mode: number, caller: Caller = this.self): number {
    return this.files.addHandle(this.namespace.create(p, mode, caller), true)
  }

  read (fh: number, buf: Buffer, len: number, pos: number): number { return this.data.read(fh, buf, len, pos) }
  /** Writes all of buf; true when that cleared set-ID bits (so cached attributes are stale). */
  write (fh: number, buf: Buffer, len: number, pos: number, kill: KillSetId | null = null): boolean {
    return this.data.write(fh, buf, len, pos, kill)
  }

  truncate (p: string, size: number, kill: KillSetId | null = null): void { this.data.truncate(p, size, kill) }
  ftruncate (fh: number, size: number): void { this.data.ftruncate(fh, size) }
  fallocate (fh: number, mode: number, offset: number, length: number): void { this.data.fallocate(fh, mode, offset, length) }
  /** SEEK_DATA / SEEK_HOLE; -1 for "no data from here" (ENXIO). */
  lseek (fh: number, offset: number, whence: 'data' | 'hole'): number { return this.data.lseek(fh, offset, whence) }

  // ---- what the persister reads (session/persister.ts) ------------------------------------

  /**
   * The head entry at key (a path, or an inode record's #ino) with the data its open file
   * holds hashed in: what a batch records. A node whose file is closed is let go here, once its
   * data is in the entry.
   */
  settled (key: string): Entry | undefined {
    const node = this.layer.nodes.get(key)
    if (node) {
      this.data.flushNode(node)
      if (node.opens <= 0) this.layer.nodes.delete(key)
    }
    return this.layer.head.get(key)
  }

  /**
   * Hash an open file's written data into its entry, keeping its node (a batch that leaves
   * the entry itself for later: Persister.persistData); the hashes put go into `stored`.
   * Returns true when that replaced chunks the entry held (see FileData.flushNode).
   */
  hashIn (key: string, stored: Buffer[]): boolean {
    const node = this.layer.nodes.get(key)
    return node ? this.data.flushNode(node, stored) : false
  }

  /** Keys of open files with written data not hashed into their entries yet. */
  * unsettled (): Iterable<string> {
    for (const [key, node] of this.layer.nodes) if (node.dirty.size > 0) yield key
  }
  release (fh: number): FileNode | null { return this.files.release(fh) }
  /** The chunks (hex) that files still open read from (kept while they are open). */
  openChunks (): Set<string> { return this.files.openChunks() }

  // ---- namespace (namespace.ts, rename.ts) ----------------------------------------------

  mkdir (p: string, mode: number, caller: Caller = this.self): void { this.namespace.mkdir(p, mode, caller) }
  /** A FIFO, socket or device node (mknod(2) of anything but a regular file). */
  mknod (p: string, fmt: number, mode: number, rdev: number, caller: Caller = this.self): void {
    this.namespace.mknod(p, fmt, mode, rdev, caller)
  }

  symlink (target: string, p: string, caller: Caller = this.self): void { this.namespace.symlink(target, p, caller) }
  unlink (p: string): void { this.namespace.unlink(p) }
  rmdir (p: string): void { this.namespace.rmdir(p) }
  /** link(2): dst becomes another name of src's inode. */
  link (src: string, dst: string): void { this.namespace.link(src, dst) }
  /** rename(2) and renameat2(2); false when nothing changed. */
  rename (src: string, dst: string, flags: { noReplace?: boolean, exchange?: boolean } = {}): boolean {
    return this.renamer.rename(src, dst, flags)
  }

  // ---- metadata (metadata.ts) -----------------------------------------------------------

  /** chmod, chown, truncate and utimens in one step (a FUSE SETATTR), by path or by handle. */
  setattr (p: string | null, fh: number | null, s: SetAttr): Attr { return this.metadata.setattr(p, fh, s) }
  getxattr (p: string, name: string): Buffer { return this.metadata.getxattr(p, name) }
  /** The value of attribute `name` of p, or undefined when p has no such attribute. */
  xattr (p: string, name: string): Buffer | undefined { return this.metadata.xattr(p, name) }
  listxattr (p: string): string[] { return this.metadata.listxattr(p) }
  setxattr (p: string, name: string, value: Buffer, flags: { create?: boolean, replace?: boolean } = {}): void {
    this.metadata.setxattr(p, name, value, flags)
  }

  removexattr (p: string, name: string): void { this.metadata.removexattr(p, name) }

  // ---- restore (restore.ts) -------------------------------------------------------------

  /** Make path p (and everything below it) what it is in another view (`cpfs restore`). */
  restore (p: string, src: View): void { this.restorer.restore(p, src) }
}
