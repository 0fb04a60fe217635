// FUSE handlers of directory listings: OPENDIR, READDIR(PLUS), RELEASEDIR.
import { fsError } from '../errors.js'
import type { Attr } from '../overlay/overlay.js'
import { join, parentOf } from '../paths/paths.js'
import type { Channel } from './channel.js'
import { MAX_WRITE } from './channel.js'
import { DIRENT, DIRENTPLUS, ENTRY_OUT, FOPEN, OPEN_OUT, OUT_HEADER, align8 } from './kernel.js'
import { putDirent, putEntry, putOpenOut, u64, type Request } from './wire.js'
import { wire, type OpsContext } from './context.js'

/** A directory listing taken at opendir: stable offsets for the handle's whole life. */
interface DirHandle {
  names: string[]
  /** Has a READDIR gone past the start? Then offset 0 again means rewinddir: list afresh. */
  read: boolean
}

export class DirOps {
  private readonly dirs = new Map<number, DirHandle>()
  private nextDir = 1

  constructor (private readonly cx: OpsContext) {}

  private get ov () {
    return this.cx.ov
  }

  opendir (r: Request, c: Channel): void {
    const path = this.cx.nodes.path(r.nodeid)
    const names = this.ov.readdir(path)
    const fh = this.nextDir++
    this.dirs.set(fh, { names, read: false })
    putOpenOut(c.out, OUT_HEADER, fh, this.cx.ttl > 0 ? FOPEN.CACHE_DIR | FOPEN.KEEP_CACHE : 0, 0)
    c.send(r, OPEN_OUT)
  }

  readdir (r: Request, c: Channel, plus: boolean): void {
    r.need(24)
    const fh = u64(r.buf, r.body)
    let offset = u64(r.buf, r.body + 8)
    const size = Math.min(r.buf.readUInt32LE(r.body + 16), MAX_WRITE)
    const dirPath = this.cx.nodes.path(r.nodeid)
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
          const node = this.cx.nodes.remember(a.ino, join(dirPath, name))
          putEntry(out, at, node.id, 0, this.cx.ttl, this.cx.attrTtl(a), wire(a))
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

  releasedir (r: Request, c: Channel): void {
    this.dirs.delete(u64(r.buf, r.body))
    c.error(r, 0)
  }
}
