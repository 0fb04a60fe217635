// Runs on a thread of its own inside the daemon: touches and removes paths through the mount so
// that the kernel tells inotify watchers about them (see watchers.ts). Its requests carry this thread's
// id as the FUSE header's pid, which is how the daemon recognises them and records nothing.
// It must not run on the JavaScript thread that answers FUSE requests: every call below waits
// for that thread.
import * as fs from 'node:fs'
import { parentPort } from 'node:worker_threads'

// "PID/task/TID": the kernel puts the calling thread's id into each request it sends.
const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop())
parentPort!.postMessage({ tid })

function touch (p: string): boolean {
  let st: fs.Stats
  try {
    st = fs.lstatSync(p)
  } catch {
    return false // gone again meanwhile: nothing to tell
  }
  try {
    if (st.isFile()) {
      // open for writing, truncate to the same size, close: IN_OPEN, IN_MODIFY, IN_CLOSE_WRITE,
      // what an editor's save looks like to a watcher. The daemon answers the truncate with the
      // file's attributes as they are.
      const fd = fs.openSync(p, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW)
      try {
        fs.ftruncateSync(fd, st.size)
      } finally {
        fs.closeSync(fd)
      }
    } else if (st.isSymbolicLink()) {
      fs.lutimesSync(p, st.atime, st.mtime) // IN_ATTRIB
    } else {
      fs.utimesSync(p, st.atime, st.mtime) // IN_ATTRIB (directories, FIFOs, devices: opening them could block)
    }
    return true
  } catch {
    try {
      fs.lutimesSync(p, st.atime, st.mtime) // no write permission: IN_ATTRIB at least
      return true
    } catch {
      return false
    }
  }
}

/** unlink or rmdir a name the kernel still caches but the new view no longer has. */
function remove (p: string): boolean {
  try {
    fs.unlinkSync(p)
    return true
  } catch (err: any) {
    if (err?.code !== 'EISDIR' && err?.code !== 'EPERM') return false
  }
  try {
    fs.rmdirSync(p)
    return true
  } catch {
    return false
  }
}

parentPort!.on('message', (msg: { id: number, op: 'touch' | 'remove', paths: string[] }) => {
  let done = 0
  for (const p of msg.paths) if (msg.op === 'remove' ? remove(p) : touch(p)) done++
  parentPort!.postMessage({ id: msg.id, done })
})
