// FUSE request handlers: pure translation. Each decodes its request body (layouts in
// kernel.ts), turns node ids into paths (nodes.ts), calls the filesystem (contract.ts), and
// encodes the reply; errors become errno in one place (errno.ts, through the channel).
// The overlay is synchronous, so a request runs to completion before the next one starts;
// only durability (flush, fsync) waits, and replies when the store has the data.
// The handlers come in groups (attrs.ts, namespace.ts, files.ts, dirs.ts, xattrs.ts) that
// share one OpsContext (context.ts); FuseOps answers INIT and routes every request to its group.
import type { Durability, Filesystem } from './contract.js'
import type { Channel } from './channel.js'
import { MAX_WRITE } from './channel.js'
import { INIT, INIT2, INIT_OUT, KERNEL_MINOR, KERNEL_VERSION, OUT_HEADER, Op } from './kernel.js'
import type { Nodes } from './nodes.js'
import { u64, type Request } from './wire.js'
import { OpsContext, type FuseConfig } from './context.js'
import { AttrOps } from './attrs.js'
import { NamespaceOps } from './namespace.js'
import { FileOps } from './files.js'
import { DirOps } from './dirs.js'
import { XattrOps } from './xattrs.js'

export type { FuseConfig } from './context.js'

export class FuseOps {
  readonly nodes: Nodes
  private readonly cx: OpsContext
  private readonly attrs: AttrOps
  private readonly names: NamespaceOps
  private readonly files: FileOps
  private readonly dirs: DirOps
  private readonly xattrs: XattrOps
  onDestroy: () => void = () => {}
  /** The daemon invalidates the kernel's cached attributes of this node. */
  onAttrsChanged: (nodeid: number) => void = () => {}
  /** Called once INIT is answered: from then on the mount serves requests. */
  onInit: () => void = () => {}

  /** Serves `fs` (the overlay); replies that promise durability wait on `durability` (the persister). */
  constructor (fs: Filesystem, durability: Durability, rootIno: number, cfg: FuseConfig) {
    // onAttrsChanged is looked up at each call: the daemon sets it after construction.
    this.cx = new OpsContext(fs, durability, rootIno, cfg, (nodeid) => this.onAttrsChanged(nodeid))
    this.nodes = this.cx.nodes
    this.attrs = new AttrOps(this.cx)
    this.names = new NamespaceOps(this.cx)
    this.files = new FileOps(this.cx)
    this.dirs = new DirOps(this.cx)
    this.xattrs = new XattrOps(this.cx)
  }

  /** What INIT agreed with the kernel. */
  get negotiated (): { minor: number, flags: number, flags2: number } {
    return this.cx.negotiated
  }

  /** The daemon changed the tree itself (rewind, restore, writes from underneath): listings kept between READDIRs go. */
  viewChanged (): void {
    this.dirs.forgetListings()
  }

  register (ch: Channel): void {
    const on = (op: Op, h: (req: Request, ch: Channel) => void) => ch.on(op, h)
    const { attrs, names, files, dirs, xattrs } = this
    const durability = this.cx.durability
    on(Op.INIT, (r, c) => this.init(r, c))
    on(Op.DESTROY, (r, c) => { c.error(r, 0); this.onDestroy() })
    on(Op.LOOKUP, (r, c) => attrs.lookup(r, c))
    on(Op.FORGET, (r) => this.cx.forget(r.nodeid, u64(r.buf, r.body)))
    on(Op.BATCH_FORGET, (r) => attrs.batchForget(r))
    on(Op.GETATTR, (r, c) => attrs.getattr(r, c))
    on(Op.SETATTR, (r, c) => attrs.setattr(r, c))
    on(Op.READLINK, (r, c) => attrs.readlink(r, c))
    on(Op.SYMLINK, (r, c) => names.symlink(r, c))
    on(Op.MKNOD, (r, c) => names.mknod(r, c))
    on(Op.MKDIR, (r, c) => names.mkdir(r, c))
    on(Op.UNLINK, (r, c) => names.unlink(r, c, false))
    on(Op.RMDIR, (r, c) => names.unlink(r, c, true))
    on(Op.RENAME, (r, c) => names.rename(r, c, false))
    on(Op.RENAME2, (r, c) => names.rename(r, c, true))
    on(Op.LINK, (r, c) => names.link(r, c))
    on(Op.OPEN, (r, c) => files.open(r, c))
    on(Op.CREATE, (r, c) => files.create(r, c))
    on(Op.READ, (r, c) => files.read(r, c))
    on(Op.WRITE, (r, c) => files.write(r, c))
    on(Op.STATFS, (r, c) => attrs.statfs(r, c))
    on(Op.FLUSH, (r, c) => files.flush(r, c))
    on(Op.RELEASE, (r, c) => files.release(r, c))
    on(Op.FSYNC, (r, c) => c.later(r, durability.flushAll(true), 'fsync'))
    on(Op.FSYNCDIR, (r, c) => c.later(r, durability.flushAll(true), 'fsyncdir'))
    on(Op.SYNCFS, (r, c) => c.later(r, durability.flushAll(true), 'syncfs'))
    on(Op.OPENDIR, (r, c) => dirs.opendir(r, c))
    on(Op.READDIR, (r, c) => dirs.readdir(r, c, false))
    on(Op.READDIRPLUS, (r, c) => dirs.readdir(r, c, true))
    on(Op.RELEASEDIR, (r, c) => dirs.releasedir(r, c))
    on(Op.GETXATTR, (r, c) => xattrs.getxattr(r, c))
    on(Op.LISTXATTR, (r, c) => xattrs.listxattr(r, c))
    on(Op.SETXATTR, (r, c) => xattrs.setxattr(r, c))
    on(Op.REMOVEXATTR, (r, c) => xattrs.removexattr(r, c))
    on(Op.INTERRUPT, (r, c) => c.interrupt(r.buf.readBigUInt64LE(r.body)))
    on(Op.FALLOCATE, (r, c) => files.fallocate(r, c))
    on(Op.LSEEK, (r, c) => files.lseek(r, c))
  }

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
    const caching = this.cx.ttl > 0
    const want = INIT.ASYNC_READ | INIT.BIG_WRITES | INIT.MAX_PAGES |
      INIT.PARALLEL_DIROPS | INIT.ABORT_ERROR | INIT.INIT_EXT | INIT.HANDLE_KILLPRIV_V2 |
      // NO_OPEN(DIR)_SUPPORT: the kernel then opens files and directories itself, with the
      // caching flags cpfs gives them anyway (open-by-node.ts, dirs.ts); with caching off every
      // open is still asked for. Without OPEN, an O_TRUNC open must come as a SETATTR: the
      // kernel folds it into OPEN only with ATOMIC_O_TRUNC, so that is asked for only then.
      (caching
        ? INIT.DO_READDIRPLUS | INIT.READDIRPLUS_AUTO | INIT.CACHE_SYMLINKS | INIT.EXPLICIT_INVAL_DATA | INIT.NO_OPENDIR_SUPPORT | INIT.NO_OPEN_SUPPORT
        : INIT.ATOMIC_O_TRUNC)
    const flags = offered & want
    const flags2 = offered2 & INIT2.CREATE_SUPP_GROUP
    this.cx.negotiated = { minor: Math.min(minor, KERNEL_MINOR), flags, flags2 }
    b.fill(0, o, o + INIT_OUT)
    b.writeUInt32LE(KERNEL_VERSION, o)
    b.writeUInt32LE(this.cx.negotiated.minor, o + 4)
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
}
