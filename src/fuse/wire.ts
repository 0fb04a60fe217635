// Reading requests and writing replies: the byte level of the FUSE protocol. A request is a
// view into the channel's read buffer (header fields decoded once, the body read lazily by
// the handler that knows its layout); replies are encoded into one scratch buffer and written
// with one write(2) each, as the kernel requires (one reply per write).
import { isUtf8 } from 'node:buffer'
import { fsError } from '../errors.js'
import { ATTR_OUT, ATTR_SIZE, DIRENT, ENTRY_OUT, INIT_OUT, IN_HEADER, OPEN_OUT, OUT_HEADER, STATFS_OUT, align8 } from './kernel.js'
import type { Attr } from '../real/stat.js'

/** Attributes as the kernel wants them (fuse_attr). Times are seconds + nanoseconds. */
/** The attributes as fuse_attr carries them: the overlay's Attr and the preferred I/O size. */
export interface WireAttr extends Attr {
  blksize: number
}

/** Read a u64 that the protocol guarantees (or cpfs made sure) fits a JavaScript number. */
export function u64 (buf: Buffer, off: number): number {
  return buf.readUInt32LE(off) + buf.readUInt32LE(off + 4) * 0x100000000
}

/** A signed 64-bit field (offsets in LSEEK, fallocate) as a number. */
export function i64 (buf: Buffer, off: number): number {
  return buf.readInt32LE(off + 4) * 0x100000000 + buf.readUInt32LE(off)
}

export function writeU64 (buf: Buffer, off: number, v: number): void {
  buf.writeUInt32LE(v >>> 0, off)
  buf.writeUInt32LE(Math.floor(v / 0x100000000) >>> 0, off + 4)
}

export class Request {
  buf: Buffer
  off: number
  len: number
  opcode: number
  unique: bigint
  nodeid: number
  uid: number
  gid: number
  pid: number
  /** Start of the opcode's body (after the header). */
  body: number
  /** End of the body proper (extensions, if any, follow it). */
  end: number

  constructor (buf: Buffer, off: number) {
    this.buf = buf
    this.off = off
    this.len = buf.readUInt32LE(off)
    this.opcode = buf.readUInt32LE(off + 4)
    this.unique = buf.readBigUInt64LE(off + 8)
    this.nodeid = u64(buf, off + 16)
    this.uid = buf.readUInt32LE(off + 24)
    this.gid = buf.readUInt32LE(off + 28)
    this.pid = buf.readUInt32LE(off + 32)
    const extlen = buf.readUInt16LE(off + 36) * 8
    this.body = off + IN_HEADER
    this.end = off + this.len - extlen
  }

  /** The body's bytes as a fresh copy (handlers that keep data must not keep the read buffer). */
  copy (from: number, to: number): Buffer {
    return Buffer.from(this.buf.subarray(from, to))
  }

  /**
   * A NUL-terminated name (or symlink target, or xattr name) at `at`; returns it and the offset
   * after its NUL. cpfs holds names as UTF-8 strings: bytes that are not UTF-8 would come back
   * as other bytes, so they are refused (EILSEQ) instead of being silently changed.
   */
  cstring (at: number): { s: string, next: number } {
    const nul = this.buf.indexOf(0, at)
    if (nul < 0 || nul >= this.end) throw new RangeError('malformed request: unterminated name')
    const bytes = this.buf.subarray(at, nul)
    if (!isUtf8(bytes)) throw fsError('EILSEQ', bytes.toString('latin1'), 'names that are not UTF-8 are not supported')
    return { s: bytes.toString('utf8'), next: nul + 1 }
  }

  need (bytes: number): void {
    if (this.body + bytes > this.end) throw new RangeError(`malformed request: body of ${this.end - this.body} bytes, need ${bytes}`)
  }
}

/** Encode fuse_attr at `off`. */
export function putAttr (b: Buffer, off: number, a: WireAttr): void {
  writeU64(b, off, a.ino)
  writeU64(b, off + 8, a.size)
  writeU64(b, off + 16, a.blocks)
  writeU64(b, off + 24, a.atime)
  writeU64(b, off + 32, a.mtime)
  writeU64(b, off + 40, a.ctime)
  b.writeUInt32LE(a.atimeNs, off + 48)
  b.writeUInt32LE(a.mtimeNs, off + 52)
  b.writeUInt32LE(a.ctimeNs, off + 56)
  b.writeUInt32LE(a.mode >>> 0, off + 60)
  b.writeUInt32LE(a.nlink >>> 0, off + 64)
  b.writeUInt32LE(a.uid >>> 0, off + 68)
  b.writeUInt32LE(a.gid >>> 0, off + 72)
  b.writeUInt32LE(a.rdev >>> 0, off + 76)
  b.writeUInt32LE(a.blksize, off + 80)
  b.writeUInt32LE(0, off + 84)
}

/** Encode fuse_entry_out at `off` (nodeid 0 = a negative entry, cached for entryValid). */
export function putEntry (b: Buffer, off: number, nodeid: number, gen: number, entryValid: number, attrValid: number, a: WireAttr | null): void {
  writeU64(b, off, nodeid)
  writeU64(b, off + 8, gen)
  writeU64(b, off + 16, entryValid)
  writeU64(b, off + 24, attrValid)
  b.writeUInt32LE(0, off + 32)
  b.writeUInt32LE(0, off + 36)
  if (a) putAttr(b, off + 40, a)
  else b.fill(0, off + 40, off + 40 + ATTR_SIZE)
}

export function putAttrOut (b: Buffer, off: number, attrValid: number, a: WireAttr): void {
  writeU64(b, off, attrValid)
  b.writeUInt32LE(0, off + 8)
  b.writeUInt32LE(0, off + 12)
  putAttr(b, off + 16, a)
}

export function putOpenOut (b: Buffer, off: number, fh: number, openFlags: number, backingId: number): void {
  writeU64(b, off, fh)
  b.writeUInt32LE(openFlags >>> 0, off + 8)
  b.writeInt32LE(backingId, off + 12)
}

export interface StatfsOut {
  blocks: number
  bfree: number
  bavail: number
  files: number
  ffree: number
  bsize: number
  namelen: number
  frsize: number
}

export function putStatfs (b: Buffer, off: number, s: StatfsOut): void {
  writeU64(b, off, s.blocks)
  writeU64(b, off + 8, s.bfree)
  writeU64(b, off + 16, s.bavail)
  writeU64(b, off + 24, s.files)
  writeU64(b, off + 32, s.ffree)
  b.writeUInt32LE(s.bsize, off + 40)
  b.writeUInt32LE(s.namelen, off + 44)
  b.writeUInt32LE(s.frsize, off + 48)
  b.fill(0, off + 52, off + STATFS_OUT)
}

/** Bytes a plain dirent with this name takes. */
export function direntSize (nameLen: number): number {
  return align8(DIRENT + nameLen)
}

/** Encode one fuse_dirent (d_type is the file type as in DT_*; next: the 64-bit offset after it, as two halves). */
export function putDirent (b: Buffer, off: number, ino: number, next: { hi: number, lo: number }, type: number, name: Buffer): number {
  writeU64(b, off, ino)
  b.writeUInt32LE(next.lo >>> 0, off + 8)
  b.writeUInt32LE(next.hi >>> 0, off + 12)
  b.writeUInt32LE(name.length, off + 16)
  b.writeUInt32LE(type, off + 20)
  name.copy(b, off + DIRENT)
  const size = direntSize(name.length)
  b.fill(0, off + DIRENT + name.length, off + size)
  return size
}

export const SIZES = { ENTRY_OUT, ATTR_OUT, OPEN_OUT, INIT_OUT, OUT_HEADER }

/** Write the out header for a reply of `len` bytes in total. */
export function putOutHeader (b: Buffer, len: number, error: number, unique: bigint): void {
  b.writeUInt32LE(len, 0)
  b.writeInt32LE(error, 4)
  b.writeBigUInt64LE(unique, 8)
}
