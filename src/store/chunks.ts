// The chunk store: file data in content-addressed pieces of CHUNK_SIZE bytes, keyed by
// SHA-256, shared by every layer and file that holds the same bytes. A chunk's bytes are
// appended to a pack file (packs.ts) when its batch is made, before the batch is logged or
// handed to LevelDB; the batch carries only where they are (r<hex>), atomically with the
// entries that first reference them. So a crash can leave unreferenced bytes in a pack
// (collected later) but never a reference without its bytes.
import { createHash } from 'node:crypto'
import { CpfsError } from '../errors.js'
import { CHUNK_SIZE } from './entries.js'
import { refKey, type BatchOp } from './keys.js'
import { encodeRef, type Store } from './store.js'
import type { ChunkRef } from './pack-format.js'
import { ChunkBuffers } from './chunk-buffers.js'
import { readRemoteChunk } from './remote-chunks.js'

export function hashChunk (data: Buffer): Buffer {
  return createHash('sha256').update(data).digest()
}

// Hashes that files keep (every chunk of every head file) are slices of shared slabs: a digest
// of its own is a typed array, an ArrayBuffer and a backing store of 32 bytes, ~250 bytes in
// all, for each of the 10,000s of chunks a build writes.
const SLAB_HASHES = 128
let slab = Buffer.allocUnsafeSlow(32 * SLAB_HASHES)
let slabUsed = 0

/**
 * Hex names of kept hashes, by the hash's Buffer: one string per chunk, shared by every map that
 * names it (the chunk store's, HeadChunks'), and not encoded again each time a file being
 * written is persisted (a 256 MiB file: 4,096 names a batch, which hex-encoding anew took a
 * visible share of the daemon's time).
 */
const hexNames = new WeakMap<Buffer, string>()

export function hexName (h: Buffer): string {
  let hex = hexNames.get(h)
  if (hex === undefined) hexNames.set(h, hex = h.toString('hex'))
  return hex
}

/** A copy of hash h in a shared slab (never written again: slices are read-only by use). */
function keptHash (h: Buffer): Buffer {
  if (slabUsed === SLAB_HASHES) {
    slab = Buffer.allocUnsafeSlow(32 * SLAB_HASHES)
    slabUsed = 0
  }
  const out = slab.subarray(slabUsed * 32, ++slabUsed * 32)
  h.copy(out)
  return out
}

const ZEROS = Buffer.alloc(CHUNK_SIZE)

/** A copy in memory of its own: a small Buffer.from() is a slice of an 8 KiB pool it would keep whole. */
function ownCopy (data: Buffer): Buffer {
  const own = Buffer.allocUnsafeSlow(data.length)
  data.copy(own)
  return own
}

/** All bytes zero? (memcmp against zeros, a chunk at a time.) */
export function isZero (b: Buffer): boolean {
  for (let at = 0; at < b.length; at += CHUNK_SIZE) {
    const piece = b.subarray(at, Math.min(b.length, at + CHUNK_SIZE))
    if (!piece.equals(ZEROS.subarray(0, piece.length))) return false
  }
  return true
}

const CACHE_BYTES = 64 * 1024 * 1024
/** How many chunks read once the store remembers, to cache them if read again. */
const READ_ONCE_KEPT = 2048
/** Marks a freed chunk's hash among the hashes drain returns (its delete is in that batch). */
const DELETED = '-'
/** After a freed chunk's hash (DELETED), the pack its bytes are in. */
const PACK_SEP = '@'

export class ChunkStore {
  private readonly store: Store
  /** Chunks queued for the next batch; readable before they reach LevelDB. */
  private readonly pending = new Map<string, Buffer>()
  /**
   * Chunks whose references are in a batch that has not reached LevelDB (or failed and waits
   * to be retried): read from their pack through this, whatever the read cache has let go.
   */
  private readonly flying = new Map<string, { ref: ChunkRef, batches: number }>()
  /** Packs of the head-only chunks written (a freed one makes its pack's bytes dead). */
  private readonly headPacks = new Map<string, number>()
  /**
   * Chunks freed (`free`) whose delete has not reached LevelDB yet, with the number of such
   * deletes in flight: LevelDB still answers for them, but a put of the same bytes must store
   * them again, or the delete landing after it would take the new file's data with it.
   */
  private readonly deleting = new Map<string, number>()
  /** Freed since the last drain: their deletes travel in the batch drain fills (as DELETED + hash). */
  private freedUndrained: string[] = []
  /** Hashes known to be in LevelDB (written or read this session). */
  private readonly known = new Set<string>()
  private readonly cache = new Map<string, Buffer>()
  /** Where withBytes reads chunks from their packs (`admit` caches copies of their own). */
  private readonly scratch = Buffer.allocUnsafeSlow(CHUNK_SIZE)
  private scratchInUse = false
  /** Chunks read from the store once lately, not cached yet (admit). */
  private readonly readOnce = new Set<string>()
  private cacheBytes = 0
  /** The read cache's budget (memory.ts: chunkCache). */
  private readonly cacheLimit: number
  /** Written chunks' buffers, reused (chunk-buffers.ts): the overlay takes them, drain gives them back. */
  readonly buffers: ChunkBuffers
  /** Queued chunks whose buffer came from `buffers` (handed over by put with owned). */
  private readonly pooled = new Set<string>()

  constructor (store: Store, cacheLimit = CACHE_BYTES, dirtyBytes = 8 * 1024 * 1024) {
    this.store = store
    this.cacheLimit = cacheLimit
    this.buffers = new ChunkBuffers(dirtyBytes)
  }

  /** Whether a read of a lazy clone's chunk may fetch it from the remote (withoutFetching). */
  private fetching = true

  /**
   * Run `fn` (synchronous: nothing else runs meanwhile, a FUSE read included) with reads that
   * never fetch: a chunk a lazy clone has not fetched yet is a NOT_FETCHED error instead.
   */
  withoutFetching<T> (fn: () => T): T {
    const was = this.fetching
    this.fetching = false
    try {
      return fn()
    } finally {
      this.fetching = was
    }
  }

  /** Bytes in the read cache. */
  get cachedBytes (): number {
    return this.cacheBytes
  }

  /**
   * Chunks first stored for the head turn's files (`put(data, true)`) that nothing else has
   * referenced since: if the head stops referencing them (the file is deleted, overwritten or
   * truncated before the turn is sealed), they can be deleted again (see `free`). Any other put
   * of the same bytes — a base capture, a plan, a sealed layer — pins the chunk.
   */
  readonly headOnly = new Set<string>()

  /**
   * Hash `data`, queue it unless already stored, and return the hash. `owned`: the caller
   * gives up a buffer it took from `buffers` (it never touches it again): it is queued without
   * a copy, and goes back to `buffers` once its bytes are in a pack.
   */
  put (data: Buffer, forHead = false, owned = false): Buffer {
    const hash = keptHash(hashChunk(data))
    const hex = hexName(hash)
    if (this.pending.has(hex) || this.known.has(hex)) {
      if (!forHead) this.headOnly.delete(hex)
      if (owned) this.buffers.give(data)
      return hash
    }
    if (!this.deleting.has(hex) && this.store.hasChunk(hex)) {
      this.known.add(hex)
      this.headOnly.delete(hex)
      if (owned) this.buffers.give(data)
      return hash
    }
    // Copy: callers reuse their buffers.
    this.pending.set(hex, owned ? data : ownCopy(data))
    if (owned) this.pooled.add(hex)
    if (forHead) this.headOnly.add(hex)
    return hash
  }

  /**
   * Something beside the head now refers to chunk `hex` (a sandboxed run's import, a view of
   * the head as it is now): pin it, so that the head dropping it can no longer delete it.
   * False when it must be put again: absent, or its deletion is under way (a put re-queues it
   * behind that deletion).
   */
  pin (hex: string): boolean {
    if (this.deleting.has(hex)) return false
    if (!this.pending.has(hex) && !this.known.has(hex) && !this.store.hasChunk(hex)) return false
    this.headOnly.delete(hex)
    return true
  }

  /** Every chunk is pinned now (the head turn was sealed: its chunks belong to history). */
  pinAll (): void {
    this.headOnly.clear()
    this.headPacks.clear()
  }

  /**
   * Forget a head-only chunk nothing references any more: dropped before it was written, or
   * deleted in `ops`. Returns the bytes freed.
   */
  free (hex: string, ops: BatchOp[]): number {
    if (!this.headOnly.delete(hex)) return 0
    const queued = this.pending.get(hex)
    const bytes = queued?.length ?? this.cache.get(hex)?.length ?? CHUNK_SIZE
    if (queued) {
      this.pending.delete(hex)
      if (this.pooled.delete(hex)) this.buffers.give(queued)
    } else {
      ops.push({ type: 'del', key: refKey(hex) })
      // Its pack learns of it when the delete lands (landed): only then may the pack go.
      const pack = this.headPacks.get(hex)
      this.headPacks.delete(hex)
      this.deleting.set(hex, (this.deleting.get(hex) ?? 0) + 1)
      this.freedUndrained.push(DELETED + hex + (pack !== undefined ? PACK_SEP + String(pack) : ''))
    }
    this.known.delete(hex)
    const cached = this.cache.get(hex)
    if (cached) {
      this.cacheBytes -= cached.length
      this.cache.delete(hex)
    }
    return bytes
  }

  /**
   * The chunk's bytes. Callers use them before they next yield and keep no reference: a
   * queued chunk's buffer is reused once drained (chunk-buffers.ts).
   */
  get (hash: Buffer): Buffer {
    return this.load(hash)
  }

  /**
   * `use(bytes)` with the chunk's bytes, valid only inside `use`: a chunk read from its pack is
   * read into one buffer the next such read reuses. The request path (readEntry) reads
   * thousands a second, and a new buffer each was external memory V8 frees late (a mocha run
   * over a fresh node_modules left ~9 MB of them). A read inside `use` gets a buffer of its own.
   */
  withBytes<T> (hash: Buffer, use: (bytes: Buffer) => T): T {
    if (this.scratchInUse) return use(this.load(hash))
    this.scratchInUse = true
    try {
      return use(this.load(hash, this.scratch))
    } finally {
      this.scratchInUse = false
    }
  }

  /** The chunk's bytes, read from its pack into `into` (when given) on a miss. */
  private load (hash: Buffer, into?: Buffer): Buffer {
    const hex = hexName(hash)
    const p = this.pending.get(hex) ?? this.cache.get(hex)
    if (p) return p
    const flying = this.flying.get(hex)?.ref
    let raw: Buffer | undefined
    try {
      raw = flying ? this.store.packs.read(flying, into) : this.store.readChunk(hex, into)
    } catch (err: any) {
      if (err?.code !== 'ENOENT' && err?.code !== 'STORE_CORRUPT') throw err
      raw = undefined
    }
    // A lazy clone's older chunks: fetched from the remote (remote-chunks.ts), checked below.
    raw ??= readRemoteChunk(this.store, hex, this.fetching)
    if (raw === undefined) {
      throw new CpfsError('STORE_CORRUPT', `chunk ${hex} is missing from store ${this.store.path}`, `run cpfs fsck ${this.store.workspaceHint()} to see what is lost`)
    }
    // Bytes from disk are checked against their name before anyone sees them: a flipped bit
    // in a pack or a LevelDB table must be an error (EIO in the mount), never wrong data. Chunks in the
    // caches above were checked (or hashed when put) already.
    if (!hashChunk(raw).equals(hash)) {
      throw new CpfsError('STORE_CORRUPT', `chunk ${hex} in store ${this.store.path} is damaged (its bytes do not match their SHA-256)`, `run cpfs fsck ${this.store.workspaceHint()} to see what is lost`)
    }
    this.known.add(hex)
    this.admit(hex, raw)
    return raw
  }

  /**
   * Cache a chunk read from the store on its second read, not its first. The kernel's page cache
   * answers re-reads of a file; what reaches cpfs twice is a chunk read in pieces (small or
   * random reads, mmap). A chunk read once and cached was garbage once pushed out, and it had
   * lived long enough for V8 to collect it only in a full collection: a cold `grep -r` of a
   * freshly installed node_modules left 13 MB of such buffers waiting (docs/decisions.md,
   * "Daemon memory, third pass").
   */
  private admit (hex: string, raw: Buffer): void {
    if (this.readOnce.delete(hex)) return this.remember(hex, raw)
    this.readOnce.add(hex)
    if (this.readOnce.size > READ_ONCE_KEPT) this.readOnce.delete(this.readOnce.values().next().value as string)
  }

  /**
   * Write queued chunks to the open pack and put their references into `ops`: in flight until
   * `landed` is called with the returned hashes (once LevelDB has the batch), and readable all
   * the while. The hashes include the chunks freed into the same batch, whose deletes are in
   * flight as well. `bytes`: what the references take in the batch (the chunk bytes are on
   * their way to the disk already).
   */
  drain (ops: BatchOp[]): { bytes: number, hexes: string[] } {
    // Every append first: one that fails (a full disk) throws with nothing changed here, every
    // chunk still queued (what was appended before it is unreferenced, garbage for gc).
    const refs: ChunkRef[] = this.store.packs.appendAll([...this.pending].map(([hex, data]) => [Buffer.from(hex, 'hex'), data]))
    let bytes = 0
    const hexes: string[] = this.freedUndrained
    this.freedUndrained = []
    let i = 0
    for (const [hex, data] of this.pending) {
      const ref = refs[i++]
      const value = encodeRef(ref)
      ops.push({ type: 'put', key: refKey(hex), value })
      bytes += value.length + hex.length + 1
      hexes.push(hex)
      this.known.add(hex)
      if (this.headOnly.has(hex)) this.headPacks.set(hex, ref.pack)
      const f = this.flying.get(hex)
      if (f) { f.batches++; f.ref = ref } // put again (freed meanwhile): in flight until its last batch lands
      else this.flying.set(hex, { ref, batches: 1 })
      // A written chunk is not cached: its bytes are in the pack (and in the kernel's page
      // cache, which answers re-reads before cpfs is asked). A whole chunk's buffer is reused.
      if (this.pooled.delete(hex)) this.buffers.give(data)
    }
    this.pending.clear()
    return { bytes, hexes }
  }

  /** The batch holding these drained chunks is in LevelDB. */
  landed (hexes: string[]): void {
    for (const h of hexes) {
      // Counted, not just removed: the same chunk may be in several batches in flight (put,
      // freed, put again), and only the last to land ends its state.
      const deleted = h.startsWith(DELETED)
      const [hex, pack] = deleted ? h.slice(DELETED.length).split(PACK_SEP) : [h]
      if (deleted) {
        if (pack !== undefined) this.store.packs.noteFreed(Number(pack))
        const n = (this.deleting.get(hex) ?? 1) - 1
        if (n > 0) this.deleting.set(hex, n)
        else this.deleting.delete(hex)
      } else {
        const f = this.flying.get(hex)
        if (f && --f.batches === 0) this.flying.delete(hex)
      }
    }
  }

  pendingBytes (): number {
    let n = 0
    for (const d of this.pending.values()) n += d.length
    return n
  }

  /** Cache a copy of `data` (read into the scratch buffer, or an 8 KiB pool's slice: never kept as it is). */
  private remember (hex: string, data: Buffer): void {
    if (data.length > CHUNK_SIZE || this.cacheLimit === 0) return
    if (this.cache.has(hex)) return
    data = ownCopy(data)
    this.cache.set(hex, data)
    this.cacheBytes += data.length
    while (this.cacheBytes > this.cacheLimit) {
      const first = this.cache.keys().next().value as string
      this.cacheBytes -= this.cache.get(first)!.length
      this.cache.delete(first)
    }
  }
}
