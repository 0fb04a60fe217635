// Metadata changes: SETATTR (mode, owner, times; size by truncation) and extended attributes.
// They live together because the access ACL and the mode bits are one thing seen twice: chmod
// rewrites the ACL, and setting the ACL rewrites the mode.
import { fsError } from '../errors.js'
import { now, setTime, type LiveEntry } from '../store/entries.js'
import { ACL_ACCESS, aclAfterChmod, modeFromAcl } from './acl.js'
import type { Attr, SetAttr } from './attr.js'
import type { FileData } from './file-data.js'
import type { HeadLayer } from './head-layer.js'
import type { OverlayHooks } from './hooks.js'
import type { Lookups } from './lookups.js'
import type { OpenFiles } from './open-files.js'
import type { Lower } from '../real/lower.js'
import { dropPrivileges } from './privileges.js'

// Linux's limits for extended attributes (limits.h: XATTR_NAME_MAX, XATTR_SIZE_MAX, XATTR_LIST_MAX).
const XATTR_NAME_MAX = 255
const XATTR_SIZE_MAX = 65536
const XATTR_LIST_MAX = 65536

export class Metadata {
  constructor (
    private readonly layer: HeadLayer,
    private readonly files: OpenFiles,
    private readonly data: FileData,
    private readonly lookups: Lookups,
    private readonly lower: Lower,
    private readonly hooks: OverlayHooks
  ) {}

  /**
   * chmod, chown, truncate and utimens in one step (a FUSE SETATTR): `p` names the file, or
   * `fh` the open handle it goes through (ftruncate, and files whose name is gone).
   */
  setattr (p: string | null, fh: number | null, s: SetAttr): Attr {
    const h = fh !== null ? this.files.find(fh) : undefined
    const node = h ? this.files.live(h) : null
    const kill = s.killSuidGid ?? null
    if (s.size !== undefined) {
      if (node) this.data.truncateNode(node, s.size, kill)
      else if (p !== null) this.data.truncate(p, s.size, kill)
    }
    const meta = s.mode !== undefined || s.uid !== undefined || s.gid !== undefined || s.atime || s.mtime || s.ctime ||
      (kill !== null && s.size === undefined)
    if (meta) {
      let key: string | null
      let e: LiveEntry
      if (node) {
        e = this.layer.headFile(node)
        key = node.key
      } else {
        ({ e, key } = this.layer.headState(p!))
      }
      const t = now()
      // chown drops capabilities and set-ID bits first; an explicit mode in the same call wins.
      if (s.uid !== undefined || s.gid !== undefined || (kill !== null && s.size === undefined)) dropPrivileges(e, kill)
      if (s.mode !== undefined) {
        e.mode = s.mode & 0o7777
        const acl = e.xattrs?.[ACL_ACCESS]
        if (acl) e.xattrs = { ...e.xattrs, [ACL_ACCESS]: aclAfterChmod(acl, e.mode) }
      }
      if (s.uid !== undefined) e.uid = s.uid
      if (s.gid !== undefined) e.gid = s.gid
      if (s.atime) setTime(e, 'a', s.atime === 'now' ? t : s.atime)
      if (s.mtime) setTime(e, 'm', s.mtime === 'now' ? t : s.mtime)
      setTime(e, 'c', s.ctime ?? t)
      if (key) this.hooks.onChange(key)
    }
    if (node) return this.lookups.nodeAttr(node)
    return this.lookups.getattr(p!)
  }

  // ---- extended attributes ----------------------------------------------------------------
  // Kept with each entry (copied from the lower at copy-up), so they are captured per turn,
  // rewound and applied like modes. The kernel checks the namespaces (user.* only on files and
  // directories, trusted.* for root); POSIX ACLs are system.posix_acl_* values, stored and
  // applied as they are (the mount checks mode bits, not ACLs).

  private xattrsOf (p: string): Record<string, Buffer> | undefined {
    const r = this.layer.resolve(p)
    if (r.kind === 'upper') return r.entry.xattrs
    return 'nlink' in r.stat ? this.lower.xattrs(r.lowerPath) : r.stat.xattrs
  }

  getxattr (p: string, name: string): Buffer {
    const v = this.xattr(p, name)
    if (!v) throw fsError('ENODATA', p, name)
    return v
  }

  /** The value of attribute `name` of p, or undefined when p has no such attribute. */
  xattr (p: string, name: string): Buffer | undefined {
    return this.xattrsOf(p)?.[name]
  }

  listxattr (p: string): string[] {
    return Object.keys(this.xattrsOf(p) ?? {})
  }

  setxattr (p: string, name: string, value: Buffer, flags: { create?: boolean, replace?: boolean } = {}): void {
    if (Buffer.byteLength(name) > XATTR_NAME_MAX || name.length === 0) throw fsError('ERANGE', p, 'attribute name too long')
    if (value.length > XATTR_SIZE_MAX) throw fsError('E2BIG', p, 'attribute value too large')
    const had = this.xattrsOf(p)?.[name] !== undefined
    if (flags.create && had) throw fsError('EEXIST', p, name)
    if (flags.replace && !had) throw fsError('ENODATA', p, name)
    const total = Object.entries(this.xattrsOf(p) ?? {}).reduce((n, [k, v]) => k === name ? n : n + k.length + 1 + v.length, 0)
    if (total + name.length + 1 + value.length > XATTR_LIST_MAX) throw fsError('ENOSPC', p, 'no room for more attributes')
    let keep = true
    let mode: number | undefined
    if (name === ACL_ACCESS) {
      const m = modeFromAcl(this.lookups.getattr(p).mode, value)
      if (!m) throw fsError('EINVAL', p, 'not a valid access ACL')
      mode = m.mode
      keep = m.keep
    }
    this.hooks.checkSpace(value.length)
    const { e, key } = this.layer.headState(p)
    const x = { ...e.xattrs, [name]: Buffer.from(value) }
    // An ACL that says no more than the mode bits is stored as the mode (as ext4 does).
    if (!keep) delete x[name]
    if (Object.keys(x).length) e.xattrs = x
    else delete e.xattrs
    if (mode !== undefined) e.mode = mode & 0o7777
    this.layer.stamp(e, false)
    this.hooks.onChange(key)
  }

  removexattr (p: string, name: string): void {
    if (this.xattrsOf(p)?.[name] === undefined) throw fsError('ENODATA', p, name)
    const { e, key } = this.layer.headState(p)
    const x = { ...e.xattrs }
    delete x[name]
    if (Object.keys(x).length) e.xattrs = x
    else delete e.xattrs
    this.layer.stamp(e, false)
    this.hooks.onChange(key)
  }
}
