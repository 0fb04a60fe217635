// Runs on its own thread: writes notification messages (cache invalidations) to the session's
// /dev/fuse descriptor. It must not run on the JavaScript thread that answers FUSE requests:
// the kernel takes inode and directory locks for an invalidation, and a request holding such a
// lock may be waiting for the main thread to answer it.
import { writeSync } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'

const fd: number = workerData.fd

parentPort!.on('message', (msg: { id: number, bufs: Uint8Array[] }) => {
  let done = 0
  for (const b of msg.bufs) {
    try {
      writeSync(fd, b)
      done++
    } catch {
      // ENOENT: the kernel had nothing cached under that name or node. Nothing to do.
    }
  }
  parentPort!.postMessage({ id: msg.id, done })
})
