// FUSE handlers of file contents and handles: OPEN, CREATE, READ, WRITE, FALLOCATE, LSEEK,
// FLUSH, RELEASE.
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import type { Channel } from './channel.js'
import { MAX_WRITE } from './channel.js'
import { ENTRY_OUT, FOPEN, INIT, OPEN_OUT, OUT_HEADER, SEEK_DATA, SEEK_HOLE, OPEN_KILL_SUIDGID, WRITE_KILL_SUIDGID } from './kernel.js'
import { putEntry, putOpenOut, u64, writeU64, type Request } from './wire.js'
import { caller, killSetId, wire, type OpsContext } from './context.js'
import { errnoOf } from './errno.js'

const ENOSYS = errnoOf('ENOSYS')

export class FileOps {
  /** Handles opened for writing: close (FLUSH) waits for their data to reach the store. */
  private readonly writable = new Set<number>()

  constructor (private readonly cx: OpsContext) {
    cx.byNode.onOrphan = (fh) => {
      this.writable.delete(fh)
      this.ov.release(fh)
    }
  }

  private get ov () {
    return this.cx.ov
  }

  private openFlags (writable: boolean): number {
    // Without writers, pages the kernel cached stay valid until cpfs invalidates them.
    let f = this.cx.ttl > 0 ? FOPEN.KEEP_CACHE : 0
    if (!writable) f |= FOPEN.NOFLUSH
    return f
  }

  open (r: Request, c: Channel): void {
    // Caching on and the kernel offers it: ENOSYS once, and it opens files itself from then on
    // (open-by-node.ts). This open goes on without a handle; an O_TRUNC in it comes as a SETATTR.
    if (this.cx.ttl > 0 && (this.cx.negotiated.flags & INIT.NO_OPEN_SUPPORT)) {
      this.cx.byNode.active = true
      return c.error(r, ENOSYS)
    }
    r.need(8)
    const flags = r.buf.readUInt32LE(r.body)
    const path = this.cx.nodes.path(r.nodeid)
    const fh = this.ov.open(path, flags)
    const writable = (flags & 3) !== 0
    const kill = r.buf.readUInt32LE(r.body + 4) & OPEN_KILL_SUIDGID ? killSetId(r) : undefined
    // O_TRUNC truncates whatever the access mode, as Linux does (the kernel checked write permission).
    if (flags & fs.constants.O_TRUNC) this.ov.setattr(null, fh, { size: 0, killSuidGid: kill })
    if (writable) this.writable.add(fh)
    putOpenOut(c.out, OUT_HEADER, fh, this.openFlags(writable), 0)
    c.send(r, OPEN_OUT)
  }

  create (r: Request, c: Channel): void {
    r.need(16)
    const flags = r.buf.readUInt32LE(r.body)
    const mode = r.buf.readUInt32LE(r.body + 4)
    const { path } = this.cx.childPath(r, r.body + 16)
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
    const a = this.ov.fgetattr(fh, path)
    // Once the kernel opens files itself it sends no RELEASE for created ones: handle 0, and
    // the file is served by node like any other (open-by-node.ts).
    const handle = this.cx.byNode.active ? 0 : fh
    if (handle === 0) this.ov.release(fh)
    else this.writable.add(fh)
    c.after(r, this.cx.durability.durable(), () => {
      const node = this.cx.nodes.remember(a.ino, path)
      if (handle !== 0) this.cx.byNode.handedOut(node.id, handle)
      putEntry(c.out, OUT_HEADER, node.id, 0, this.cx.ttl, this.cx.attrTtl(a), wire(a))
      putOpenOut(c.out, OUT_HEADER + ENTRY_OUT, handle, this.openFlags(true), 0)
      return ENTRY_OUT + OPEN_OUT
    })
  }

  read (r: Request, c: Channel): void {
    r.need(24)
    const fh = u64(r.buf, r.body)
    const pos = u64(r.buf, r.body + 8)
    const size = Math.min(r.buf.readUInt32LE(r.body + 16), MAX_WRITE)
    const data = c.out.subarray(OUT_HEADER, OUT_HEADER + size)
    const n = fh === 0 ? this.cx.byNode.with(r.nodeid, (h) => this.ov.read(h, data, size, pos)) : this.ov.read(fh, data, size, pos)
    c.send(r, n)
  }

  write (r: Request, c: Channel): void {
    r.need(40)
    const fh = u64(r.buf, r.body)
    const pos = u64(r.buf, r.body + 8)
    const size = r.buf.readUInt32LE(r.body + 16)
    const dataAt = r.body + 40
    if (dataAt + size > r.end) throw new RangeError('malformed WRITE')
    const kill = r.buf.readUInt32LE(r.body + 20) & WRITE_KILL_SUIDGID ? killSetId(r) : null
    const n = size
    // The kernel does not drop its cached mode after a write that cleared set-ID bits.
    const data = r.buf.subarray(dataAt, dataAt + size)
    const cleared = fh === 0
      ? this.cx.byNode.with(r.nodeid, (h) => this.ov.write(h, data, size, pos, kill))
      : this.ov.write(fh, data, size, pos, kill)
    if (fh === 0) this.cx.byNode.noteWritten(r.nodeid)
    if (cleared) this.cx.attrsChanged(r.nodeid)
    this.cx.durability.noteWritten(n)
    const reply = () => {
      c.out.writeUInt32LE(n, OUT_HEADER)
      c.out.writeUInt32LE(0, OUT_HEADER + 4)
      return 8
    }
    const wait = this.cx.durability.backpressure()
    if (wait) c.after(r, wait, reply)
    else c.send(r, reply())
  }

  fallocate (r: Request, c: Channel): void {
    r.need(32)
    const fh = u64(r.buf, r.body)
    const offset = u64(r.buf, r.body + 8)
    const length = u64(r.buf, r.body + 16)
    const mode = r.buf.readUInt32LE(r.body + 24)
    if (!this.ov.fallocate) throw fsError('ENOTSUP', 'fallocate') // EOPNOTSUPP: posix_fallocate(3) writes zeros instead
    const fallocate = this.ov.fallocate.bind(this.ov)
    if (fh === 0) {
      this.cx.byNode.with(r.nodeid, (h) => fallocate(h, mode, offset, length))
      this.cx.byNode.noteWritten(r.nodeid)
    } else fallocate(fh, mode, offset, length)
    c.error(r, 0)
  }

  lseek (r: Request, c: Channel): void {
    r.need(24)
    const fh = u64(r.buf, r.body)
    const offset = u64(r.buf, r.body + 8)
    const whence = r.buf.readUInt32LE(r.body + 16)
    if (whence !== SEEK_DATA && whence !== SEEK_HOLE) throw fsError('EINVAL', 'lseek') // the kernel does SET/CUR/END itself
    // ENOSYS: the kernel stops asking and treats the whole file as data (contract.ts).
    if (!this.ov.lseek) return c.error(r, ENOSYS)
    const lseek = this.ov.lseek.bind(this.ov)
    const what = whence === SEEK_DATA ? 'data' : 'hole'
    const at = fh === 0 ? this.cx.byNode.with(r.nodeid, (h) => lseek(h, offset, what)) : lseek(fh, offset, what)
    if (at < 0) throw fsError('ENXIO', 'lseek')
    writeU64(c.out, OUT_HEADER, at)
    c.send(r, 8)
  }

  flush (r: Request, c: Channel): void {
    // close(): once it returns, the file's data is in the store's log (it survives kill -9 of
    // the daemon); fsync also makes it durable against power loss. Read-only handles are
    // opened with FOPEN_NOFLUSH, so this only runs for writers.
    const fh = u64(r.buf, r.body)
    if (fh === 0) return c.later(r, this.cx.byNode.flush(r.nodeid, () => this.closeWait(r.nodeid)), 'flush')
    if (!this.writable.has(fh)) return c.error(r, 0)
    c.later(r, this.cx.durability.flushAll(false), 'flush')
  }

  /**
   * What the close of node id waits for: that file's data (only that file's: see
   * Persister.flushFile). Every open file's, as before, when its file is not found by name (it
   * has no name any more, or its data already went into a batch): always enough.
   */
  private closeWait (nodeid: number): Promise<void> | null {
    const n = this.cx.nodes.get(nodeid)
    const file = n.path !== null ? this.ov.fileAt(n.path) : null
    return file?.key ? this.cx.durability.flushFile(file.key) : this.cx.durability.flushAll(false)
  }

  release (r: Request, c: Channel): void {
    const fh = u64(r.buf, r.body)
    if (fh === 0) return c.error(r, 0)
    this.cx.byNode.released(fh)
    this.writable.delete(fh)
    this.ov.release(fh)
    c.error(r, 0)
  }
}
