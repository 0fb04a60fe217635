// Git's index (.git/index) as far as telling a refresh from a change: read-only git commands
// (`git status`, `git diff`) rewrite the index to refresh the stat data it caches for each
// file, and its cache extensions, without changing what is staged. cpfs must not take that for
// an edit made outside it (an offline rewind then refused until --force, in every repository).
//
// Written from git's documentation of the format (gitformat-index): a 12-byte header ("DIRC",
// version 2, 3 or 4, entry count), the entries, extensions (4-byte signature, 4-byte size,
// data), and a trailing hash of everything before it (SHA-1, or SHA-256 in a SHA-256
// repository; the object ids in entries have the same length).
import { createHash } from 'node:crypto'

/** What an index stages: per entry, the mode, object id, flags and path. */
interface Staged {
  version: number
  entries: Buffer[]
  /** Extensions that carry meaning (not caches), as they are. */
  kept: Buffer[]
  /** The staged paths, relative to the repository's top. */
  paths: string[]
}

/**
 * Extensions that only cache what can be computed again: the cache tree, the untracked cache,
 * the fsmonitor token, and the offset tables that speed up loading. Any other extension (split
 * index, resolve-undo, sparse directories, and those not known yet) must be equal.
 */
const CACHES = new Set(['TREE', 'UNTR', 'FSMN', 'EOIE', 'IEOT'])

/** True when a and b are git indexes that stage exactly the same things. */
export function sameStaged (a: Buffer, b: Buffer): boolean {
  const x = parse(a)
  const y = parse(b)
  if (!x || !y || x.version !== y.version || x.entries.length !== y.entries.length || x.kept.length !== y.kept.length) return false
  for (let i = 0; i < x.entries.length; i++) if (!x.entries[i].equals(y.entries[i])) return false
  for (let i = 0; i < x.kept.length; i++) if (!x.kept[i].equals(y.kept[i])) return false
  return true
}

/** The paths an index stages (git's tracked files, relative to the repository), or null for what is not an index. */
export function stagedPaths (buf: Buffer): Set<string> | null {
  const x = parse(buf)
  return x ? new Set(x.paths) : null
}

function parse (buf: Buffer): Staged | null {
  for (const [algo, len] of [['sha1', 20], ['sha256', 32]] as const) {
    if (buf.length < 12 + len) continue
    const body = buf.subarray(0, buf.length - len)
    if (!createHash(algo).update(body).digest().equals(buf.subarray(buf.length - len))) continue
    try {
      return parseBody(body, len)
    } catch {
      return null
    }
  }
  return null
}

function parseBody (b: Buffer, oidLen: number): Staged | null {
  if (b.toString('latin1', 0, 4) !== 'DIRC') return null
  const version = b.readUInt32BE(4)
  if (version < 2 || version > 4) return null
  const count = b.readUInt32BE(8)
  const entries: Buffer[] = []
  const paths: string[] = []
  let at = 12
  let prev: Buffer = Buffer.alloc(0)
  for (let i = 0; i < count; i++) {
    const start = at
    // ctime, mtime (sec, nsec each), dev, ino: the stat data a refresh rewrites; skipped.
    const mode = b.subarray(start + 24, start + 28)
    // uid, gid, size: stat data too.
    const oid = b.subarray(start + 40, start + 40 + oidLen)
    at = start + 40 + oidLen
    const flags = b.readUInt16BE(at)
    at += 2
    let extended: Buffer = Buffer.alloc(0)
    if (flags & 0x4000) {
      if (version < 3) return null
      extended = b.subarray(at, at + 2)
      at += 2
    }
    let path: Buffer
    if (version === 4) {
      // The path is the previous one less N trailing bytes, then this entry's NUL-ended suffix.
      const [strip, next] = varint(b, at)
      const end = b.indexOf(0, next)
      if (end < 0 || strip > prev.length) return null
      path = Buffer.concat([prev.subarray(0, prev.length - strip), b.subarray(next, end)])
      at = end + 1
    } else {
      const end = b.indexOf(0, at)
      if (end < 0) return null
      path = b.subarray(at, end)
      // NUL padding up to a multiple of 8 bytes, counted from the entry's start (1 to 8 NULs).
      at = start + Math.ceil((end - start + 1) / 8) * 8
    }
    if (at > b.length) return null
    prev = path
    paths.push(path.toString('utf8'))
    const flagBytes = Buffer.alloc(2)
    flagBytes.writeUInt16BE(flags)
    entries.push(Buffer.concat([mode, oid, flagBytes, extended, path]))
  }
  const kept: Buffer[] = []
  while (at < b.length) {
    if (at + 8 > b.length) return null
    const sig = b.toString('latin1', at, at + 4)
    const size = b.readUInt32BE(at + 4)
    const end = at + 8 + size
    if (end > b.length) return null
    if (!CACHES.has(sig)) kept.push(b.subarray(at, end))
    at = end
  }
  return { version, entries, kept, paths }
}

/** Git's offset varint (gitformat-index, version 4): 7 bits a byte, high bit "more", +1 per continuation. */
function varint (b: Buffer, at: number): [number, number] {
  let c = b[at++]
  let v = c & 0x7f
  while (c & 0x80) {
    c = b[at++]
    v = ((v + 1) << 7) | (c & 0x7f)
  }
  return [v, at]
}
