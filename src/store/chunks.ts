// The chunk store: file data in content-addressed pieces of CHUNK_SIZE bytes, keyed by
// SHA-256, shared by every layer and file that holds the same bytes. Chunks are written
// inside the same atomic batch as the entries that first reference them, so a crash can
// leave an unreferenced chunk (collected later) but never a reference without its chunk.
import { createHash } from 'node:crypto'
import { CpfsError } from '../errors.js'
import { CHUNK_SIZE } from './entries.js'
import { chunkKey, type BatchOp } from './keys.js'
import type { Store } from './store.js'

export function hashChunk (data: Buffer): Buffer {
  return createHash('sha256').update(data).digest()
}

const CACHE_BYTES = 64 * 1024 * 1024

export class ChunkStore {
  private readonly store: Store
  /** Chunks queued for the next batch; readable before they reach LevelDB. */
  private readonly pending = new Map<string, Buffer>()
  /** Hashes known to be in LevelDB (written or read this session). */
  private readonly known = new Set<string>()
  private readonly cache = new Map<string, Buffer>()
  private cacheBytes = 0

  constructor (store: Store) {
    this.store = store
  }

  /** Hash `data`, queue it unless already stored, and return the hash. */
  put (data: Buffer): Buffer {
    const hash = hashChunk(data)
    const hex = hash.toString('hex')
    if (this.pending.has(hex) || this.known.has(hex)) return hash
    if (this.store.getSync(chunkKey(hex)) !== undefined) {
      this.known.add(hex)
      return hash
    }
    // Copy: callers reuse their buffers.
    this.pending.set(hex, Buffer.from(data))
    return hash
  }

  get (hash: Buffer): Buffer {
    const hex = hash.toString('hex')
    const p = this.pending.get(hex) ?? this.cache.get(hex)
    if (p) return p
    const raw = this.store.getSync(chunkKey(hex))
    if (raw === undefined) {
      throw new CpfsError('STORE_CORRUPT', `chunk ${hex} is missing from the store`, 'the store is damaged; restore it from a backup')
    }
    this.known.add(hex)
    this.remember(hex, raw)
    return raw
  }

  /** Move queued chunks into `ops` (they are then in flight; still readable via cache). */
  drain (ops: BatchOp[]): number {
    let bytes = 0
    for (const [hex, data] of this.pending) {
      ops.push({ type: 'put', key: chunkKey(hex), value: data })
      bytes += data.length
      this.known.add(hex)
      this.remember(hex, data)
    }
    this.pending.clear()
    return bytes
  }

  pendingBytes (): number {
    let n = 0
    for (const d of this.pending.values()) n += d.length
    return n
  }

  private remember (hex: string, data: Buffer): void {
    if (data.length > CHUNK_SIZE) return
    if (this.cache.has(hex)) return
    this.cache.set(hex, data)
    this.cacheBytes += data.length
    while (this.cacheBytes > CACHE_BYTES) {
      const first = this.cache.keys().next().value as string
      this.cacheBytes -= this.cache.get(first)!.length
      this.cache.delete(first)
    }
  }
}
