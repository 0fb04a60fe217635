// What the groups of FUSE request handlers (ops.ts) share: the session, the node table, the
// mount's limits and cache times, and the replies they all send.
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import type { Attr, Caller, KillSetId } from '../overlay/overlay.js'
import { join } from '../paths/paths.js'
import type { Durability, Filesystem } from './contract.js'
import type { Channel } from './channel.js'
import { ATTR_OUT, ENTRY_OUT, OUT_HEADER } from './kernel.js'
import { Nodes } from './nodes.js'
import { OpenByNode } from './open-by-node.js'
import { putAttrOut, putEntry, type Request, type WireAttr } from './wire.js'

export interface FuseConfig {
  /** Seconds the kernel may cache entries, attributes and negative lookups (0 = no caching). */
  cacheTimeout: number
  /**
   * The longest name the mount takes: Linux's NAME_MAX, or less if the real directory's
   * filesystem takes less (so that what is written can be applied).
   */
  nameMax: number
}

export function wire (a: Attr): WireAttr {
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

export function checkName (name: string, max: number): void {
  if (Buffer.byteLength(name) > max) throw fsError('ENAMETOOLONG', name.slice(0, 40) + '…')
}

export function caller (req: Request): Caller {
  return { uid: req.uid, gid: req.gid }
}

/**
 * For clearing set-ID bits on behalf of a caller without CAP_FSETID: its primary group comes
 * with the request, supplementary ones from /proc (read only when a file has a non-executable
 * set-group-ID bit, which is rare).
 */
export function killSetId (req: Request): KillSetId {
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

export class OpsContext {
  readonly nodes: Nodes
  /** Files the kernel opened without asking (FUSE_NO_OPEN_SUPPORT): requests with handle 0. */
  readonly byNode: OpenByNode
  readonly ttl: number
  /** The longest name the mount takes: Linux's NAME_MAX, or less if the real directory's filesystem takes less (so that what is written can be applied). */
  readonly nameMax: number
  /** What INIT agreed with the kernel. */
  negotiated = { minor: 0, flags: 0, flags2: 0 }

  /** attrsChanged: the kernel's cached attributes of this node must go (the daemon invalidates them). */
  constructor (readonly fs: Filesystem, readonly durability: Durability, rootIno: number, cfg: FuseConfig, readonly attrsChanged: (nodeid: number) => void) {
    this.nodes = new Nodes(rootIno)
    this.byNode = new OpenByNode(fs, this.nodes)
    this.ttl = cfg.cacheTimeout
    this.nameMax = cfg.nameMax
  }

  get ov (): Filesystem {
    return this.fs
  }

  /**
   * How long the kernel may keep attributes. Not at all for set-ID files: a write by another
   * user clears their bits in the overlay, and the kernel's copy must not show them until the
   * invalidation (sent from a worker, after the reply) lands. Such files are rare.
   */
  attrTtl (a: Attr): number {
    return a.mode & 0o6000 ? 0 : this.ttl
  }

  entry (c: Channel, r: Request, path: string, a: Attr): void {
    const node = this.nodes.remember(a.ino, path)
    putEntry(c.out, OUT_HEADER, node.id, 0, this.ttl, this.attrTtl(a), wire(a))
    c.send(r, ENTRY_OUT)
  }

  /** An entry reply for a new name, sent once the change is in the store (Session.durable). */
  created (c: Channel, r: Request, path: string, a: Attr): void {
    c.after(r, this.durability.durable(), () => {
      const node = this.nodes.remember(a.ino, path)
      putEntry(c.out, OUT_HEADER, node.id, 0, this.ttl, this.attrTtl(a), wire(a))
      return ENTRY_OUT
    })
  }

  /** An empty reply once the change is in the store. */
  done (c: Channel, r: Request): void {
    c.after(r, this.durability.durable(), () => 0)
  }

  attr (c: Channel, r: Request, a: Attr): void {
    putAttrOut(c.out, OUT_HEADER, this.attrTtl(a), wire(a))
    c.send(r, ATTR_OUT)
  }

  /** The kernel forgot count lookups of node id. */
  forget (id: number, count: number): void {
    if (this.nodes.forget(id, count)) this.byNode.forgotten(id)
  }

  childPath (r: Request, nameAt: number): { path: string, next: number } {
    const { s, next } = r.cstring(nameAt)
    checkName(s, this.nameMax)
    return { path: join(this.nodes.path(r.nodeid), s), next }
  }
}
