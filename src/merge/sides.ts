// What one side of a merge holds at a path: its kind, permission bits, symlink target, how many
// names it has, and (read on demand, once) a file's bytes. The three sides — base, theirs and
// ours — are Views over the same lower; each reads its files through a Reader, because ours is
// the live overlay, whose open files may hold written data that no entry has yet.
import * as fs from 'node:fs'
import { isLinked, resolvedType, type Resolved, type View } from '../overlay/view.js'
import type { Overlay } from '../overlay/overlay.js'
import { readEntry } from '../real/lower.js'
import type { ChunkStore } from '../store/chunks.js'
import type { FileEntry, Kind, NodeEntry } from '../store/entries.js'

/** The bytes of the file p resolves to as r. */
export type Reader = (p: string, r: Resolved) => Buffer

export interface State {
  kind: Kind
  /** Permission bits (a symlink's are not compared: Linux ignores them). */
  mode: number
  target?: string
  fmt?: number
  rdev?: number
  size: number
  /** Names the inode has (hard links): more than one is refused. */
  names: number
  r: Resolved
}

/** One side: a view and how its files are read, with a cache of what was read. */
export class Side {
  private readonly bytesOf = new Map<string, Buffer>()
  private readonly states = new Map<string, State | null>()

  /**
   * `refsCurrent(p)`: do p's entry's chunk references say what it holds? Not for a live file
   * open with written data not hashed in yet: its bytes are read then.
   */
  constructor (readonly view: View, private readonly reader: Reader, readonly refsCurrent: (p: string) => boolean = () => true) {}

  state (p: string): State | null {
    let s = this.states.get(p)
    if (s === undefined) this.states.set(p, s = stateOf(this.view, p))
    return s
  }

  bytes (p: string): Buffer {
    let b = this.bytesOf.get(p)
    if (b === undefined) {
      const s = this.state(p)
      this.bytesOf.set(p, b = s && s.kind === 'f' ? this.reader(p, s.r) : Buffer.alloc(0))
    }
    return b
  }
}

function stateOf (v: View, p: string): State | null {
  const r = v.resolve(p)
  if (!r) return null
  const kind = resolvedType(r)
  const e = r.kind === 'upper' ? r.entry : r.stat
  const s: State = { kind, mode: e.mode & 0o7777, size: 0, names: 1, r }
  if (isLinked(r)) s.names = r.kind === 'upper' ? r.entry.links ?? 1 : 'nlink' in r.stat ? r.stat.nlink : r.stat.links ?? 1
  if (kind === 'f') s.size = r.kind === 'upper' ? (r.entry as FileEntry).size : (r.stat as { size: number }).size
  if (kind === 'l') s.target = r.kind === 'upper' ? (r.entry as { target: string }).target : 'nlink' in r.stat ? v.lower.readlink(r.lowerPath) : (r.stat as unknown as { target: string }).target
  if (kind === 'n') {
    const n = r.kind === 'upper' ? r.entry as NodeEntry : r.stat as any
    s.fmt = 'nlink' in n ? n.mode & 0o170000 : n.fmt
    s.rdev = n.rdev
  }
  return s
}

/** A sealed view's file bytes: its entry's chunks and lower ranges, or the lower file. */
export function viewReader (v: View, chunks: ChunkStore): Reader {
  return (_p, r) => {
    const size = r.kind === 'upper' ? (r.entry as FileEntry).size : (r.stat as { size: number }).size
    const buf = Buffer.alloc(size)
    if (r.kind === 'lower' && 'nlink' in r.stat) {
      v.lower.read(r.lowerPath, buf, 0, size, 0)
      return buf
    }
    const e = (r.kind === 'upper' ? r.entry : r.stat) as FileEntry
    const src = e.src
    readEntry(e, chunks, buf, 0, e.size, 0, src === undefined ? null : (b, off, len, pos) => v.lower.read(src, b, off, len, pos))
    return buf
  }
}

/**
 * The live overlay's file bytes, read as a process would (open, read, release): data written
 * to a file that is still open is in its node, not yet in its entry.
 */
export function overlayReader (ov: Overlay): Reader {
  return (p) => {
    const fh = ov.open(p, fs.constants.O_RDONLY)
    try {
      const size = ov.fgetattr(fh, p).size
      const buf = Buffer.alloc(size)
      for (let done = 0; done < size;) {
        const n = ov.read(fh, buf.subarray(done), size - done, done)
        if (n <= 0) return buf.subarray(0, done)
        done += n
      }
      return buf
    } finally {
      ov.release(fh)
    }
  }
}

/** Do two file states surely hold the same bytes without reading them (the same chunk references)? */
export function sameRefs (a: State, b: State): boolean {
  if (a.r.kind !== 'upper' || b.r.kind !== 'upper') return a.r.kind === 'lower' && b.r.kind === 'lower' && a.r.lowerPath === b.r.lowerPath && a.r.stat === b.r.stat
  if (a.r.entry === b.r.entry) return true
  const x = a.r.entry as FileEntry
  const y = b.r.entry as FileEntry
  if (x.size !== y.size || x.src !== y.src || x.srcSize !== y.srcSize || x.chunks.size !== y.chunks.size) return false
  for (const [i, c] of x.chunks) {
    const d = y.chunks.get(i)
    if (d === undefined || (c === null) !== (d === null) || (c !== null && !c.equals(d!))) return false
  }
  return true
}
