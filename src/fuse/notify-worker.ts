// Runs on its own thread: writes FUSE_NOTIFY_INVAL_ENTRY messages to the session's /dev/fuse
// descriptor. It must not run on the JavaScript thread that answers FUSE requests: the
// kernel takes the parent directory's lock for the invalidation, and a lookup holding that
// lock may be waiting for the JavaScript thread to answer it.
import { writeSync } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'

const FUSE_NOTIFY_INVAL_INODE = 2
const FUSE_NOTIFY_INVAL_ENTRY = 3
const ROOT_ID = 1n
const fd: number = workerData.fd

parentPort!.on('message', (msg: { id: number, names: string[] }) => {
  let done = 0
  for (const name of msg.names) {
    const nameBuf = Buffer.from(name)
    const len = 16 + 16 + nameBuf.length + 1
    const buf = Buffer.alloc(len)
    buf.writeUInt32LE(len, 0) // fuse_out_header.len
    buf.writeInt32LE(FUSE_NOTIFY_INVAL_ENTRY, 4) // .error carries the notify code
    buf.writeBigUInt64LE(0n, 8) // .unique = 0: a notification
    buf.writeBigUInt64LE(ROOT_ID, 16) // fuse_notify_inval_entry_out.parent
    buf.writeUInt32LE(nameBuf.length, 24) // .namelen
    buf.writeUInt32LE(0, 28) // .flags
    nameBuf.copy(buf, 32)
    try {
      writeSync(fd, buf)
      done++
    } catch {
      // ENOENT: the kernel had nothing cached under that name. Nothing to do.
    }
  }
  // The root directory's own attributes (mode, times) may have changed too: node id 1,
  // offset -1 = attributes only, no page ranges.
  const inode = Buffer.alloc(16 + 24)
  inode.writeUInt32LE(inode.length, 0)
  inode.writeInt32LE(FUSE_NOTIFY_INVAL_INODE, 4)
  inode.writeBigUInt64LE(0n, 8)
  inode.writeBigUInt64LE(ROOT_ID, 16)
  inode.writeBigInt64LE(-1n, 24)
  inode.writeBigInt64LE(0n, 32)
  try {
    writeSync(fd, inode)
  } catch {}
  parentPort!.postMessage({ id: msg.id, done })
})
