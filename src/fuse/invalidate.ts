// Kernel cache invalidation, for the changes the daemon makes on its own (rewind, redo, undo,
// restore): the kernel caches entries, attributes, directory listings and file pages for as
// long as cpfs allows, which is safe only because every such change is followed by exact
// invalidation. The messages are FUSE notifications written to /dev/fuse from a worker thread
// (see notify-worker.ts for why).
import { Worker } from 'node:worker_threads'
import { Notify, OUT_HEADER } from './kernel.js'
import { writeU64 } from './wire.js'

function header (len: number, code: Notify): Buffer {
  const b = Buffer.alloc(len)
  b.writeUInt32LE(len, 0)
  b.writeInt32LE(code, 4) // a notification carries its code in the error field, unique 0
  return b
}

export class Notifier {
  private readonly worker: Worker
  private next = 0
  private readonly waiting = new Map<number, () => void>()
  private queued: Buffer[] = []

  constructor (fd: number) {
    this.worker = new Worker(new URL('./notify-worker.js', import.meta.url), { workerData: { fd } })
    this.worker.unref()
    this.worker.on('message', (m: { id: number }) => {
      this.waiting.get(m.id)?.()
      this.waiting.delete(m.id)
    })
  }

  /** Every cached dentry (positive and negative) must be looked up again (protocol 7.44). */
  incEpoch (): void {
    this.queued.push(header(OUT_HEADER, Notify.INC_EPOCH))
  }

  /** Drop the cached attributes of a node, and its cached pages (or directory listing) too unless attrsOnly. */
  invalInode (nodeid: number, attrsOnly: boolean): void {
    const b = header(OUT_HEADER + 24, Notify.INVAL_INODE)
    writeU64(b, 16, nodeid)
    b.writeBigInt64LE(attrsOnly ? -1n : 0n, 24)
    b.writeBigInt64LE(0n, 32)
    this.queued.push(b)
  }

  /** Drop the cached entry `name` in directory node `parent` (and everything below it). */
  invalEntry (parent: number, name: string): void {
    const nb = Buffer.from(name)
    const b = header(OUT_HEADER + 16 + nb.length + 1, Notify.INVAL_ENTRY)
    writeU64(b, 16, parent)
    b.writeUInt32LE(nb.length, 24)
    b.writeUInt32LE(0, 28)
    nb.copy(b, 32)
    this.queued.push(b)
  }

  /**
   * `name` in directory `parent`, the kernel's node `child`, no longer exists: the kernel drops
   * the entry as for INVAL_ENTRY and deletes the dentry, so inotify watchers hear of it. Fails
   * (harmlessly) when the kernel has no such dentry or, for a directory, still caches children.
   */
  deleteEntry (parent: number, child: number, name: string): void {
    const nb = Buffer.from(name)
    const b = header(OUT_HEADER + 24 + nb.length + 1, Notify.DELETE)
    writeU64(b, 16, parent)
    writeU64(b, 24, child)
    b.writeUInt32LE(nb.length, 32)
    b.writeUInt32LE(0, 36)
    nb.copy(b, 40)
    this.queued.push(b)
  }

  /** Write what is queued; resolves once the kernel has taken it all. */
  flush (): Promise<void> {
    const bufs = this.queued
    this.queued = []
    if (bufs.length === 0) return Promise.resolve()
    const id = this.next++
    return new Promise(resolve => {
      this.waiting.set(id, resolve)
      this.worker.postMessage({ id, bufs })
    })
  }

  async close (): Promise<void> {
    await this.worker.terminate()
  }
}
