// FUSE operations as pure translation: decode fuse-native's arguments, call the overlay or
// the session, and answer through the callback, mapping errors to errno in one place.
// fuse-native calls every op on the JavaScript thread; the overlay is synchronous, so an op
// runs to completion before the next starts. Only durability (flush, fsync) waits.
import type { Attr } from '../overlay/overlay.js'
import type { Session } from '../session/session.js'
import { toErrno } from './errno.js'

type Cb = (...args: any[]) => void

/** Per-operation counts and time spent in the handler (the daemon's --stats). */
export interface OpStats {
  counts: Record<string, number>
  /** Milliseconds spent answering, per operation (synchronous part, or until the callback). */
  ms: Record<string, number>
}

function stat (a: Attr) {
  return {
    mode: a.mode,
    uid: a.uid,
    gid: a.gid,
    size: a.size,
    dev: 0,
    nlink: a.nlink,
    ino: a.ino >>> 0,
    rdev: 0,
    blksize: 4096,
    blocks: a.blocks,
    atime: a.atime,
    mtime: a.mtime,
    ctime: a.ctime
  }
}

export function makeOps (session: Session, stats?: OpStats) {
  const ov = () => session.overlay
  const count = stats
    ? (name: string, ms = 0) => {
        stats.counts[name] = (stats.counts[name] ?? 0) + 1
        stats.ms[name] = (stats.ms[name] ?? 0) + ms
      }
    : (_: string, _ms?: number) => {}

  // Run fn; answer cb with its result or the errno of what it threw.
  function run (name: string, cb: Cb, fn: () => void): void {
    const t0 = stats ? performance.now() : 0
    try {
      fn()
    } catch (err) {
      cb(toErrno(err))
    }
    count(name, stats ? performance.now() - t0 : 0)
  }

  // An asynchronous op: time until its callback.
  function wait (name: string, cb: Cb, p: Promise<void>): void {
    const t0 = stats ? performance.now() : 0
    p.then(() => cb(0), (err) => cb(toErrno(err))).finally(() => count(name, stats ? performance.now() - t0 : 0))
  }

  return {
    init (cb: Cb) { cb(0) },
    access (path: string, _mode: number, cb: Cb) { run('access', cb, () => { ov().access(path); cb(0) }) },
    statfs (_path: string, cb: Cb) {
      run('statfs', cb, () => {
        const s = ov().statfs()
        cb(0, { bsize: s.bsize, frsize: s.bsize, blocks: s.blocks, bfree: s.bfree, bavail: s.bavail, files: s.files, ffree: s.ffree, favail: s.ffree, fsid: 0, flag: 0, namemax: 255 })
      })
    },
    getattr (path: string, cb: Cb) { run('getattr', cb, () => cb(0, stat(ov().getattr(path)))) },
    fgetattr (path: string, fd: number, cb: Cb) { run('fgetattr', cb, () => cb(0, stat(ov().fgetattr(fd, path)))) },
    readdir (path: string, cb: Cb) { run('readdir', cb, () => cb(0, ['.', '..', ...ov().readdir(path)])) },
    readlink (path: string, cb: Cb) { run('readlink', cb, () => cb(0, ov().readlink(path))) },
    open (path: string, flags: number, cb: Cb) { run('open', cb, () => cb(0, ov().open(path, flags))) },
    create (path: string, mode: number, cb: Cb) { run('create', cb, () => cb(0, ov().create(path, mode))) },
    read (_path: string, fd: number, buf: Buffer, len: number, pos: number, cb: Cb) {
      run('read', cb, () => cb(ov().read(fd, buf, len, pos)))
    },
    write (_path: string, fd: number, buf: Buffer, len: number, pos: number, cb: Cb) {
      run('write', cb, () => {
        const n = ov().write(fd, buf, len, pos)
        session.noteWritten(n)
        cb(n)
      })
    },
    truncate (path: string, size: number, cb: Cb) { run('truncate', cb, () => { ov().truncate(path, size); cb(0) }) },
    ftruncate (_path: string, fd: number, size: number, cb: Cb) { run('ftruncate', cb, () => { ov().ftruncate(fd, size); cb(0) }) },
    flush (_path: string, _fd: number, cb: Cb) {
      // close(): once it returns, the file's data is in the store's log (it survives kill -9
      // of the daemon); fsync additionally makes it durable against power loss.
      wait('flush', cb, session.flushAll(false))
    },
    fsync (_path: string, _datasync: number, _fd: number, cb: Cb) {
      wait('fsync', cb, session.flushAll(true))
    },
    fsyncdir (_path: string, _datasync: number, _fd: number, cb: Cb) {
      wait('fsyncdir', cb, session.flushAll(true))
    },
    release (_path: string, fd: number, cb: Cb) { run('release', cb, () => { ov().release(fd); cb(0) }) },
    unlink (path: string, cb: Cb) { run('unlink', cb, () => { ov().unlink(path); cb(0) }) },
    rename (src: string, dest: string, cb: Cb) { run('rename', cb, () => { ov().rename(src, dest); cb(0) }) },
    link (src: string, dest: string, cb: Cb) { run('link', cb, () => { ov().link(src, dest); cb(0) }) },
    symlink (target: string, path: string, cb: Cb) { run('symlink', cb, () => { ov().symlink(target, path); cb(0) }) },
    mkdir (path: string, mode: number, cb: Cb) { run('mkdir', cb, () => { ov().mkdir(path, mode); cb(0) }) },
    rmdir (path: string, cb: Cb) { run('rmdir', cb, () => { ov().rmdir(path); cb(0) }) },
    chmod (path: string, mode: number, cb: Cb) { run('chmod', cb, () => { ov().chmod(path, mode); cb(0) }) },
    chown (path: string, uid: number, gid: number, cb: Cb) { run('chown', cb, () => { ov().chown(path, uid, gid); cb(0) }) },
    utimens (path: string, atime: number, mtime: number, cb: Cb) { run('utimens', cb, () => { ov().utimens(path, atime, mtime); cb(0) }) }
  }
}
