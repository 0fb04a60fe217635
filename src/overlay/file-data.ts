// File data: reads and writes through open handles, truncation, holes. Reads never copy up.
// A file is copied up on its first modification, in O(1): its new entry points at the lower
// file (`src`) and only the chunks later written are stored. Written chunks wait in the node's
// dirty buffers until the session flushes them into the chunk store.
import { fsError } from '../errors.js'
import { isZero, type ChunkStore } from '../store/chunks.js'
import { CHUNK_SIZE, MAX_FILE_SIZE, chunkCount, chunkLen, srcBytes, type FileEntry } from '../store/entries.js'
import type { KillSetId } from './attr.js'
import type { FileNode } from './file-node.js'
import type { HeadLayer } from './head-layer.js'
import type { OverlayHooks } from './hooks.js'
import type { Lookups } from './lookups.js'
import type { OpenFiles } from './open-files.js'
import { readEntry, type Lower, type SrcRead } from '../real/lower.js'
import { CAPABILITY, dropPrivileges } from './privileges.js'

export class FileData {
  constructor (
    private readonly layer: HeadLayer,
    private readonly files: OpenFiles,
    private readonly lookups: Lookups,
    private readonly lower: Lower,
    private readonly chunks: ChunkStore,
    private readonly hooks: OverlayHooks
  ) {}

  read (fh: number, buf: Buffer, len: number, pos: number): number {
    const node = this.files.live(this.files.handle(fh))
    const e = node.entry
    if (!e) return this.lower.read(node.lowerPath!, buf, 0, len, pos)
    return readEntry(e, this.chunks, buf, 0, len, pos, this.srcReader(e), node.dirty)
  }

  private srcReader (e: FileEntry): SrcRead | null {
    const src = e.src
    if (src === undefined) return null
    return (b, off, len, pos) => this.lower.read(src, b, off, len, pos)
  }

  /** The dirty buffer for chunk idx, loaded with the chunk's current bytes. */
  private dirtyChunk (node: FileNode, e: FileEntry, idx: number): Buffer {
    let d = node.dirty.get(idx)
    if (d) return d
    d = this.chunks.buffers.take()
    const start = idx * CHUNK_SIZE
    const len = start < e.size ? chunkLen(e.size, idx) : 0
    if (len > 0) readEntry(e, this.chunks, d, 0, len, start, this.srcReader(e))
    d.fill(0, len)
    node.dirty.set(idx, d)
    return d
  }

  /** A dirty buffer for chunk idx that the caller fills whole. */
  private wholeChunk (node: FileNode, idx: number): Buffer {
    const d = this.chunks.buffers.take()
    node.dirty.set(idx, d)
    return d
  }

  /** Chunk idx's dirty buffer is dropped (nothing else holds it): it is reused. */
  private dropDirty (node: FileNode, idx: number): void {
    const d = node.dirty.get(idx)
    if (!d) return
    node.dirty.delete(idx)
    this.chunks.buffers.give(d)
  }

  /** Writes all of buf; true when that cleared set-ID bits (so cached attributes are stale). */
  write (fh: number, buf: Buffer, len: number, pos: number, kill: KillSetId | null = null): boolean {
    const h = this.files.handle(fh)
    const node = this.files.live(h)
    if (!h.writable) throw fsError('EBADF', node.label)
    if (pos + len > MAX_FILE_SIZE) throw fsError('EFBIG', node.label)
    this.hooks.checkSpace(len)
    const e = this.layer.headFile(node)
    const modeChanged = (kill !== null || e.xattrs?.[CAPABILITY] !== undefined) && dropPrivileges(e, kill)
    const end = pos + len
    let done = 0
    while (done < len) {
      const at = pos + done
      const idx = Math.floor(at / CHUNK_SIZE)
      const within = at - idx * CHUNK_SIZE
      const n = Math.min(CHUNK_SIZE - within, len - done)
      // A whole chunk overwritten needs neither its old bytes nor zeros first.
      const d = n === CHUNK_SIZE && !node.dirty.has(idx) ? this.wholeChunk(node, idx) : this.dirtyChunk(node, e, idx)
      buf.copy(d, within, done, done + n)
      done += n
    }
    if (end > e.size) e.size = end
    this.layer.stamp(e, true)
    if (node.key) (this.hooks.onData ?? this.hooks.onChange)(node.key)
    return modeChanged
  }

  /**
   * Make [from, to) of e read as zeros, keeping the size: whole chunks become holes (no data,
   * O(1) each), the partial chunks at the ends are rewritten.
   */
  private zeroRange (node: FileNode, e: FileEntry, from: number, to: number): void {
    to = Math.min(to, e.size)
    if (from >= to) return
    const first = Math.floor(from / CHUNK_SIZE)
    const last = Math.floor((to - 1) / CHUNK_SIZE)
    const srcEnd = srcBytes(e)
    const whole = (idx: number): void => {
      this.dropDirty(node, idx)
      if (idx * CHUNK_SIZE < srcEnd) e.chunks.set(idx, null)
      else e.chunks.delete(idx)
    }
    if (first === last) {
      if (from % CHUNK_SIZE === 0 && (to % CHUNK_SIZE === 0 || to === e.size)) whole(first)
      else this.dirtyChunk(node, e, first).fill(0, from - first * CHUNK_SIZE, to - first * CHUNK_SIZE)
      return
    }
    if (from % CHUNK_SIZE === 0) whole(first)
    else this.dirtyChunk(node, e, first).fill(0, from - first * CHUNK_SIZE)
    if (to % CHUNK_SIZE === 0 || to === e.size) whole(last)
    else this.dirtyChunk(node, e, last).fill(0, 0, to - last * CHUNK_SIZE)
    // The chunks in between: only those that hold something need a change (a 10 TiB hole
    // in a sparse file costs what is stored there, not its length).
    const inner = (idx: number) => idx > first && idx < last
    for (const idx of [...e.chunks.keys(), ...node.dirty.keys()]) if (inner(idx)) whole(idx)
    const srcLast = Math.floor((srcEnd - 1) / CHUNK_SIZE)
    for (let idx = first + 1; idx < last && idx <= srcLast; idx++) whole(idx)
  }

  truncateNode (node: FileNode, size: number, kill: KillSetId | null = null): void {
    if (size > MAX_FILE_SIZE) throw fsError('EFBIG', node.label)
    const e = this.layer.headFile(node)
    dropPrivileges(e, kill)
    if (size < e.size) {
      // What lies past the new end is dropped, and the chunk holding the new end is cut, so
      // old bytes never reappear when the file grows again.
      const keep = chunkCount(size)
      const within = size % CHUNK_SIZE
      if (within !== 0 && (node.dirty.has(keep - 1) || e.chunks.get(keep - 1))) this.dirtyChunk(node, e, keep - 1).fill(0, within)
      for (const idx of [...e.chunks.keys()]) if (idx >= keep) e.chunks.delete(idx)
      for (const idx of [...node.dirty.keys()]) if (idx >= keep) this.dropDirty(node, idx)
      if (e.src !== undefined && (e.srcSize ?? 0) > size) e.srcSize = size
    } else {
      this.hooks.checkSpace(0)
    }
    e.size = size
    this.layer.stamp(e, true)
    if (node.key) this.hooks.onChange(node.key)
  }

  truncate (p: string, size: number, kill: KillSetId | null = null): void {
    const node = this.files.nodeFor(p)
    this.truncateNode(node, size, kill)
    if (node.opens === 0) {
      this.flushNode(node)
      if (node.key) this.layer.nodes.delete(node.key)
    }
  }

  ftruncate (fh: number, size: number): void {
    const h = this.files.handle(fh)
    this.truncateNode(this.files.live(h), size)
  }

  /**
   * fallocate(2): mode 0 grows the file (holes: cpfs stores nothing until data comes);
   * KEEP_SIZE alone changes nothing; PUNCH_HOLE (with KEEP_SIZE) and ZERO_RANGE make the
   * range read as zeros. Other modes (collapse, insert) are EOPNOTSUPP.
   */
  fallocate (fh: number, mode: number, offset: number, length: number): void {
    const KEEP_SIZE = 0x01
    const PUNCH_HOLE = 0x02
    const ZERO_RANGE = 0x10
    const h = this.files.handle(fh)
    const node = this.files.live(h)
    if (!h.writable) throw fsError('EBADF', node.label)
    if (mode & ~(KEEP_SIZE | PUNCH_HOLE | ZERO_RANGE)) throw fsError('ENOTSUP', node.label)
    if ((mode & PUNCH_HOLE) && !(mode & KEEP_SIZE)) throw fsError('EINVAL', node.label)
    if (offset < 0 || length <= 0) throw fsError('EINVAL', node.label)
    const end = offset + length
    if (end > MAX_FILE_SIZE) throw fsError('EFBIG', node.label)
    const e = this.layer.headFile(node)
    if (mode & (PUNCH_HOLE | ZERO_RANGE)) this.zeroRange(node, e, offset, end)
    if (!(mode & KEEP_SIZE) && end > e.size) e.size = end
    this.layer.stamp(e, true)
    if (node.key) this.hooks.onChange(node.key)
  }

  /**
   * lseek(2) SEEK_DATA / SEEK_HOLE at chunk granularity: stored chunks, unflushed ones and
   * lower bytes are data; everything else is a hole, and the end of the file is one too.
   * Returns -1 for "no data from here" (ENXIO).
   */
  lseek (fh: number, offset: number, whence: 'data' | 'hole'): number {
    const node = this.files.live(this.files.handle(fh))
    const size = node.entry ? node.entry.size : this.lookups.nodeAttr(node).size
    if (offset >= size) return -1
    if (!node.entry) return whence === 'data' ? offset : size // an untouched lower file: all data
    const e = node.entry
    const srcEnd = srcBytes(e)
    const isData = (idx: number) => node.dirty.has(idx) || Boolean(e.chunks.get(idx)) || (idx * CHUNK_SIZE < srcEnd && !e.chunks.has(idx))
    const idx = Math.floor(offset / CHUNK_SIZE)
    if (whence === 'data') {
      if (isData(idx)) return offset
      const cands = [...node.dirty.keys(), ...[...e.chunks].filter(([, r]) => r).map(([i]) => i)].filter(i => i > idx)
      if (srcEnd > 0) for (let i = idx + 1; i * CHUNK_SIZE < srcEnd; i++) if (isData(i)) { cands.push(i); break }
      if (cands.length === 0) return -1
      const at = Math.min(...cands) * CHUNK_SIZE
      return at < size ? at : -1
    }
    let i = idx
    while (i * CHUNK_SIZE < size && isData(i)) i++
    return i === idx ? offset : Math.min(size, i * CHUNK_SIZE)
  }

  /**
   * Hash the dirty chunks of a node into its entry (called by the session). Each chunk leaves
   * `dirty` as it is taken, before its buffer is given back or handed to the chunk store: if a
   * put throws (a LevelDB read failing), the chunks not yet taken stay dirty for the next try,
   * and no buffer is ever both dirty and reusable. `stored` collects the hashes put. Returns
   * true when a chunk hashed in replaced one the entry held (the file was rewritten in place),
   * other than the short last chunk of the last hashing, which an append extends: a writer of
   * 10,000-byte pieces (tar) leaves one at every dirty budget.
   */
  flushNode (node: FileNode, stored?: Buffer[]): boolean {
    const e = node.entry
    if (!e || node.dirty.size === 0) return false
    const srcEnd = srcBytes(e)
    const tail = node.hashedSize % CHUNK_SIZE !== 0 ? Math.floor(node.hashedSize / CHUNK_SIZE) : -1
    node.hashedSize = e.size
    let replaced = false
    for (const [idx, d] of node.dirty) {
      if (idx !== tail && e.chunks.get(idx)) replaced = true
      const valid = chunkLen(e.size, idx)
      const piece = d.subarray(0, valid)
      // A whole chunk's buffer is handed over, not copied; a shorter piece is copied, so its
      // 64 KiB buffer is not held for a few bytes.
      const handOver = valid === d.length
      if (valid === 0) {
        // past the end: nothing to keep
      } else if (isZero(piece)) {
        // A chunk of zeros is a hole: nothing stored (null where it must hide lower bytes).
        if (idx * CHUNK_SIZE < srcEnd) e.chunks.set(idx, null)
        else e.chunks.delete(idx)
      } else {
        const hash = this.chunks.put(piece, true, handOver)
        e.chunks.set(idx, hash)
        stored?.push(hash)
        if (handOver) {
          node.dirty.delete(idx) // its buffer is the chunk store's now
          continue
        }
      }
      node.dirty.delete(idx)
      this.chunks.buffers.give(d)
    }
    return replaced
  }
}
