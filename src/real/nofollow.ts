// Opening what Lower.realPath names without ever being led elsewhere or blocked. realPath
// pins every directory above the last component (lower.ts); these calls make the last
// component safe too: O_NOFOLLOW so a symlink planted there is never followed, O_NONBLOCK so
// a FIFO planted where a file was never blocks the daemon in open(2) (every process using the
// mount would hang behind it), and the type checked on the descriptor itself, so what is read,
// written or changed is the object that was checked, not whatever has the name a moment later.
import * as fs from 'node:fs'
import { CpfsError } from '../errors.js'

const { O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY, O_RDONLY } = fs.constants
const O_PATH = 0o10000000
const O_CLOEXEC = 0o2000000

/** What stands at a real path instead of what a caller needs there (a FIFO, a socket, a device...). */
export class NotExpected extends CpfsError {
  constructor (path: string, want: string, got: fs.Stats) {
    super('REAL_CHANGED', `${path} is ${describe(got)} now, not ${want}: it was changed outside cpfs`, 'look at what changed it, then run the command again')
  }
}

function describe (st: fs.Stats): string {
  if (st.isFIFO()) return 'a FIFO'
  if (st.isSocket()) return 'a socket'
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device'
  if (st.isSymbolicLink()) return 'a symlink'
  if (st.isDirectory()) return 'a directory'
  return 'a file'
}

/**
 * Open a regular file (flags: O_RDONLY, O_RDWR, with O_CREAT|O_EXCL for a new one) never
 * following a final symlink and never blocking; anything but a regular file is closed again
 * and refused (REAL_CHANGED), a symlink with ELOOP as open(2) gives it.
 */
export function openFile (path: string, flags: number, mode = 0o600): number {
  const fd = fs.openSync(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) throw new NotExpected(path, 'a regular file', st)
  } catch (err) {
    fs.closeSync(fd)
    throw err
  }
  return fd
}

/** Open a directory for listing, never through a final symlink. */
export function openDir (path: string): number {
  return fs.openSync(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
}

/** The entries of a real directory, listed through a descriptor that followed no symlink. */
export function readDirNoFollow<T> (path: string, list: (fdPath: string) => T): T {
  const fd = openDir(path)
  try {
    return list(`/proc/self/fd/${fd}`)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Run fn on a handle of the object at path itself, never a symlink's target: an O_PATH
 * descriptor (opening it has no effect on a FIFO or a device), its lstat, and a path that
 * reaches exactly that object (`/proc/self/fd/N`, which calls that follow may take: chmod,
 * chown, getxattr). Returns null when nothing is there.
 */
export function withObject<T> (path: string, fn: (st: fs.Stats, objPath: string, fd: number) => T): T | null {
  let fd: number
  try {
    fd = fs.openSync(path, O_PATH | O_NOFOLLOW | O_CLOEXEC)
  } catch (err: any) {
    if (err.code === 'ENOENT') return null
    throw err
  }
  try {
    return fn(fs.fstatSync(fd), `/proc/self/fd/${fd}`, fd)
  } finally {
    fs.closeSync(fd)
  }
}
