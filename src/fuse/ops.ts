// FUSE request handlers: pure translation. Each decodes its request body (layouts in
// kernel.ts), turns node ids into overlay paths (nodes.ts), calls the overlay or the session,
// and encodes the reply; errors become errno in one place (errno.ts, through the channel).
// The overlay is synchronous, so a request runs to completion before the next one starts;
// only durability (flush, fsync) waits, and replies when the store has the data.
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import type { Attr, Caller, KillSetId, SetAttr, TimeSet } from '../overlay/overlay.js'
import { join, parentOf } from '../overlay/paths.js'
import type { Session } from '../session/session.js'
import { fromSecNs } from '../store/entries.js'
import type { Channel } from './channel.js'
import { MAX_WRITE } from './channel.js'
import {
  ATTR_OUT, DIRENT, DIRENTPLUS, ENTRY_OUT, FATTR, FOPEN, GETATTR_FH, INIT, INIT2, INIT_OUT, KERNEL_MINOR,
  KERNEL_VERSION, OPEN_OUT, OUT_HEADER, Op, RENAME_EXCHANGE, RENAME_NOREPLACE, SEEK_DATA, SEEK_HOLE, STATFS_OUT,
  XATTR_CREATE, XATTR_REPLACE, align8, OPEN_KILL_SUIDGID, WRITE_KILL_SUIDGID
} from './kernel.js'
import { errnoOf } from './errno.js'
import { Nodes } from './nodes.js'
import { Request, putAttrOut, putDirent, putEntry, putOpenOut, putStatfs, u64, writeU64, type WireAttr } from './wire.js'

import { NAME_MAX, nameMax } from '../overlay/limits.js'

const ENODATA = errnoOf('ENODATA')

export interface FuseConfig {
  /** Seconds the kernel may cache entries, attributes and negative lookups (0 = no caching). */
  cacheTimeout: number
}

/** A directory listing taken at opendir: stable offsets for the handle's whole life. */
interface DirHandle {
  names: string[]
  /** Has a READDIR gone past the start? Then offset 0 again means rewinddir: list afresh. */
  read: boolean
}

function wire (a: Attr): WireAttr {
  return {
    ino: a.ino,
    size: a.size,
    blocks: a.blocks,
    atime: Math.floor(a.atime / 1000),
    atimeNs: (a.atime - Math.floor(a.atime / 1000) * 1000) * 1000000 + a.atimeNs,
    mtime: Math.floor(a.mtime / 1000),
    mtimeNs: (a.mtime - Math.floor(a.mtime / 1000) * 1000) * 1000000 + a.mtimeNs,
    ctime: Math.floor(a.ctime / 1000),
    ctimeNs: (a.ctime - Math.floor(a.ctime / 1000) * 1000) * 1000000 + a.ctimeNs,
    mode: a.mode,
    nlink: a.nlink,
    uid: a.uid,
    gid: a.gid,
    rdev: a.rdev,
    blksize: 4096
  }
}

function checkName (name: string, max: number): void {
  if (Buffer.byteLength(name) > max) throw fsError('ENAMETOOLONG', name.slice(0, 40) + '…')
}

function caller (req: Request): Caller {
  return { uid: req.uid, gid: req.gid }
}

/**
 * For clearing set-ID bits on behalf of a caller without CAP_FSETID: its primary group comes
 * with the request, supplementary ones from /proc (read only when a file has a non-executable
 * set-group-ID bit, which is rare).
 */
function killSetId (req: Request): KillSetId {
  const { uid, gid, pid } = req
  return {
    inGroup: (g) => {
      if (uid === 0 || g === gid) return true
      try {
        const groups = /^Groups:\s*(.*)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? ''
        return groups.split(/\s+/).includes(String(g))
      } catch {
        return false // the caller is gone: clearing the bit is the safe side
      }
    }
  }
}

export class FuseOps {
  readonly nodes: Nodes
  private readonly session: Session
  private readonly ttl: number
  /** The longest name the mount takes: Linux's NAME_MAX, or less if the real directory's filesystem takes less (so that what is written can be applied). */
  private readonly nameMax: number
  private readonly dirs = new Map<number, DirHandle>()
  private nextDir = 1
  /** Handles opened for writing: close (FLUSH) waits for their data to reach the store. */
  private readonly writable = new Set<number>()
  negotiated = { minor: 0, flags: 0, flags2: 0 }
  onDestroy: () => void = () => {}
  /** The daemon invalidates the kernel's cached attributes of this node. */
  onAttrsChanged: (nodeid: number) => void = () => {}
  /** Called once INIT is answered: from then on the mount serves requests. */
  onInit: () => void = () => {}

  constructor (session: Session, rootIno: number, cfg: FuseConfig) {
    this.session = session
    this.nodes = new Nodes(rootIno)
    this.ttl = cfg.cacheTimeout
    this.nameMax = Math.min(NAME_MAX, nameMax(session.origin.dirFd))
  }

  private get ov () {
    return this.session.overlay
  }

  register (ch: Channel): void {
    const on = (op: Op, h: (req: Request, ch: Channel) => void) => ch.on(op, h)
    on(Op.INIT, (r, c) => this.init(r, c))
    on(Op.DESTROY, (r, c) => { c.error(r, 0); this.onDestroy() })
    on(Op.LOOKUP, (r, c) => this.lookup(r, c))
    on(Op.FORGET, (r) => this.nodes.forget(r.nodeid, u64(r.buf, r.body)))
    on(Op.BATCH_FORGET, (r) => this.batchForget(r))
    on(Op.GETATTR, (r, c) => this.getattr(r, c))
    on(Op.SETATTR, (r, c) => this.setattr(r, c))
    on(Op.READLINK, (r, c) => this.readlink(r, c))
    on(Op.SYMLINK, (r, c) => this.symlink(r, c))
    on(Op.MKNOD, (r, c) => this.mknod(r, c))
    on(Op.MKDIR, (r, c) => this.mkdir(r, c))
    on(Op.UNLINK, (r, c) => this.unlink(r, c, false))
    on(Op.RMDIR, (r, c) => this.unlink(r, c, true))
    on(Op.RENAME, (r, c) => this.rename(r, c, false))
    on(Op.RENAME2, (r, c) => this.rename(r, c, true))
    on(Op.LINK, (r, c) => this.link(r, c))
    on(Op.OPEN, (r, c) => this.open(r, c))
    on(Op.CREATE, (r, c) => this.create(r, c))
    on(Op.READ, (r, c) => this.read(r, c))
    on(Op.WRITE, (r, c) => this.write(r, c))
    on(Op.STATFS, (r, c) => this.statfs(r, c))
    on(Op.FLUSH, (r, c) => this.flush(r, c))
    on(Op.RELEASE, (r, c) => this.release(r, c))
    on(Op.FSYNC, (r, c) => c.later(r, this.session.persister.flushAll(true), 'fsync'))
    on(Op.FSYNCDIR, (r, c) => c.later(r, this.session.persister.flushAll(true), 'fsyncdir'))
    on(Op.SYNCFS, (r, c) => c.later(r, this.session.persister.flushAll(true), 'syncfs'))
    on(Op.OPENDIR, (r, c) => this.opendir(r, c))
    on(Op.READDIR, (r, c) => this.readdir(r, c, false))
    on(Op.READDIRPLUS, (r, c) => this.readdir(r, c, true))
    on(Op.RELEASEDIR, (r, c) => { this.dirs.delete(u64(r.buf, r.body)); c.error(r, 0) })
    on(Op.GETXATTR, (r, c) => this.getxattr(r, c))
    on(Op.LISTXATTR, (r, c) => this.listxattr(r, c))
    on(Op.SETXATTR, (r, c) => this.setxattr(r, c))
    on(Op.REMOVEXATTR, (r, c) => this.removexattr(r, c))
    on(Op.INTERRUPT, (r, c) => c.interrupt(r.buf.readBigUInt64LE(r.body)))
    on(Op.FALLOCATE, (r, c) => this.fallocate(r, c))
    on(Op.LSEEK, (r, c) => this.lseek(r, c))
  }

  // ---- session --------------------------------------------------------------------------

  private init (r: Request, c: Channel): void {
    r.need(8)
    const major = r.buf.readUInt32LE(r.body)
    const minor = r.buf.readUInt32LE(r.body + 4)
    const b = c.out
    const o = OUT_HEADER
    if (major !== KERNEL_VERSION) {
      // A newer major: answer with ours, the kernel then sends a matching INIT (or gives up).
      b.fill(0, o, o + 8)
      b.writeUInt32LE(KERNEL_VERSION, o)
      b.writeUInt32LE(KERNEL_MINOR, o + 4)
      return c.send(r, 8)
    }
    r.need(16)
    const readahead = r.buf.readUInt32LE(r.body + 8)
    const offered = r.buf.readUInt32LE(r.body + 12)
    const offered2 = minor >= 36 && (offered & INIT.INIT_EXT) ? r.buf.readUInt32LE(r.body + 16) : 0
    const want = INIT.ASYNC_READ | INIT.ATOMIC_O_TRUNC | INIT.BIG_WRITES | INIT.MAX_PAGES |
      INIT.PARALLEL_DIROPS | INIT.ABORT_ERROR | INIT.INIT_EXT | INIT.HANDLE_KILLPRIV_V2 |
      (this.ttl > 0 ? INIT.DO_READDIRPLUS | INIT.READDIRPLUS_AUTO | INIT.CACHE_SYMLINKS | INIT.EXPLICIT_INVAL_DATA : 0)
    const flags = offered & want
    const flags2 = offered2 & INIT2.CREATE_SUPP_GROUP
    this.negotiated = { minor: Math.min(minor, KERNEL_MINOR), flags, flags2 }
    b.fill(0, o, o + INIT_OUT)
    b.writeUInt32LE(KERNEL_VERSION, o)
    b.writeUInt32LE(this.negotiated.minor, o + 4)
    b.writeUInt32LE(readahead, o + 8)
    b.writeUInt32LE(flags >>> 0, o + 12)
    b.writeUInt16LE(64, o + 16) // max_background
    b.writeUInt16LE(48, o + 18) // congestion_threshold
    b.writeUInt32LE(MAX_WRITE, o + 20) // max_write
    b.writeUInt32LE(1, o + 24) // time_gran: nanoseconds
    b.writeUInt16LE(MAX_WRITE / 4096, o + 28) // max_pages
    b.writeUInt16LE(0, o + 30) // map_alignment
    b.writeUInt32LE(flags2 >>> 0, o + 32)
    c.send(r, minor >= 23 ? INIT_OUT : 24)
    this.onInit()
  }

  /**
   * How long the kernel may keep attributes. Not at all for set-ID files: a write by another
   * user clears their bits in the overlay, and the kernel's copy must not show them until the
   * invalidation (sent from a worker, after the reply) lands. Such files are rare.
   */
  private attrTtl (a: Attr): number {
    return a.mode & 0o6000 ? 0 : this.ttl
  }

  private batchForget (r: Request): void {
    const count = r.buf.readUInt32LE(r.body)
    let at = r.body + 8
    for (let i = 0; i < count && at + 16 <= r.end; i++, at += 16) this.nodes.forget(u64(r.buf, at), u64(r.buf, at + 8))
  }

  // ---- replies ---------------------------------------------------------------------------

  private entry (c: Channel, r: Request, path: string, a: Attr): void {
    const node = this.nodes.remember(a.ino, path)
    putEntry(c.out, OUT_HEADER, node.id, 0, this.ttl, this.attrTtl(a), wire(a))
    c.send(r, ENTRY_OUT)
  }

  /** An entry reply for a new name, sent once the change is in the store (Session.durable). */
  private created (c: Channel, r: Request, path: string, a: Attr): void {
    c.after(r, this.session.persister.durable(), () => {
      const node = this.nodes.remember(a.ino, path)
      putEntry(c.out, OUT_HEADER, node.id, 0, this.ttl, this.attrTtl(a), wire(a))
      return ENTRY_OUT
    })
  }

  /** An empty reply once the change is in the store. */
  private done (c: Channel, r: Request): void {
    c.after(r, this.session.persister.durable(), () => 0)
  }

  private attr (c: Channel, r: Request, a: Attr): void {
    putAttrOut(c.out, OUT_HEADER, this.attrTtl(a), wire(a))
    c.send(r, ATTR_OUT)
  }

  private childPath (r: Request, nameAt: number): { path: string, next: number } {
    const { s, next } = r.cstring(nameAt)
    checkName(s, this.nameMax)
    return { path: join(this.nodes.path(r.nodeid), s), next }
  }

  // ---- lookups and attributes ------------------------------------------------------------

  private lookup (r: Request, c: Channel): void {
    const { path } = this.childPath(r, r.body)
    let a: Attr
    try {
      a = this.ov.getattr(path)
    } catch (err: any) {
      if (err?.code === 'ENOENT' && this.ttl > 0) {
        // A negative entry: the kernel remembers that the name does not exist.
        putEntry(c.out, OUT_HEADER, 0, 0, this.ttl, 0, null)
        return c.send(r, ENTRY_OUT)
      }
      throw err
    }
    this.entry(c, r, path, a)
  }

  private nodeAttr (nodeid: number, fh: number | null): Attr {
    const n = this.nodes.get(nodeid)
    if (fh !== null) return this.ov.fgetattr(fh, n.path)
    if (n.path === null && n.file) return this.ov.nodeAttr(n.file)
    return this.ov.getattr(this.nodes.path(nodeid))
  }

  private getattr (r: Request, c: Channel): void {
    const flags = r.len - 40 >= 16 ? r.buf.readUInt32LE(r.body) : 0
    const fh = flags & GETATTR_FH ? u64(r.buf, r.body + 8) : null
    this.attr(c, r, this.nodeAttr(r.nodeid, fh))
  }

  private setattr (r: Request, c: Channel): void {
    r.need(88)
    const b = r.buf
    const at = r.body
    const valid = b.readUInt32LE(at)
    const s: SetAttr = {}
    if (valid & FATTR.MODE) s.mode = b.readUInt32LE(at + 68)
    if (valid & FATTR.UID) s.uid = b.readUInt32LE(at + 76)
    if (valid & FATTR.GID) s.gid = b.readUInt32LE(at + 80)
    if (valid & FATTR.SIZE) s.size = u64(b, at + 16)
    // truncate by a caller without CAP_FSETID comes flagged; chown never does: the VFS clears
    // set-ID bits on every chown of a non-directory, so cpfs does it for every chown.
    if (valid & (FATTR.KILL_SUIDGID | FATTR.UID | FATTR.GID)) s.killSuidGid = killSetId(r)
    const time = (set: number, now: number, secAt: number, nsAt: number): TimeSet =>
      valid & now ? 'now' : valid & set ? fromSecNs(Number(b.readBigInt64LE(secAt)), b.readUInt32LE(nsAt)) : null
    s.atime = time(FATTR.ATIME, FATTR.ATIME_NOW, at + 32, at + 56)
    s.mtime = time(FATTR.MTIME, FATTR.MTIME_NOW, at + 40, at + 60)
    if (valid & FATTR.CTIME) s.ctime = fromSecNs(Number(b.readBigInt64LE(at + 48)), b.readUInt32LE(at + 64))
    const fh = valid & FATTR.FH ? u64(b, at + 8) : null
    const n = this.nodes.get(r.nodeid)
    const path = n.path
    if (path === null && fh === null && !n.file) throw fsError('ESTALE', `node ${r.nodeid}`)
    const a = path === null && fh === null && n.file
      ? this.ov.setattr(null, this.ov.handleOf(n.file), s)
      : this.ov.setattr(path, fh, s)
    // ftruncate is like a write (durable on close or fsync); truncate(2) by name and every
    // metadata change answer once stored.
    if (valid & ~(FATTR.SIZE | FATTR.FH | FATTR.LOCKOWNER) || !(valid & FATTR.FH)) {
      c.after(r, this.session.persister.durable(), () => {
        putAttrOut(c.out, OUT_HEADER, this.attrTtl(a), wire(a))
        return ATTR_OUT
      })
    } else {
      this.attr(c, r, a)
    }
  }

  private readlink (r: Request, c: Channel): void {
    const target = Buffer.from(this.ov.readlink(this.nodes.path(r.nodeid)))
    target.copy(c.out, OUT_HEADER)
    c.send(r, target.length)
  }

  private statfs (r: Request, c: Channel): void {
    const s = this.ov.statfs()
    putStatfs(c.out, OUT_HEADER, { blocks: s.blocks, bfree: s.bfree, bavail: s.bavail, files: s.files, ffree: s.ffree, bsize: s.bsize, namelen: this.nameMax, frsize: s.bsize })
    c.send(r, STATFS_OUT)
  }

  // ---- namespace --------------------------------------------------------------------------

  private symlink (r: Request, c: Channel): void {
    const { path, next } = this.childPath(r, r.body)
    const target = r.cstring(next).s
    this.ov.symlink(target, path, caller(r))
    this.created(c, r, path, this.ov.getattr(path))
  }

  private mknod (r: Request, c: Channel): void {
    r.need(16)
    const mode = r.buf.readUInt32LE(r.body)
    const { path } = this.childPath(r, r.body + 16)
    const fmt = mode & 0o170000
    if (fmt === 0o100000 || fmt === 0) this.ov.release(this.ov.create(path, mode & 0o7777, caller(r)))
    else this.ov.mknod(path, fmt, mode & 0o7777, fmt === 0o020000 || fmt === 0o060000 ? r.buf.readUInt32LE(r.body + 4) : 0, caller(r))
    this.created(c, r, path, this.ov.getattr(path))
  }

  private mkdir (r: Request, c: Channel): void {
    r.need(8)
    const mode = r.buf.readUInt32LE(r.body)
    const { path } = this.childPath(r, r.body + 8)
    this.ov.mkdir(path, mode & 0o7777, caller(r))
    this.created(c, r, path, this.ov.getattr(path))
  }

  private unlink (r: Request, c: Channel, dir: boolean): void {
    const { path } = this.childPath(r, r.body)
    const file = dir ? null : this.ov.fileAt(path)
    if (dir) this.ov.rmdir(path)
    else this.ov.unlink(path)
    this.nodes.removed(path, file)
    this.done(c, r)
  }

  private rename (r: Request, c: Channel, two: boolean): void {
    const b = r.buf
    const newdir = u64(b, r.body)
    const flags = two ? b.readUInt32LE(r.body + 8) : 0
    const { path: src, next } = this.childPath(r, r.body + (two ? 16 : 8))
    const dname = r.cstring(next).s
    checkName(dname, this.nameMax)
    const dst = join(this.nodes.path(newdir), dname)
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) || (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE)) throw fsError('EINVAL', dst)
    const replaced = flags & RENAME_EXCHANGE ? null : this.ov.fileAt(dst)
    const changed = this.ov.rename(src, dst, { noReplace: Boolean(flags & RENAME_NOREPLACE), exchange: Boolean(flags & RENAME_EXCHANGE) })
    if (!changed) {
      // the same path, or two names of one inode: nothing moved
    } else if (flags & RENAME_EXCHANGE) {
      this.nodes.renamed(src, '/\u0000exchange')
      this.nodes.renamed(dst, src)
      this.nodes.renamed('/\u0000exchange', dst)
    } else {
      this.nodes.removed(dst, replaced)
      this.nodes.renamed(src, dst)
    }
    this.done(c, r)
  }

  private link (r: Request, c: Channel): void {
    const old = this.nodes.path(u64(r.buf, r.body))
    const { path } = this.childPath(r, r.body + 8)
    this.ov.link(old, path)
    this.created(c, r, path, this.ov.getattr(path))
  }

  // ---- files ------------------------------------------------------------------------------

  private openFlags (writable: boolean): number {
    // Without writers, pages the kernel cached stay valid until cpfs invalidates them.
    let f = this.ttl > 0 ? FOPEN.KEEP_CACHE : 0
    if (!writable) f |= FOPEN.NOFLUSH
    return f
  }

  private open (r: Request, c: Channel): void {
    r.need(8)
    const flags = r.buf.readUInt32LE(r.body)
    const path = this.nodes.path(r.nodeid)
    const fh = this.ov.open(path, flags)
    const writable = (flags & 3) !== 0
    const kill = r.buf.readUInt32LE(r.body + 4) & OPEN_KILL_SUIDGID ? killSetId(r) : undefined
    // O_TRUNC truncates whatever the access mode, as Linux does (the kernel checked write permission).
    if (flags & fs.constants.O_TRUNC) this.ov.setattr(null, fh, { size: 0, killSuidGid: kill })
    if (writable) this.writable.add(fh)
    putOpenOut(c.out, OUT_HEADER, fh, this.openFlags(writable), 0)
    c.send(r, OPEN_OUT)
  }

  private create (r: Request, c: Channel): void {
    r.need(16)
    const flags = r.buf.readUInt32LE(r.body)
    const mode = r.buf.readUInt32LE(r.body + 4)
    const { path } = this.childPath(r, r.body + 16)
    let fh: number
    try {
      fh = this.ov.create(path, mode & 0o7777, caller(r))
    } catch (err: any) {
      // The kernel thought the name was free; without O_EXCL an existing file is opened.
      if (err?.code !== 'EEXIST' || flags & fs.constants.O_EXCL) throw err
      fh = this.ov.open(path, flags)
      const kill = r.buf.readUInt32LE(r.body + 12) & OPEN_KILL_SUIDGID ? killSetId(r) : undefined
      if (flags & fs.constants.O_TRUNC) this.ov.setattr(null, fh, { size: 0, killSuidGid: kill })
    }
    this.writable.add(fh)
    const a = this.ov.fgetattr(fh, path)
    c.after(r, this.session.persister.durable(), () => {
      const node = this.nodes.remember(a.ino, path)
      putEntry(c.out, OUT_HEADER, node.id, 0, this.ttl, this.attrTtl(a), wire(a))
      putOpenOut(c.out, OUT_HEADER + ENTRY_OUT, fh, this.openFlags(true), 0)
      return ENTRY_OUT + OPEN_OUT
    })
  }

  private read (r: Request, c: Channel): void {
    r.need(24)
    const fh = u64(r.buf, r.body)
    const pos = u64(r.buf, r.body + 8)
    const size = Math.min(r.buf.readUInt32LE(r.body + 16), MAX_WRITE)
    const data = c.out.subarray(OUT_HEADER, OUT_HEADER + size)
    const n = this.ov.read(fh, data, size, pos)
    c.send(r, n)
  }

  private write (r: Request, c: Channel): void {
    r.need(40)
    const fh = u64(r.buf, r.body)
    const pos = u64(r.buf, r.body + 8)
    const size = r.buf.readUInt32LE(r.body + 16)
    const dataAt = r.body + 40
    if (dataAt + size > r.end) throw new RangeError('malformed WRITE')
    const kill = r.buf.readUInt32LE(r.body + 20) & WRITE_KILL_SUIDGID ? killSetId(r) : null
    const n = size
    // The kernel does not drop its cached mode after a write that cleared set-ID bits.
    if (this.ov.write(fh, r.buf.subarray(dataAt, dataAt + size), size, pos, kill)) this.onAttrsChanged(r.nodeid)
    this.session.persister.noteWritten(n)
    const reply = () => {
      c.out.writeUInt32LE(n, OUT_HEADER)
      c.out.writeUInt32LE(0, OUT_HEADER + 4)
      return 8
    }
    const wait = this.session.persister.backpressure()
    if (wait) c.after(r, wait, reply)
    else c.send(r, reply())
  }

  private fallocate (r: Request, c: Channel): void {
    r.need(32)
    const fh = u64(r.buf, r.body)
    const offset = u64(r.buf, r.body + 8)
    const length = u64(r.buf, r.body + 16)
    const mode = r.buf.readUInt32LE(r.body + 24)
    this.ov.fallocate(fh, mode, offset, length)
    c.error(r, 0)
  }

  private lseek (r: Request, c: Channel): void {
    r.need(24)
    const fh = u64(r.buf, r.body)
    const offset = u64(r.buf, r.body + 8)
    const whence = r.buf.readUInt32LE(r.body + 16)
    if (whence !== SEEK_DATA && whence !== SEEK_HOLE) throw fsError('EINVAL', 'lseek') // the kernel does SET/CUR/END itself
    const at = this.ov.lseek(fh, offset, whence === SEEK_DATA ? 'data' : 'hole')
    if (at < 0) throw fsError('ENXIO', 'lseek')
    writeU64(c.out, OUT_HEADER, at)
    c.send(r, 8)
  }

  private flush (r: Request, c: Channel): void {
    // close(): once it returns, the file's data is in the store's log (it survives kill -9 of
    // the daemon); fsync also makes it durable against power loss. Read-only handles are
    // opened with FOPEN_NOFLUSH, so this only runs for writers.
    const fh = u64(r.buf, r.body)
    if (!this.writable.has(fh)) return c.error(r, 0)
    c.later(r, this.session.persister.flushAll(false), 'flush')
  }

  private release (r: Request, c: Channel): void {
    const fh = u64(r.buf, r.body)
    this.writable.delete(fh)
    this.ov.release(fh)
    c.error(r, 0)
  }

  // ---- directories ------------------------------------------------------------------------

  private opendir (r: Request, c: Channel): void {
    const path = this.nodes.path(r.nodeid)
    const names = this.ov.readdir(path)
    const fh = this.nextDir++
    this.dirs.set(fh, { names, read: false })
    putOpenOut(c.out, OUT_HEADER, fh, this.ttl > 0 ? FOPEN.CACHE_DIR | FOPEN.KEEP_CACHE : 0, 0)
    c.send(r, OPEN_OUT)
  }

  private readdir (r: Request, c: Channel, plus: boolean): void {
    r.need(24)
    const fh = u64(r.buf, r.body)
    let offset = u64(r.buf, r.body + 8)
    const size = Math.min(r.buf.readUInt32LE(r.body + 16), MAX_WRITE)
    const dirPath = this.nodes.path(r.nodeid)
    const h = this.dirs.get(fh)
    if (!h) throw fsError('EBADF', dirPath)
    // rewinddir(3) seeks to 0: list again, as POSIX wants a fresh view then.
    if (offset === 0 && h.read) h.names = this.ov.readdir(dirPath)
    h.read = true
    const out = c.out
    let at = OUT_HEADER
    const limit = OUT_HEADER + size
    // Offsets: 1 = after '.', 2 = after '..', 3 + i = after names[i].
    const total = h.names.length + 2
    while (offset < total) {
      const name = offset === 0 ? '.' : offset === 1 ? '..' : h.names[offset - 2]
      const nameBuf = Buffer.from(name)
      const recLen = align8((plus ? DIRENTPLUS : DIRENT) + nameBuf.length)
      if (at + recLen > limit) break
      let ino = 0
      let type = 4 // DT_DIR for '.' and '..'
      let a: Attr | null = null
      if (offset >= 2) {
        try {
          a = this.ov.getattr(join(dirPath, name))
        } catch (err: any) {
          if (err?.code === 'ENOENT') { offset++; continue } // removed since opendir
          throw err
        }
        ino = a.ino
        type = (a.mode >> 12) & 15
      } else {
        ino = this.ov.getattr(offset === 0 ? dirPath : parentOf(dirPath)).ino
      }
      if (plus) {
        // '.' and '..' carry no entry (node id 0); every other entry counts as a lookup.
        if (a) {
          const node = this.nodes.remember(a.ino, join(dirPath, name))
          putEntry(out, at, node.id, 0, this.ttl, this.attrTtl(a), wire(a))
        } else {
          putEntry(out, at, 0, 0, 0, 0, null)
        }
        putDirent(out, at + ENTRY_OUT, ino, offset + 1, type, nameBuf)
      } else {
        putDirent(out, at, ino, offset + 1, type, nameBuf)
      }
      at += recLen
      offset++
    }
    c.send(r, at - OUT_HEADER)
  }

  // ---- extended attributes ----------------------------------------------------------------

  /** A value or a name list: the size when asked with size 0, ERANGE when it does not fit. */
  private sized (r: Request, c: Channel, size: number, data: Buffer): void {
    if (size === 0) {
      c.out.writeUInt32LE(data.length, OUT_HEADER)
      c.out.writeUInt32LE(0, OUT_HEADER + 4)
      return c.send(r, 8)
    }
    if (data.length > size) throw fsError('ERANGE', 'xattr')
    c.sendData(r, data, data.length)
  }

  private getxattr (r: Request, c: Channel): void {
    r.need(8)
    const size = r.buf.readUInt32LE(r.body)
    const name = r.cstring(r.body + 8).s
    // A missing attribute is the common answer (the kernel asks for security.capability at
    // the first write and at every chown): reply without building an error.
    const v = this.ov.xattr(this.nodes.path(r.nodeid), name)
    if (v === undefined) return c.error(r, ENODATA)
    this.sized(r, c, size, v)
  }

  private listxattr (r: Request, c: Channel): void {
    r.need(8)
    const size = r.buf.readUInt32LE(r.body)
    const names = this.ov.listxattr(this.nodes.path(r.nodeid))
    this.sized(r, c, size, Buffer.from(names.map(n => n + '\0').join('')))
  }

  private setxattr (r: Request, c: Channel): void {
    r.need(8)
    const size = r.buf.readUInt32LE(r.body)
    const flags = r.buf.readUInt32LE(r.body + 4)
    const nameAt = r.body + (this.negotiated.flags & INIT.SETXATTR_EXT ? 16 : 8)
    const { s: name, next } = r.cstring(nameAt)
    if (next + size > r.end) throw new RangeError('malformed SETXATTR')
    // The namespaces Linux knows; ext4 refuses any other name the same way.
    if (!/^(user|trusted|security|system)\./.test(name)) throw fsError('ENOTSUP', name)
    this.ov.setxattr(this.nodes.path(r.nodeid), name, r.copy(next, next + size), { create: Boolean(flags & XATTR_CREATE), replace: Boolean(flags & XATTR_REPLACE) })
    this.done(c, r)
  }

  private removexattr (r: Request, c: Channel): void {
    const name = r.cstring(r.body).s
    this.ov.removexattr(this.nodes.path(r.nodeid), name)
    this.done(c, r)
  }
}
