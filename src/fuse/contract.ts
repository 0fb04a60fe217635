// The filesystem contract: everything the FUSE layer (ops.ts and the groups of handlers it
// routes to) asks of the filesystem it serves, one small interface per group of requests, as
// go-fuse's fs/api.go does. cpfs's overlay (overlay/overlay.ts) is the implementation; the
// persister (session/persister.ts) is the Durability. The FUSE layer depends on these and on
// nothing else of the session.
//
// Conventions, for every method:
//  - Paths are workspace paths, '/' first ('/src/a.ts'); names were checked against NAME_MAX
//    before any method is called. The kernel has walked the path already: every component but
//    the last is a directory the caller may search.
//  - A refusal is thrown as an FsError (errors.ts) whose code is a POSIX name ('ENOENT');
//    errno.ts turns it into the reply. Anything else thrown is answered EIO and logged.
//  - Nothing here waits: a method changes the filesystem's state in memory and returns. When
//    the change must be durable before the reply, the FUSE layer waits on Durability.
import type * as fs from 'node:fs'
import type { Attr, Caller, KillSetId, SetAttr } from '../overlay/attr.js'
import type { FileNode } from '../overlay/file-node.js'

/** An open file as the filesystem keeps it: the FUSE layer only holds it and hands it back. */
export type OpenFile = FileNode

/** GETATTR, SETATTR, STATFS; LOOKUP is getattr of the child's path. */
export interface Attributes {
  getattr (path: string): Attr
  /** Through an open handle: `path` is null once the file has lost its last name. */
  fgetattr (fh: number, path: string | null): Attr
  /** The attributes of an open file that has no name any more. */
  nodeAttr (file: OpenFile): Attr
  /** chmod, chown, truncate and utimens in one step: by `path`, or through handle `fh`. */
  setattr (path: string | null, fh: number | null, change: SetAttr): Attr
  statfs (): fs.StatsFs
}

/** READDIR, READDIRPLUS (names; the attributes come from Attributes). */
export interface Directories {
  /** The names in directory `path`, without '.' and '..'. */
  readdir (path: string): string[]
}

/** MKDIR, MKNOD, SYMLINK, READLINK, UNLINK, RMDIR, RENAME, LINK. */
export interface Namespace {
  mkdir (path: string, mode: number, caller: Caller): void
  /** A FIFO, socket or device: `fmt` is its S_IFMT type. */
  mknod (path: string, fmt: number, mode: number, rdev: number, caller: Caller): void
  symlink (target: string, path: string, caller: Caller): void
  readlink (path: string): string
  unlink (path: string): void
  rmdir (path: string): void
  /** rename(2) and renameat2(2) (RENAME_NOREPLACE, RENAME_EXCHANGE); false when nothing changed. */
  rename (src: string, dst: string, flags: { noReplace?: boolean, exchange?: boolean }): boolean
  link (src: string, dst: string): void
}

/**
 * OPEN, CREATE, READ, WRITE, RELEASE, FALLOCATE, LSEEK. Handles are numbers the filesystem
 * hands out at open and create and forgets at release (the FUSE layer also opens one around
 * each request about a file the kernel opened without asking: open-by-node.ts).
 */
export interface Files {
  open (path: string, flags: number): number
  /** EEXIST when the name is taken: the FUSE layer then opens it, unless O_EXCL. */
  create (path: string, mode: number, caller: Caller): number
  read (fh: number, buf: Buffer, len: number, pos: number): number
  /** Writes all of buf; true when that cleared set-ID bits (the kernel's cached mode is then stale). */
  write (fh: number, buf: Buffer, len: number, pos: number, kill: KillSetId | null): boolean
  release (fh: number): void
  /** The open file at `path`, if any: it is kept when a rename or unlink takes its name. */
  fileAt (path: string): OpenFile | null
  /** A handle of an open file, for a SETATTR that reaches it after it lost its name. */
  handleOf (file: OpenFile): number | null
  /**
   * FALLOCATE (mode: the FALLOC_FL_* bits). Optional: without it the answer is EOPNOTSUPP,
   * and posix_fallocate(3) writes zeros instead.
   */
  fallocate? (fh: number, mode: number, offset: number, length: number): void
  /**
   * LSEEK with SEEK_DATA or SEEK_HOLE; -1: no such offset (ENXIO). Optional: without it the
   * answer is ENOSYS, and the kernel stops asking and treats the whole file as data.
   */
  lseek? (fh: number, offset: number, whence: 'data' | 'hole'): number
}

/**
 * GETXATTR, LISTXATTR, SETXATTR, REMOVEXATTR. Optional as a group: without it every request
 * is answered ENOSYS, and the kernel stops sending them and answers EOPNOTSUPP itself.
 */
export interface ExtendedAttributes {
  /** The value, or undefined when the attribute is not set (answered ENODATA). */
  xattr (path: string, name: string): Buffer | undefined
  listxattr (path: string): string[]
  setxattr (path: string, name: string, value: Buffer, flags: { create?: boolean, replace?: boolean }): void
  removexattr (path: string, name: string): void
}

/** The filesystem the FUSE layer serves. */
export interface Filesystem extends Attributes, Directories, Namespace, Files, Partial<ExtendedAttributes> {}

/** When the filesystem's changes are safe from a crash of the daemon: what replies wait for. */
export interface Durability {
  /**
   * Every change made so far durable against kill -9 of the daemon (namespace and metadata
   * changes are answered only then); null: it is already.
   */
  durable (): Promise<void> | null
  /** Every open file's data into the store; with `sync`, durable against power loss (fsync). */
  flushAll (sync: boolean): Promise<void> | null
  /**
   * One file's data (the head key of an open file, FileNode.key) and every namespace and
   * metadata change into the store, as durable as `durable()`; other files' written data stays
   * for their own close or fsync.
   */
  flushFile (key: string): Promise<void> | null
  /** `bytes` were written: a batch is made once enough wait. */
  noteWritten (bytes: number): void
  /** A promise to wait on before answering a WRITE when the store is behind, else null. */
  backpressure (): Promise<void> | null
}
