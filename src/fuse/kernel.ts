// The Linux FUSE kernel protocol, as much of it as cpfs speaks: opcodes, flags and the byte
// layout of the structs, written from the protocol's documentation (libfuse's
// include/fuse_kernel.h, protocol 7.45). The system <linux/fuse.h> on Debian 12 is 7.38 and has
// no passthrough, so the project carries its own definitions. All integers are little endian;
// every struct is padded to 8 bytes.

export const KERNEL_VERSION = 7
/** The minor version cpfs speaks; the kernel here offers 7.45. */
export const KERNEL_MINOR = 45
/** Oldest minor cpfs accepts: 7.36 brought flags2 (FUSE_INIT_EXT), which passthrough needs. */
export const MIN_MINOR = 36

export const ROOT_ID = 1

export const enum Op {
  LOOKUP = 1,
  FORGET = 2,
  GETATTR = 3,
  SETATTR = 4,
  READLINK = 5,
  SYMLINK = 6,
  MKNOD = 8,
  MKDIR = 9,
  UNLINK = 10,
  RMDIR = 11,
  RENAME = 12,
  LINK = 13,
  OPEN = 14,
  READ = 15,
  WRITE = 16,
  STATFS = 17,
  RELEASE = 18,
  FSYNC = 20,
  SETXATTR = 21,
  GETXATTR = 22,
  LISTXATTR = 23,
  REMOVEXATTR = 24,
  FLUSH = 25,
  INIT = 26,
  OPENDIR = 27,
  READDIR = 28,
  RELEASEDIR = 29,
  FSYNCDIR = 30,
  GETLK = 31,
  SETLK = 32,
  SETLKW = 33,
  ACCESS = 34,
  CREATE = 35,
  INTERRUPT = 36,
  BMAP = 37,
  DESTROY = 38,
  IOCTL = 39,
  POLL = 40,
  NOTIFY_REPLY = 41,
  BATCH_FORGET = 42,
  FALLOCATE = 43,
  READDIRPLUS = 44,
  RENAME2 = 45,
  LSEEK = 46,
  COPY_FILE_RANGE = 47,
  SETUPMAPPING = 48,
  REMOVEMAPPING = 49,
  SYNCFS = 50,
  TMPFILE = 51,
  STATX = 52,
  COPY_FILE_RANGE_64 = 53,
}

/** Names for logs and `cpfs status --stats`. */
export const OP_NAMES: Record<number, string> = {
  1: 'lookup', 2: 'forget', 3: 'getattr', 4: 'setattr', 5: 'readlink', 6: 'symlink', 8: 'mknod',
  9: 'mkdir', 10: 'unlink', 11: 'rmdir', 12: 'rename', 13: 'link', 14: 'open', 15: 'read',
  16: 'write', 17: 'statfs', 18: 'release', 20: 'fsync', 21: 'setxattr', 22: 'getxattr',
  23: 'listxattr', 24: 'removexattr', 25: 'flush', 26: 'init', 27: 'opendir', 28: 'readdir',
  29: 'releasedir', 30: 'fsyncdir', 31: 'getlk', 32: 'setlk', 33: 'setlkw', 34: 'access',
  35: 'create', 36: 'interrupt', 37: 'bmap', 38: 'destroy', 39: 'ioctl', 40: 'poll',
  41: 'notify_reply', 42: 'batch_forget', 43: 'fallocate', 44: 'readdirplus', 45: 'rename2',
  46: 'lseek', 47: 'copy_file_range', 48: 'setupmapping', 49: 'removemapping', 50: 'syncfs',
  51: 'tmpfile', 52: 'statx', 53: 'copy_file_range_64'
}

// INIT flags (fuse_init_in.flags / fuse_init_out.flags; bits 32..63 travel in flags2).
export const INIT = {
  ASYNC_READ: 1 << 0,
  POSIX_LOCKS: 1 << 1,
  ATOMIC_O_TRUNC: 1 << 3,
  EXPORT_SUPPORT: 1 << 4,
  BIG_WRITES: 1 << 5,
  DONT_MASK: 1 << 6,
  FLOCK_LOCKS: 1 << 10,
  AUTO_INVAL_DATA: 1 << 12,
  DO_READDIRPLUS: 1 << 13,
  READDIRPLUS_AUTO: 1 << 14,
  ASYNC_DIO: 1 << 15,
  WRITEBACK_CACHE: 1 << 16,
  NO_OPEN_SUPPORT: 1 << 17,
  PARALLEL_DIROPS: 1 << 18,
  HANDLE_KILLPRIV: 1 << 19,
  POSIX_ACL: 1 << 20,
  ABORT_ERROR: 1 << 21,
  MAX_PAGES: 1 << 22,
  CACHE_SYMLINKS: 1 << 23,
  NO_OPENDIR_SUPPORT: 1 << 24,
  EXPLICIT_INVAL_DATA: 1 << 25,
  HANDLE_KILLPRIV_V2: 1 << 28,
  SETXATTR_EXT: 1 << 29,
  INIT_EXT: 1 << 30
} as const

/** flags2 bits (the high word of the 64-bit INIT flags). */
export const INIT2 = {
  SECURITY_CTX: 1 << 0,
  CREATE_SUPP_GROUP: 1 << 2,
  HAS_EXPIRE_ONLY: 1 << 3,
  DIRECT_IO_ALLOW_MMAP: 1 << 4,
  PASSTHROUGH: 1 << 5,
  NO_EXPORT_SUPPORT: 1 << 6,
  HAS_RESEND: 1 << 7,
  REQUEST_TIMEOUT: 1 << 10
} as const

// fuse_setattr_in.valid
export const FATTR = {
  MODE: 1 << 0,
  UID: 1 << 1,
  GID: 1 << 2,
  SIZE: 1 << 3,
  ATIME: 1 << 4,
  MTIME: 1 << 5,
  FH: 1 << 6,
  ATIME_NOW: 1 << 7,
  MTIME_NOW: 1 << 8,
  LOCKOWNER: 1 << 9,
  CTIME: 1 << 10,
  KILL_SUIDGID: 1 << 11
} as const

// fuse_write_in.write_flags
export const WRITE_KILL_SUIDGID = 1 << 2
// fuse_open_in.open_flags (FUSE_CREATE/FUSE_OPEN with O_TRUNC, HANDLE_KILLPRIV_V2)
export const OPEN_KILL_SUIDGID = 1 << 0

// fuse_open_out.open_flags
export const FOPEN = {
  DIRECT_IO: 1 << 0,
  KEEP_CACHE: 1 << 1,
  NONSEEKABLE: 1 << 2,
  CACHE_DIR: 1 << 3,
  STREAM: 1 << 4,
  NOFLUSH: 1 << 5,
  PARALLEL_DIRECT_WRITES: 1 << 6,
  PASSTHROUGH: 1 << 7
} as const

export const GETATTR_FH = 1 << 0
export const FSYNC_FDATASYNC = 1 << 0
export const RELEASE_FLUSH = 1 << 0

// renameat2(2) flags, as the kernel passes them in fuse_rename2_in.flags.
export const RENAME_NOREPLACE = 1 << 0
export const RENAME_EXCHANGE = 1 << 1
export const RENAME_WHITEOUT = 1 << 2

// fallocate(2) modes the kernel may pass.
export const FALLOC_FL_KEEP_SIZE = 0x01
export const FALLOC_FL_PUNCH_HOLE = 0x02
export const FALLOC_FL_ZERO_RANGE = 0x10

export const SEEK_DATA = 3
export const SEEK_HOLE = 4

// setxattr(2) flags.
export const XATTR_CREATE = 1
export const XATTR_REPLACE = 2

// Request extensions (fuse_in_header.total_extlen, in 8-byte units).
export const EXT_GROUPS = 32

export const enum Notify {
  POLL = 1,
  INVAL_INODE = 2,
  INVAL_ENTRY = 3,
  STORE = 4,
  RETRIEVE = 5,
  DELETE = 6,
  RESEND = 7,
  INC_EPOCH = 8,
  PRUNE = 9,
}

// ---- sizes and offsets ----------------------------------------------------------------------

/** fuse_in_header: len u32, opcode u32, unique u64, nodeid u64, uid u32, gid u32, pid u32, total_extlen u16, padding u16 */
export const IN_HEADER = 40
/** fuse_out_header: len u32, error i32, unique u64 */
export const OUT_HEADER = 16

/**
 * fuse_attr (88 bytes): ino, size, blocks, atime, mtime, ctime (u64); atimensec, mtimensec,
 * ctimensec, mode, nlink, uid, gid, rdev, blksize, flags (u32).
 */
export const ATTR_SIZE = 88
/** fuse_entry_out: nodeid, generation, entry_valid, attr_valid (u64), entry_valid_nsec, attr_valid_nsec (u32), attr. */
export const ENTRY_OUT = 40 + ATTR_SIZE
/** fuse_attr_out: attr_valid u64, attr_valid_nsec u32, dummy u32, attr. */
export const ATTR_OUT = 16 + ATTR_SIZE
/** fuse_open_out: fh u64, open_flags u32, backing_id i32. */
export const OPEN_OUT = 16
/** fuse_init_out (64 bytes in 7.45). */
export const INIT_OUT = 64
/** fuse_kstatfs (80 bytes). */
export const STATFS_OUT = 80
/** fuse_dirent header: ino u64, off u64, namelen u32, type u32; the name follows, padded to 8. */
export const DIRENT = 24
/** fuse_direntplus: entry_out then dirent. */
export const DIRENTPLUS = ENTRY_OUT + DIRENT

/** Round a record length up to the 8-byte boundary the kernel expects. */
export function align8 (n: number): number {
  return (n + 7) & ~7
}
