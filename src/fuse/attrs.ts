// FUSE handlers of lookups and attributes: LOOKUP, FORGET, GETATTR, SETATTR, READLINK, STATFS.
import { fsError } from '../errors.js'
import type { Attr, SetAttr, TimeSet } from '../overlay/overlay.js'
import { fromSecNs } from '../store/entries.js'
import type { Channel } from './channel.js'
import { ATTR_OUT, ENTRY_OUT, FATTR, GETATTR_FH, OUT_HEADER, STATFS_OUT } from './kernel.js'
import { putAttrOut, putEntry, putStatfs, u64, type Request } from './wire.js'
import { killSetId, wire, type OpsContext } from './context.js'

export class AttrOps {
  constructor (private readonly cx: OpsContext) {}

  private get ov () {
    return this.cx.ov
  }

  batchForget (r: Request): void {
    const count = r.buf.readUInt32LE(r.body)
    let at = r.body + 8
    for (let i = 0; i < count && at + 16 <= r.end; i++, at += 16) this.cx.forget(u64(r.buf, at), u64(r.buf, at + 8))
  }

  lookup (r: Request, c: Channel): void {
    const { path } = this.cx.childPath(r, r.body)
    let a: Attr
    try {
      a = this.ov.getattr(path)
    } catch (err: any) {
      if (err?.code === 'ENOENT' && this.cx.ttl > 0) {
        // A negative entry: the kernel remembers that the name does not exist.
        putEntry(c.out, OUT_HEADER, 0, 0, this.cx.ttl, 0, null)
        return c.send(r, ENTRY_OUT)
      }
      throw err
    }
    this.cx.entry(c, r, path, a)
  }

  private nodeAttr (nodeid: number, fh: number | null): Attr {
    const n = this.cx.nodes.get(nodeid)
    if (fh !== null) return this.ov.fgetattr(fh, n.path)
    if (n.path === null && n.file) return this.ov.nodeAttr(n.file)
    return this.ov.getattr(this.cx.nodes.path(nodeid))
  }

  getattr (r: Request, c: Channel): void {
    const flags = r.len - 40 >= 16 ? r.buf.readUInt32LE(r.body) : 0
    // Handle 0: a file the kernel opened without asking (open-by-node.ts), served by node.
    const fh = flags & GETATTR_FH ? u64(r.buf, r.body + 8) || null : null
    this.cx.attr(c, r, this.nodeAttr(r.nodeid, fh))
  }

  setattr (r: Request, c: Channel): void {
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
    const fh = valid & FATTR.FH ? u64(b, at + 8) || null : null
    if (valid & FATTR.FH && fh === null && valid & FATTR.SIZE) this.cx.byNode.noteWritten(r.nodeid)
    const n = this.cx.nodes.get(r.nodeid)
    const path = n.path
    if (path === null && fh === null && !n.file) throw fsError('ESTALE', `node ${r.nodeid}`)
    const a = path === null && fh === null && n.file
      ? this.ov.setattr(null, this.ov.handleOf(n.file), s)
      : this.ov.setattr(path, fh, s)
    // ftruncate is like a write (durable on close or fsync); truncate(2) by name and every
    // metadata change answer once stored.
    if (valid & ~(FATTR.SIZE | FATTR.FH | FATTR.LOCKOWNER) || !(valid & FATTR.FH)) {
      c.after(r, this.cx.durability.durable(), () => {
        putAttrOut(c.out, OUT_HEADER, this.cx.attrTtl(a), wire(a))
        return ATTR_OUT
      })
    } else {
      this.cx.attr(c, r, a)
    }
  }

  readlink (r: Request, c: Channel): void {
    const target = Buffer.from(this.ov.readlink(this.cx.nodes.path(r.nodeid)))
    target.copy(c.out, OUT_HEADER)
    c.send(r, target.length)
  }

  statfs (r: Request, c: Channel): void {
    const s = this.ov.statfs()
    putStatfs(c.out, OUT_HEADER, { blocks: s.blocks, bfree: s.bfree, bavail: s.bavail, files: s.files, ffree: s.ffree, bsize: s.bsize, namelen: this.cx.nameMax, frsize: s.bsize })
    c.send(r, STATFS_OUT)
  }
}
