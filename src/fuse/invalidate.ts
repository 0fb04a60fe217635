// Kernel cache invalidation for a live rewind. fuse-native's libfuse 2 high-level API has no
// call for it, so cpfs speaks the kernel protocol itself: FUSE_NOTIFY_INVAL_ENTRY for every
// name in the mount's root directory, written to the daemon's /dev/fuse descriptor. The
// kernel drops each such dentry and everything cached below it (d_invalidate), so the next
// path walk looks everything up again. The root's node id is always 1; no other node id is
// known outside libfuse, which is why invalidation starts at the root.
import * as fs from 'node:fs'
import { Worker } from 'node:worker_threads'

export class Invalidator {
  private readonly worker: Worker
  private next = 0
  private readonly waiting = new Map<number, () => void>()

  private constructor (fd: number) {
    this.worker = new Worker(new URL('./notify-worker.js', import.meta.url), { workerData: { fd } })
    this.worker.unref()
    this.worker.on('message', (m: { id: number }) => {
      this.waiting.get(m.id)?.()
      this.waiting.delete(m.id)
    })
  }

  /** The invalidator for this process's FUSE session, or null if none is found. */
  static find (): Invalidator | null {
    let fd: number | null = null
    for (const name of fs.readdirSync('/proc/self/fd')) {
      try {
        if (fs.readlinkSync(`/proc/self/fd/${name}`) === '/dev/fuse') fd = Number(name)
      } catch {}
    }
    return fd === null ? null : new Invalidator(fd)
  }

  /** Invalidate the cached entries of these root-level names (and all below them). */
  rootNames (names: Iterable<string>): Promise<void> {
    const list = [...new Set(names)]
    if (list.length === 0) return Promise.resolve()
    const id = this.next++
    return new Promise(resolve => {
      this.waiting.set(id, resolve)
      this.worker.postMessage({ id, names: list })
    })
  }

  async close (): Promise<void> {
    await this.worker.terminate()
  }
}
