// Open files: the file handles the kernel holds, and the node each one reaches. A node is
// made on the first open of a file and kept while a handle is open or it holds unflushed data.
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import type { FileEntry } from '../store/entries.js'
import { FileNode } from './file-node.js'
import type { HeadLayer } from './head-layer.js'
import type { OverlayHooks } from './hooks.js'
import { resolvedType } from './view.js'

export interface Handle {
  node: FileNode
  writable: boolean
}

export class OpenFiles {
  private readonly handles = new Map<number, Handle>()
  private nextFh = 1

  constructor (private readonly layer: HeadLayer, private readonly hooks: OverlayHooks) {}

  /** The node of the file p names, made on its first open. */
  nodeFor (p: string): FileNode {
    const byPath = this.layer.nodes.get(p)
    if (byPath) return byPath
    const r = this.layer.resolve(p)
    let node = this.layer.nodes.get(r.key)
    if (node) return node
    const t = resolvedType(r)
    if (t === 'd') throw fsError('EISDIR', p)
    if (t !== 'f') throw fsError('EINVAL', p)
    node = r.kind === 'upper'
      ? new FileNode(r.key, r.entry as FileEntry, null)
      : new FileNode(r.key, null, r.lowerPath)
    if (r.kind === 'lower' && !('nlink' in r.stat)) node.entry = this.layer.fromLower(r) as FileEntry
    this.layer.nodes.set(r.key, node)
    return node
  }

  /** A new handle on the file p names, writable when flags ask for writing. */
  open (p: string, flags: number): number {
    const node = this.nodeFor(p)
    const acc = flags & 3 // O_ACCMODE
    const writable = acc === fs.constants.O_WRONLY || acc === fs.constants.O_RDWR
    return this.addHandle(node, writable)
  }

  /** A new handle on node. */
  addHandle (node: FileNode, writable: boolean): number {
    node.opens++
    const fh = this.nextFh++
    if (this.nextFh > 0x7fffffff) this.nextFh = 1
    this.handles.set(fh, { node, writable })
    return fh
  }

  /** The handle fh, or EBADF. */
  handle (fh: number): Handle {
    const h = this.handles.get(fh)
    if (!h) throw fsError('EBADF', String(fh))
    return h
  }

  /** The handle fh, if open. */
  find (fh: number): Handle | undefined {
    return this.handles.get(fh)
  }

  /** The node behind a handle, or ESTALE when a rewind or redo replaced the file it opened. */
  live (h: Handle): FileNode {
    if (h.node.stale) throw fsError('ESTALE', h.node.label)
    return h.node
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
    const byPath = this.layer.nodes.get(p)
    if (byPath) return byPath
    const r = this.layer.view.resolve(p)
    return r ? this.layer.nodes.get(r.key) ?? null : null
  }

  /** Close handle fh; returns its node, or null when fh was not open. */
  release (fh: number): FileNode | null {
    const h = this.handles.get(fh)
    if (!h) return null
    this.handles.delete(fh)
    const node = h.node
    node.opens--
    if (node.opens <= 0) {
      if (node.key && this.layer.nodes.get(node.key) === node) {
        // Keep the node only while it holds unflushed data; the session flushes it.
        if (node.dirty.size === 0) this.layer.nodes.delete(node.key)
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
      if (node.key !== null && this.layer.head.get(node.key) === node.entry) continue
      for (const h of node.entry.chunks.values()) if (h) out.add(h.toString('hex'))
    }
    return out
  }

  /** Every open node with unflushed data or an upper entry (for turn and fsync). */
  openNodes (): FileNode[] {
    return [...this.layer.nodes.values()]
  }

  /** The stack was swapped: every open file and handle is stale, and no node is kept. */
  markStale (): void {
    for (const node of this.layer.nodes.values()) node.stale = true
    for (const h of this.handles.values()) h.node.stale = true
    this.layer.nodes.clear()
  }
}
