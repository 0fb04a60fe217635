// The filesystem a view serves: everything that reads passes through to the view's overlay,
// everything that would change it is refused with EROFS. The view is also mounted MS_RDONLY,
// so the kernel refuses writes before they reach cpfs; this guard is the second wall, for what
// the kernel lets through anyway (a request raced with a remount, a kernel that forwards some
// operation it did not check, a bug), so that no path can ever write a layer of a view.
import { fsError } from '../errors.js'
import type { Filesystem, OpenFile } from '../fuse/contract.js'
import type { Attr, Caller, KillSetId, SetAttr } from '../overlay/attr.js'
import type * as fs from 'node:fs'

const O_TRUNC = 0o1000

export class ReadOnlyFilesystem implements Filesystem {
  constructor (private readonly inner: Filesystem) {}

  // ---- reads: passed through ----------------------------------------------------------
  getattr (path: string): Attr { return this.inner.getattr(path) }
  fgetattr (fh: number, path: string | null): Attr { return this.inner.fgetattr(fh, path) }
  nodeAttr (file: OpenFile): Attr { return this.inner.nodeAttr(file) }
  statfs (): fs.StatsFs { return this.inner.statfs() }
  readdir (path: string): string[] { return this.inner.readdir(path) }
  readlink (path: string): string { return this.inner.readlink(path) }
  read (fh: number, buf: Buffer, len: number, pos: number): number { return this.inner.read(fh, buf, len, pos) }
  release (fh: number): void { this.inner.release(fh) }
  fileAt (path: string): OpenFile | null { return this.inner.fileAt(path) }
  handleOf (file: OpenFile): number | null { return this.inner.handleOf(file) }
  lseek (fh: number, offset: number, whence: 'data' | 'hole'): number {
    if (!this.inner.lseek) throw fsError('ENOTSUP', String(fh))
    return this.inner.lseek(fh, offset, whence)
  }

  xattr (path: string, name: string): Buffer | undefined { return this.inner.xattr?.(path, name) }
  listxattr (path: string): string[] { return this.inner.listxattr?.(path) ?? [] }

  /**
   * An open that would truncate is refused. A write access mode is not: the FUSE layer opens
   * its own read-write handle around requests on files the kernel opened itself
   * (open-by-node.ts), and every write through any handle is refused below anyway.
   */
  open (path: string, flags: number): number {
    if ((flags & O_TRUNC) !== 0) throw refused(path)
    return this.inner.open(path, flags)
  }

  // ---- changes: refused ----------------------------------------------------------------
  setattr (path: string | null, fh: number | null, _change: SetAttr): Attr { throw refused(path ?? `handle ${fh}`) }
  mkdir (path: string, _mode: number, _caller: Caller): void { throw refused(path) }
  mknod (path: string, _fmt: number, _mode: number, _rdev: number, _caller: Caller): void { throw refused(path) }
  symlink (_target: string, path: string, _caller: Caller): void { throw refused(path) }
  unlink (path: string): void { throw refused(path) }
  rmdir (path: string): void { throw refused(path) }
  rename (src: string, _dst: string, _flags: { noReplace?: boolean, exchange?: boolean }): boolean { throw refused(src) }
  link (_src: string, dst: string): void { throw refused(dst) }
  create (path: string, _mode: number, _caller: Caller): number { throw refused(path) }
  write (fh: number, _buf: Buffer, _len: number, _pos: number, _kill: KillSetId | null): boolean { throw refused(`handle ${fh}`) }
  fallocate (fh: number, _mode: number, _offset: number, _length: number): void { throw refused(`handle ${fh}`) }
  setxattr (path: string, _name: string, _value: Buffer, _flags: { create?: boolean, replace?: boolean }): void { throw refused(path) }
  removexattr (path: string, _name: string): void { throw refused(path) }
}

function refused (what: string): Error {
  return fsError('EROFS', what, 'a view of a turn is read-only')
}
