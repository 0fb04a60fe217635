// FUSE handlers of extended attributes: GETXATTR, LISTXATTR, SETXATTR, REMOVEXATTR.
import { fsError } from '../errors.js'
import type { Channel } from './channel.js'
import { INIT, OUT_HEADER, XATTR_CREATE, XATTR_REPLACE } from './kernel.js'
import { errnoOf } from './errno.js'
import type { Request } from './wire.js'
import type { OpsContext } from './context.js'
import type { ExtendedAttributes } from './contract.js'

const ENODATA = errnoOf('ENODATA')
const ENOSYS = errnoOf('ENOSYS')

export class XattrOps {
  /** The filesystem's extended attributes; null when it has none (every request: ENOSYS). */
  private readonly x: ExtendedAttributes | null

  constructor (private readonly cx: OpsContext) {
    const f = cx.fs
    this.x = f.xattr && f.listxattr && f.setxattr && f.removexattr ? f as ExtendedAttributes : null
  }

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

  getxattr (r: Request, c: Channel): void {
    r.need(8)
    const size = r.buf.readUInt32LE(r.body)
    const name = r.cstring(r.body + 8).s
    // A missing attribute is the common answer (the kernel asks for security.capability at
    // the first write and at every chown): reply without building an error.
    if (!this.x) return c.error(r, ENOSYS)
    const v = this.x.xattr(this.cx.nodes.path(r.nodeid), name)
    if (v === undefined) return c.error(r, ENODATA)
    this.sized(r, c, size, v)
  }

  listxattr (r: Request, c: Channel): void {
    r.need(8)
    const size = r.buf.readUInt32LE(r.body)
    if (!this.x) return c.error(r, ENOSYS)
    const names = this.x.listxattr(this.cx.nodes.path(r.nodeid))
    this.sized(r, c, size, Buffer.from(names.map(n => n + '\0').join('')))
  }

  setxattr (r: Request, c: Channel): void {
    r.need(8)
    const size = r.buf.readUInt32LE(r.body)
    const flags = r.buf.readUInt32LE(r.body + 4)
    const nameAt = r.body + (this.cx.negotiated.flags & INIT.SETXATTR_EXT ? 16 : 8)
    const { s: name, next } = r.cstring(nameAt)
    if (next + size > r.end) throw new RangeError('malformed SETXATTR')
    // The namespaces Linux knows; ext4 refuses any other name the same way.
    if (!/^(user|trusted|security|system)\./.test(name)) throw fsError('ENOTSUP', name)
    if (!this.x) return c.error(r, ENOSYS)
    this.x.setxattr(this.cx.nodes.path(r.nodeid), name, r.copy(next, next + size), { create: Boolean(flags & XATTR_CREATE), replace: Boolean(flags & XATTR_REPLACE) })
    this.cx.done(c, r)
  }

  removexattr (r: Request, c: Channel): void {
    const name = r.cstring(r.body).s
    if (!this.x) return c.error(r, ENOSYS)
    this.x.removexattr(this.cx.nodes.path(r.nodeid), name)
    this.cx.done(c, r)
  }
}
