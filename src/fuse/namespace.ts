// FUSE handlers that change names: SYMLINK, MKNOD, MKDIR, UNLINK, RMDIR, RENAME(2), LINK.
import { fsError } from '../errors.js'
import { join } from '../paths/paths.js'
import type { Channel } from './channel.js'
import { RENAME_EXCHANGE, RENAME_NOREPLACE } from './kernel.js'
import { u64, type Request } from './wire.js'
import { caller, checkName, type OpsContext } from './context.js'

export class NamespaceOps {
  constructor (private readonly cx: OpsContext) {}

  private get ov () {
    return this.cx.ov
  }

  symlink (r: Request, c: Channel): void {
    const { path, next } = this.cx.childPath(r, r.body)
    const target = r.cstring(next).s
    this.ov.symlink(target, path, caller(r))
    this.cx.created(c, r, path, this.ov.getattr(path))
  }

  mknod (r: Request, c: Channel): void {
    r.need(16)
    const mode = r.buf.readUInt32LE(r.body)
    const { path } = this.cx.childPath(r, r.body + 16)
    const fmt = mode & 0o170000
    if (fmt === 0o100000 || fmt === 0) this.ov.release(this.ov.create(path, mode & 0o7777, caller(r)))
    else this.ov.mknod(path, fmt, mode & 0o7777, fmt === 0o020000 || fmt === 0o060000 ? r.buf.readUInt32LE(r.body + 4) : 0, caller(r))
    this.cx.created(c, r, path, this.ov.getattr(path))
  }

  mkdir (r: Request, c: Channel): void {
    r.need(8)
    const mode = r.buf.readUInt32LE(r.body)
    const { path } = this.cx.childPath(r, r.body + 8)
    this.ov.mkdir(path, mode & 0o7777, caller(r))
    this.cx.created(c, r, path, this.ov.getattr(path))
  }

  unlink (r: Request, c: Channel, dir: boolean): void {
    const { path } = this.cx.childPath(r, r.body)
    const pinned = dir ? null : this.cx.byNode.beforeRemoval(path)
    const file = dir ? null : this.ov.fileAt(path)
    try {
      if (dir) this.ov.rmdir(path)
      else this.ov.unlink(path)
    } catch (err) {
      this.cx.byNode.unpin(pinned)
      throw err
    }
    this.cx.nodes.removed(path, file)
    this.cx.done(c, r)
  }

  rename (r: Request, c: Channel, two: boolean): void {
    const b = r.buf
    const newdir = u64(b, r.body)
    const flags = two ? b.readUInt32LE(r.body + 8) : 0
    const { path: src, next } = this.cx.childPath(r, r.body + (two ? 16 : 8))
    const dname = r.cstring(next).s
    checkName(dname, this.cx.nameMax)
    const dst = join(this.cx.nodes.path(newdir), dname)
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) || (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE)) throw fsError('EINVAL', dst)
    const pinned = flags & RENAME_EXCHANGE ? null : this.cx.byNode.beforeRemoval(dst)
    const replaced = flags & RENAME_EXCHANGE ? null : this.ov.fileAt(dst)
    let changed
    try {
      changed = this.ov.rename(src, dst, { noReplace: Boolean(flags & RENAME_NOREPLACE), exchange: Boolean(flags & RENAME_EXCHANGE) })
    } catch (err) {
      this.cx.byNode.unpin(pinned)
      throw err
    }
    if (!changed) {
      this.cx.byNode.unpin(pinned)
      // the same path, or two names of one inode: nothing moved
    } else if (flags & RENAME_EXCHANGE) {
      this.cx.nodes.renamed(src, '/\u0000exchange')
      this.cx.nodes.renamed(dst, src)
      this.cx.nodes.renamed('/\u0000exchange', dst)
    } else {
      this.cx.nodes.removed(dst, replaced)
      this.cx.nodes.renamed(src, dst)
    }
    this.cx.done(c, r)
  }

  link (r: Request, c: Channel): void {
    const old = this.cx.nodes.path(u64(r.buf, r.body))
    const { path } = this.cx.childPath(r, r.body + 8)
    this.ov.link(old, path)
    this.cx.created(c, r, path, this.ov.getattr(path))
  }
}
