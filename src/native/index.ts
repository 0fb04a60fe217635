// Typed loader for cpfs's own native addon (src/native/cpfs.c, built by
// scripts/build-native.mjs into build/Release): the few system calls Node cannot make —
// mounting /dev/fuse and reading it in batches, watching it on the event loop, symlink-proof
// directory walks, l*/f* xattrs, mknodat, nanosecond times, SEEK_DATA/SEEK_HOLE, fallocate and
// syncfs.
//
// Every failing system call throws an Error with .code = the errno name ('ENOENT'),
// .errno = the negative errno, .syscall, and .path when there is one, as Node's fs does.
// Wrong argument types throw TypeError, integers out of range RangeError.
//
// The addon is loaded on first use (or by loadNative(), to fail early with the fix), so that
// importing this module never fails: a missing build is one CpfsError line, not a crash.
import { constants as fsc } from 'node:fs'
import { createRequire } from 'node:module'
import { CpfsError } from '../errors.js'

/** Opaque: what pollStart returns and pollStop takes. */
export type PollHandle = object

/** Opaque: what underneathStart returns. */
export type UnderneathHandle = object

/**
 * What the fanotify thread heard: 'open' (held until underneathAllow; path is absolute),
 * 'change' (dir: the directory's handle in hex, name: the entry; mask: FAN_* bits), 'rename'
 * (a move, with both places), 'overflow' (events were lost), 'timeout' (a held open was let go
 * before JavaScript answered).
 */
export interface UnderneathEvent {
  kind: 'open' | 'change' | 'overflow' | 'timeout' | 'rename'
  mask: number
  pid: number
  id: number
  path?: string
  dir?: string
  name?: string
  /** 'rename': the new directory (handle) and name; dir and name are the old ones. */
  dir2?: string
  name2?: string
}

/** The values of the C headers the addon was built with (the tests check the exports below against them). */
export interface NativeConstants {
  readonly O_RDONLY: number; readonly O_WRONLY: number; readonly O_RDWR: number
  readonly O_CREAT: number; readonly O_EXCL: number; readonly O_TRUNC: number; readonly O_APPEND: number
  readonly O_NONBLOCK: number; readonly O_DIRECTORY: number; readonly O_NOFOLLOW: number
  readonly O_CLOEXEC: number; readonly O_PATH: number; readonly O_NOATIME: number
  readonly AT_FDCWD: number; readonly AT_SYMLINK_NOFOLLOW: number; readonly AT_EMPTY_PATH: number
  readonly AT_REMOVEDIR: number
  readonly UTIME_NOW: number; readonly UTIME_OMIT: number
  readonly SEEK_SET: number; readonly SEEK_CUR: number; readonly SEEK_END: number
  readonly SEEK_DATA: number; readonly SEEK_HOLE: number
  readonly RENAME_NOREPLACE: number; readonly RENAME_EXCHANGE: number; readonly RENAME_WHITEOUT: number
  readonly XATTR_CREATE: number; readonly XATTR_REPLACE: number
  readonly MS_RDONLY: number; readonly MS_NOSUID: number; readonly MS_NODEV: number
  readonly MS_NOEXEC: number; readonly MS_NOATIME: number; readonly MS_NODIRATIME: number
  readonly MNT_FORCE: number; readonly MNT_DETACH: number; readonly MNT_EXPIRE: number
  readonly UMOUNT_NOFOLLOW: number
  readonly FALLOC_FL_KEEP_SIZE: number; readonly FALLOC_FL_PUNCH_HOLE: number
  readonly FALLOC_FL_ZERO_RANGE: number; readonly FALLOC_FL_COLLAPSE_RANGE: number
  readonly FALLOC_FL_INSERT_RANGE: number
  readonly S_IFMT: number; readonly S_IFSOCK: number; readonly S_IFLNK: number; readonly S_IFREG: number
  readonly S_IFBLK: number; readonly S_IFDIR: number; readonly S_IFCHR: number; readonly S_IFIFO: number
  /** readBatch returns -ENODEV once the connection has ended (unmounted). */
  readonly ENODEV: number
  /** pollStart's callback gets UV_EBADF when the device reports POLLERR (connection ended). */
  readonly UV_EBADF: number
}

export interface Native {
  // --- FUSE device
  /** mount(source, target, type, flags, data); data must contain fd=<fd>. */
  fuseMount (fd: number, target: string, source: string, type: string, flags: number, data: string): void
  /** Non-root mounting: runs `fusermount3 -o options -- target` and returns the /dev/fuse fd it sends. */
  fusermountOpen (target: string, options: string): number
  umount2 (target: string, flags: number): void
  setNonBlocking (fd: number, on: boolean): void
  /**
   * Reads requests (one per read(2), each at the next 8-byte-aligned offset of buf) while at
   * least minFree bytes are left and fewer than maxCount were read. Returns the count, 0 when
   * none was ready, or a negative errno when the connection has ended: -ENODEV (-19), or
   * -ECONNABORTED (-103) when it was aborted. Walk them by the uint32
   * little-endian `len` at the start of each fuse_in_header. With `spinUs`, an empty device is
   * read again for up to that many microseconds before 0 is returned (busy polling).
   */
  readBatch (fd: number, buf: Buffer, minFree: number, maxCount: number, spinUs?: number): number
  /**
   * Calls onReadable(0) on the JS thread while fd is readable (level-triggered: read until
   * readBatch returns 0), or onReadable(UV_EBADF) once when the device reports POLLERR (the
   * connection ended); libuv has then stopped the watch, but pollStop must still close it.
   * Side effect (libuv's): fd is switched to O_NONBLOCK.
   */
  pollStart (fd: number, onReadable: (status: number) => void): PollHandle
  /** Stops and closes the watch; calling it again does nothing. */
  pollStop (handle: PollHandle): void

  // --- filesystem calls Node lacks (any dirFd may be AT_FDCWD)
  /** An O_PATH fd for the directory rel below rootFd, following no symlink; '' or '.' is rootFd itself. */
  openDirBeneath (rootFd: number, rel: string): number
  /** null when the attribute does not exist (ENODATA). */
  lgetxattr (path: string, name: string): Buffer | null
  llistxattr (path: string): string[]
  lsetxattr (path: string, name: string, value: Buffer, flags: number): void
  lremovexattr (path: string, name: string): void
  /** The f* forms need a real fd: an O_PATH fd fails with EBADF (use /proc/self/fd/N with the l* forms). */
  fgetxattr (fd: number, name: string): Buffer | null
  flistxattr (fd: number): string[]
  fsetxattr (fd: number, name: string, value: Buffer, flags: number): void
  fremovexattr (fd: number, name: string): void
  mknodat (dirFd: number, name: string, mode: number, dev: number): void
  /** nsec may be UTIME_NOW or UTIME_OMIT; seconds may be negative. */
  utimensat (dirFd: number, name: string, atimeSec: number, atimeNsec: number,
    mtimeSec: number, mtimeNsec: number, flags: number): void
  futimens (fd: number, atimeSec: number, atimeNsec: number, mtimeSec: number, mtimeNsec: number): void
  /** The new offset, or -1 when SEEK_DATA / SEEK_HOLE find nothing (ENXIO). */
  lseek (fd: number, offset: number, whence: number): number
  fallocate (fd: number, mode: number, offset: number, len: number): void
  syncfs (fd: number): void
  /** glibc malloc_trim(0): give the allocator's free pages back to the system; true when some were. */
  mallocTrim (): boolean

  // --- fanotify on the real directory under the mount (underneath.c; root only)
  /** Two fanotify groups and the thread that reads them; onReady is called when events wait (drain them). */
  underneathStart (onReady: () => void, timeoutMs: number): UnderneathHandle
  /** Marks directory rel below dirFd ('' for dirFd itself); returns its file handle in hex, as change events name it. */
  underneathMark (handle: UnderneathHandle, dirFd: number, rel: string): string
  underneathDrain (handle: UnderneathHandle): UnderneathEvent[]
  /** Lets a held open go on; false when the thread had let it go already (timeout). */
  underneathAllow (handle: UnderneathHandle, id: number): boolean
  /** Ends the thread, lets every held open go on, closes the groups. */
  underneathStop (handle: UnderneathHandle): void
  /** A private clone of the mount dirFd is on, with the mounts below it (open_tree OPEN_TREE_CLONE|AT_RECURSIVE); root only. */
  openTreeClone (dirFd: number): number
  /** Opens through the mount of treeFd (a clone) raise no permission event in this watch. */
  underneathIgnoreMount (handle: UnderneathHandle, treeFd: number): void

  // --- the request path (no Stats objects, BigInts or allocations)
  /**
   * lstat into out (16 numbers): mode, uid, gid, size, blocks, nlink, ino, rdev, atime sec,
   * atime nsec, mtime sec, mtime nsec, ctime sec, ctime nsec, dev. false when nothing is there
   * (ENOENT, ENOTDIR, ELOOP).
   */
  lstatInto (path: string, out: Float64Array): boolean
  /** One write(2) of buf[0..len): a FUSE reply. */
  writeReply (fd: number, buf: Buffer, len: number): number
  /** A reply in two pieces (header, then data[0..dataLen)) in one writev(2). */
  writeReply2 (fd: number, head: Buffer, data: Buffer, dataLen: number): number

  readonly constants: NativeConstants
}

let loaded: Native | undefined

/** Loads the addon (once); throws CpfsError NO_NATIVE with the fix when it cannot. */
export function loadNative (): Native {
  if (loaded) return loaded
  const require = createRequire(import.meta.url)
  try {
    // Relative to dist/native/index.js: the repository root's build/Release.
    loaded = require('../../build/Release/cpfs_native.node') as Native
  } catch (e) {
    const first = String(e instanceof Error ? e.message : e).split('\n')[0]
    throw new CpfsError('NO_NATIVE', `cannot load the cpfs native addon: ${first}`,
      'run npm ci again (it builds the addon), or see native-bindings.md', { cause: e })
  }
  return loaded
}

/** Every addon function; the first use loads the addon. */
export const native: Native = new Proxy({} as Native, {
  get: (_target, key) => Reflect.get(loadNative(), key)
})

// Constants, usable without loading the addon. Those whose value differs between Linux
// architectures (O_DIRECTORY, O_NOFOLLOW...) come from Node; the rest are the same on every
// architecture Node supports on Linux (asm-generic and x86 agree on them).
export const {
  O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_NONBLOCK, O_DIRECTORY,
  O_NOFOLLOW, O_NOATIME, S_IFMT, S_IFSOCK, S_IFLNK, S_IFREG, S_IFBLK, S_IFDIR, S_IFCHR, S_IFIFO
} = fsc as Required<typeof fsc>
export const O_PATH = 0o10000000
export const O_CLOEXEC = 0o2000000
export const AT_FDCWD = -100
export const AT_SYMLINK_NOFOLLOW = 0x100
export const AT_REMOVEDIR = 0x200
export const AT_EMPTY_PATH = 0x1000
/** For the nsec arguments of utimensat/futimens: set to the current time / leave unchanged. */
export const UTIME_NOW = (1 << 30) - 1
export const UTIME_OMIT = (1 << 30) - 2
export const SEEK_SET = 0
export const SEEK_CUR = 1
export const SEEK_END = 2
export const SEEK_DATA = 3
export const SEEK_HOLE = 4
export const RENAME_NOREPLACE = 1
export const RENAME_EXCHANGE = 2
export const RENAME_WHITEOUT = 4
export const XATTR_CREATE = 1
export const XATTR_REPLACE = 2
export const MS_RDONLY = 1
export const MS_NOSUID = 2
export const MS_NODEV = 4
export const MS_NOEXEC = 8
export const MS_NOATIME = 1024
export const MS_NODIRATIME = 2048
export const MNT_FORCE = 1
export const MNT_DETACH = 2
export const MNT_EXPIRE = 4
export const UMOUNT_NOFOLLOW = 8
export const FALLOC_FL_KEEP_SIZE = 0x01
export const FALLOC_FL_PUNCH_HOLE = 0x02
export const FALLOC_FL_COLLAPSE_RANGE = 0x08
export const FALLOC_FL_ZERO_RANGE = 0x10
export const FALLOC_FL_INSERT_RANGE = 0x20
/** readBatch returns -ENODEV (-19) once the kernel has ended the connection (unmounted). */
export const ENODEV = 19
/** pollStart's callback gets UV_EBADF (-9) when /dev/fuse reports POLLERR (connection ended). */
export const UV_EBADF = -9
