// FUSE handlers of directory listings: OPENDIR, READDIR(PLUS), RELEASEDIR.
// With caching on, OPENDIR is answered ENOSYS: the kernel (FUSE_NO_OPENDIR_SUPPORT) then stops
// sending OPENDIR and RELEASEDIR for the mount, opens directories itself with fh 0 and keeps
// their listings (FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE, what cpfs answered before). A READDIR then
// carries no per-open state: offsets are hash cookies (cookies.ts) that stay right while the
// directory changes, and a listing taken at offset 0 is kept by node id for the offsets that
// follow. With caching off, every open is asked for and gets its own listing.
import { fsError } from '../errors.js'
import type { Attr } from '../overlay/overlay.js'
import { join, parentOf } from '../paths/paths.js'
import type { Channel } from './channel.js'
import { MAX_WRITE } from './channel.js'
import { keyedHash, Listing, Listings, replyAfter, type Cookie } from './cookies.js'
import { errnoOf } from './errno.js'
import { DIRENT, DIRENTPLUS, ENTRY_OUT, FOPEN, INIT, OPEN_OUT, OUT_HEADER, align8 } from './kernel.js'
import { putDirent, putEntry, putOpenOut, u64, type Request } from './wire.js'
import { wire, type OpsContext } from './context.js'

const ENOSYS = errnoOf('ENOSYS')
const DOT: Cookie = { hi: 0, lo: 1 }
const DOTDOT: Cookie = { hi: 0, lo: 2 }

/** A directory opened with OPENDIR (caching off): its own listing for the handle's life. */
interface DirHandle {
  listing: Listing
  /** Has a READDIR gone past the start? Then offset 0 again means rewinddir: list afresh. */
  read: boolean
}

export class DirOps {
  private readonly dirs = new Map<number, DirHandle>()
  private nextDir = 1
  private readonly hash = keyedHash()
  /** Listings of directories opened without OPENDIR (fh 0), by node id. */
  private readonly listings = new Listings()

  constructor (private readonly cx: OpsContext) {}

  private get ov () {
    return this.cx.ov
  }

  /** The daemon changed the tree itself: no kept listing may be used again. */
  forgetListings (): void {
    this.listings.clear()
  }

  private list (path: string): Listing {
    return new Listing(this.ov.readdir(path), this.hash)
  }

  opendir (r: Request, c: Channel): void {
    // Caching on and the kernel offers it: ENOSYS once, and it never asks again.
    if (this.cx.ttl > 0 && (this.cx.negotiated.flags & INIT.NO_OPENDIR_SUPPORT)) return c.error(r, ENOSYS)
    const fh = this.nextDir++
    this.dirs.set(fh, { listing: this.list(this.cx.nodes.path(r.nodeid)), read: false })
    putOpenOut(c.out, OUT_HEADER, fh, this.cx.ttl > 0 ? FOPEN.CACHE_DIR | FOPEN.KEEP_CACHE : 0, 0)
    c.send(r, OPEN_OUT)
  }

  readdir (r: Request, c: Channel, plus: boolean): void {
    r.need(24)
    const fh = u64(r.buf, r.body)
    const from: Cookie = { lo: r.buf.readUInt32LE(r.body + 8), hi: r.buf.readUInt32LE(r.body + 12) }
    const size = Math.min(r.buf.readUInt32LE(r.body + 16), MAX_WRITE)
    const dirPath = this.cx.nodes.path(r.nodeid)
    const start = from.hi === 0 && from.lo === 0
    let listing: Listing
    if (fh === 0) {
      listing = this.listings.get(r.nodeid, dirPath, start, () => this.list(dirPath))
    } else {
      const h = this.dirs.get(fh)
      if (!h) throw fsError('EBADF', dirPath)
      // rewinddir(3) seeks to 0: list again, as POSIX wants a fresh view then.
      if (start && h.read) h.listing = this.list(dirPath)
      h.read = true
      listing = h.listing
    }
    // Beyond 63 bits: no offset cpfs handed out (lseek refuses negative ones); the end.
    if (from.hi > 0x7fffffff) return c.send(r, 0)
    c.send(r, this.fill(c.out, size, plus, dirPath, listing, from) - OUT_HEADER)
  }

  /** Encode the entries after cookie `from` that fit in `size` bytes; returns the end offset. */
  private fill (out: Buffer, size: number, plus: boolean, dirPath: string, listing: Listing, from: Cookie): number {
    const limit = OUT_HEADER + size
    let at = OUT_HEADER
    const put = (name: string, a: Attr, next: Cookie, dot: boolean): void => {
      const nameBuf = Buffer.from(name)
      const type = (a.mode >> 12) & 15
      if (plus) {
        // '.' and '..' carry no entry (node id 0); every other entry counts as a lookup.
        if (dot) putEntry(out, at, 0, 0, 0, 0, null)
        else putEntry(out, at, this.cx.nodes.remember(a.ino, join(dirPath, name)).id, 0, this.cx.ttl, this.cx.attrTtl(a), wire(a))
        at += ENTRY_OUT
      }
      at += putDirent(out, at, a.ino, next, type, nameBuf)
    }
    const recLen = (name: string): number => align8((plus ? DIRENTPLUS : DIRENT) + Buffer.byteLength(name))
    if (from.hi === 0 && from.lo === 0) {
      if (at + recLen('.') > limit) return at
      put('.', this.ov.getattr(dirPath), DOT, true)
    }
    if (from.hi === 0 && from.lo <= 1) {
      if (at + recLen('..') > limit) return at
      put('..', this.ov.getattr(parentOf(dirPath)), DOTDOT, true)
    }
    const look = (name: string): Attr | null => {
      try {
        return this.ov.getattr(join(dirPath, name))
      } catch (err: any) {
        if (err?.code === 'ENOENT') return null // removed since the listing was taken
        throw err
      }
    }
    const names = replyAfter(listing, from, limit - at, recLen, look)
    if (names === 'too big') {
      if (at > OUT_HEADER) return at // '.' and '..' first; the group comes in the next reply
      throw fsError('EIO', dirPath, 'names that share one hash do not fit in a reply')
    }
    for (const { name, next, value } of names) put(name, value, next, false)
    return at
  }

  releasedir (r: Request, c: Channel): void {
    this.dirs.delete(u64(r.buf, r.body))
    c.error(r, 0)
  }
}
