// Files the kernel opened without asking. With caching on, cpfs answers the first OPEN with
// ENOSYS (FUSE_NO_OPEN_SUPPORT): the kernel then sends neither OPEN nor RELEASE for the rest
// of the mount, keeps the page cache across opens, and sends READ, WRITE, FLUSH, FALLOCATE,
// LSEEK and fstat's GETATTR with file handle 0 and the node id. A warm `grep -r` then costs
// one request per file (the FLUSH of its close) instead of two.
//
// What cpfs gives up is per-open state, and it keeps none worth having: each request with
// handle 0 is served by the file its node names now, through a handle opened for that one
// request. The kernel enforces access modes itself (a write through a read-only descriptor
// never reaches cpfs). Two things need more:
//  - A file that loses its last name while the kernel still knows its node (unlink, or a
//    rename over it) may still be open: it is pinned (a handle kept) until the kernel
//    forgets the node, which happens once no descriptor holds it, as on any POSIX filesystem.
//  - close(2) of a file written through the mount must return only once its data is in the
//    store's log: FLUSH waits for it when that node was written since its last FLUSH (or a
//    FLUSH of it is still waiting); other closes are answered at once.
// CREATE answers handle 0 too once the kernel opens files itself: it then sends no RELEASE
// for created files either (measured: 10,992 creates, 17 releases). A handle CREATE gave out
// before that is released at RELEASE, or when the kernel forgets its node, whichever comes
// first (a node is forgotten only once no open file holds its inode).
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import type { Filesystem } from './contract.js'
import { nameCount, type Nodes } from './nodes.js'

export class OpenByNode {
  /** Handles kept for nodes whose file lost its last name while the kernel knew it. */
  private readonly pins = new Map<number, number>()
  /** Nodes written since their last FLUSH. */
  private readonly written = new Set<number>()
  /** The flush a node's close waits for, while it runs. */
  private readonly flushing = new Map<number, Promise<void>>()
  /** Handles CREATE gave out before the kernel stopped sending OPEN, by node id. */
  private readonly created = new Map<number, Set<number>>()
  private readonly createdNode = new Map<number, number>()
  /** The kernel agreed to open files without asking (the first OPEN was answered ENOSYS). */
  active = false
  /** Closes a created handle the kernel will not release (set by the FUSE file handlers). */
  onOrphan: (fh: number) => void = (fh) => this.ov.release(fh)

  constructor (private readonly ov: Filesystem, private readonly nodes: Nodes) {}

  /** Run fn with a handle on the file node id names (a pinned one, or one just for this call). */
  with<T> (nodeid: number, fn: (fh: number) => T): T {
    const pinned = this.pins.get(nodeid)
    if (pinned !== undefined) return fn(pinned)
    const path = this.nodes.path(nodeid)
    let fh: number
    try {
      fh = this.ov.open(path, fs.constants.O_RDWR)
    } catch (err: any) {
      // The kernel holds a file its node no longer leads to (a rewind removed it): stale.
      if (err?.code === 'ENOENT') throw fsError('ESTALE', path)
      throw err
    }
    try {
      return fn(fh)
    } finally {
      this.ov.release(fh)
    }
  }

  /** The pinned handle of node id (a file without a name), if any. */
  pinned (nodeid: number): number | undefined {
    return this.pins.get(nodeid)
  }

  /**
   * path is about to lose what it names (unlink, rename over it): if that is a regular file
   * the kernel knows, keep a handle on it so descriptors still open on it go on working.
   */
  beforeRemoval (path: string): number | null {
    if (!this.active) return null
    const n = this.nodes.at(path)
    if (!n || this.pins.has(n.id) || nameCount(n) > 1) return null
    let fh: number
    try {
      fh = this.ov.open(path, fs.constants.O_RDWR)
    } catch {
      return null // not a regular file: nothing to keep
    }
    this.pins.set(n.id, fh)
    return n.id
  }

  /**
   * The removal beforeRemoval pinned node id for did not happen (it failed, or a rename found
   * nothing to move): the file keeps its name, and is served by it again.
   */
  unpin (nodeid: number | null): void {
    if (nodeid === null) return
    const fh = this.pins.get(nodeid)
    if (fh === undefined) return
    this.pins.delete(nodeid)
    this.ov.release(fh)
  }

  noteWritten (nodeid: number): void {
    this.written.add(nodeid)
  }

  /**
   * What a close of node id waits for: the flush of its data when it was written since the
   * last close, or the flush a close of it already started; null when nothing.
   */
  flush (nodeid: number, flushAll: () => Promise<void> | null): Promise<void> | null {
    if (!this.written.delete(nodeid)) return this.flushing.get(nodeid) ?? null
    const p = flushAll()
    if (p) {
      this.flushing.set(nodeid, p)
      const done = (): void => { if (this.flushing.get(nodeid) === p) this.flushing.delete(nodeid) }
      p.then(done, done)
    }
    return p
  }

  /** CREATE gave the kernel handle fh on node id. */
  handedOut (nodeid: number, fh: number): void {
    let set = this.created.get(nodeid)
    if (!set) this.created.set(nodeid, set = new Set())
    set.add(fh)
    this.createdNode.set(fh, nodeid)
  }

  /** The kernel released handle fh (RELEASE). */
  released (fh: number): void {
    const nodeid = this.createdNode.get(fh)
    if (nodeid === undefined) return
    this.createdNode.delete(fh)
    const set = this.created.get(nodeid)
    set?.delete(fh)
    if (set?.size === 0) this.created.delete(nodeid)
  }

  /** The kernel forgot node id: nothing can reach its file through it any more. */
  forgotten (nodeid: number): void {
    this.written.delete(nodeid)
    const orphans = this.created.get(nodeid)
    if (orphans) {
      this.created.delete(nodeid)
      for (const fh of orphans) {
        this.createdNode.delete(fh)
        this.onOrphan(fh)
      }
    }
    this.unpin(nodeid)
  }
}
