// POSIX access ACLs and the mode bits, kept in step as Linux filesystems keep them
// (posix_acl_update_mode, posix_acl_chmod): the mount stores system.posix_acl_access as an
// extended attribute, and the real filesystem it is applied to will derive the mode from it —
// so the mount must show the same mode, or apply and verify would disagree.
// The value's layout (linux/posix_acl_xattr.h): u32 version (2), then entries of
// { u16 tag, u16 perm, u32 id }, little endian.

export const ACL_ACCESS = 'system.posix_acl_access'
export const ACL_DEFAULT = 'system.posix_acl_default'

const VERSION = 2
const USER_OBJ = 0x01
const GROUP_OBJ = 0x04
const MASK = 0x10
const OTHER = 0x20

interface AclEntry { tag: number, perm: number, id: number }

function parse (v: Buffer): AclEntry[] | null {
  if (v.length < 4 || (v.length - 4) % 8 !== 0 || v.readUInt32LE(0) !== VERSION) return null
  const out: AclEntry[] = []
  for (let at = 4; at < v.length; at += 8) out.push({ tag: v.readUInt16LE(at), perm: v.readUInt16LE(at + 2), id: v.readUInt32LE(at + 4) })
  return out
}

function encode (entries: AclEntry[]): Buffer {
  const b = Buffer.alloc(4 + entries.length * 8)
  b.writeUInt32LE(VERSION, 0)
  entries.forEach((e, i) => {
    b.writeUInt16LE(e.tag, 4 + i * 8)
    b.writeUInt16LE(e.perm, 6 + i * 8)
    b.writeUInt32LE(e.id, 8 + i * 8)
  })
  return b
}

/**
 * Setting an access ACL: the permission bits it implies, and whether the ACL needs storing at
 * all (an ACL of only the three base entries is just the mode). null: not a valid ACL.
 */
export function modeFromAcl (mode: number, value: Buffer): { mode: number, keep: boolean } | null {
  const entries = parse(value)
  if (!entries) return null
  const perm = (tag: number) => entries.find(e => e.tag === tag)?.perm
  const user = perm(USER_OBJ)
  const group = perm(GROUP_OBJ)
  const other = perm(OTHER)
  if (user === undefined || group === undefined || other === undefined) return null
  const mask = perm(MASK)
  const bits = ((user & 7) << 6) | (((mask ?? group) & 7) << 3) | (other & 7)
  return { mode: (mode & ~0o777) | bits, keep: entries.length > 3 }
}

/** chmod with an access ACL: the ACL's owner, mask (or group) and other entries follow the mode. */
export function aclAfterChmod (value: Buffer, mode: number): Buffer {
  const entries = parse(value)
  if (!entries) return value
  const hasMask = entries.some(e => e.tag === MASK)
  for (const e of entries) {
    if (e.tag === USER_OBJ) e.perm = (mode >> 6) & 7
    else if (e.tag === (hasMask ? MASK : GROUP_OBJ)) e.perm = (mode >> 3) & 7
    else if (e.tag === OTHER) e.perm = mode & 7
  }
  return encode(entries)
}
