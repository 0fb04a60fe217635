// Chunks on their way to a remote: compressed, gathered into pack objects of ~16 MiB (one PUT
// each: a 100,000-file tree is tens of objects, not 100,000), uploaded a few at a time while
// the next is filled. The pack object is the local pack format (store/pack-format.ts) with
// brotli records where brotli saves something; its name is the same Merkle hash as a local
// pack's, so anyone holding it can check it.
import { createHash } from 'node:crypto'
import { COMPRESSION_BROTLI, COMPRESSION_NONE, PACK_HEADER, packHeader, recordHeader, RECORD_HEADER } from '../store/pack-format.js'
import { compress, indexName, packName, sealObject, type RemoteIndex } from './objects.js'
import type { Bucket } from './s3.js'
import type { ChunkIndex } from './chunk-index.js'

/** A pack object is sent once it holds this much (stored bytes). */
export const PACK_TARGET = 16 * 1024 * 1024
/** Pack uploads in flight at once: the bytes held are (this + 1) × PACK_TARGET at most. */
const IN_FLIGHT = 3

export class Packer {
  private parts: Buffer[] = []
  private size = 0
  private readonly merkle = () => createHash('sha256')
  private hash = this.merkle()
  private chunks: Array<Buffer | number> = []
  private readonly flying = new Set<Promise<void>>()
  private failed: unknown = null
  /** The packs written by this push, with their chunks: the index object says where each is. */
  readonly written: RemoteIndex['packs'] = []
  /** Chunks and bytes (uncompressed / stored) sent. */
  sent = { chunks: 0, raw: 0, stored: 0 }

  constructor (private readonly bucket: Bucket, private readonly known: ChunkIndex) {}

  /**
   * Gather the chunk unless the remote (or this push) has it already. Synchronous (a reader of
   * real files hands chunks over from a buffer it reuses: the bytes are copied or compressed
   * here); `settle` sends a full pack.
   */
  add (hash: Buffer, data: Buffer): void {
    const hex = hash.toString('hex')
    if (this.known.has(hex)) return
    if (this.size === 0) this.start()
    const packed = compress(data)
    // Already-compressed data (images, archives) is kept as it is.
    const useBrotli = packed.length < data.length - (data.length >> 4)
    const body = useBrotli ? packed : Buffer.from(data)
    const head = recordHeader(hash, data.length, body.length, useBrotli ? COMPRESSION_BROTLI : COMPRESSION_NONE)
    this.hash.update(head)
    this.chunks.push(hash, this.size + RECORD_HEADER, body.length, data.length, useBrotli ? COMPRESSION_BROTLI : COMPRESSION_NONE)
    this.parts.push(head, body)
    this.size += RECORD_HEADER + body.length
    this.known.note(hex)
    this.sent.chunks++
    this.sent.raw += data.length
    this.sent.stored += body.length
  }

  /** Send the pack being filled once it is full (waits while too many uploads are in flight). */
  async settle (): Promise<void> {
    if (this.size >= PACK_TARGET) await this.send()
  }

  /** Send what is gathered, wait for every upload, and write the index of this push's packs. */
  async finish (): Promise<string | null> {
    if (this.size > 0) await this.send()
    await Promise.all(this.flying)
    if (this.failed !== null) throw this.failed
    if (this.written.length === 0) return null
    const index = sealObject({ packs: this.written } satisfies RemoteIndex)
    await this.bucket.put(indexName(index.hex), index.body)
    this.known.addIndex(index.hex, { packs: this.written }, true)
    return index.hex
  }

  private start (): void {
    const header = packHeader(0)
    this.parts = [header]
    this.size = PACK_HEADER
    this.hash = this.merkle()
    this.hash.update(header)
    this.chunks = []
  }

  private async send (): Promise<void> {
    const name = this.hash.digest('hex')
    const body = Buffer.concat(this.parts)
    this.written.push({ name, chunks: this.chunks })
    this.parts = []
    this.size = 0
    while (this.flying.size >= IN_FLIGHT) await Promise.race(this.flying)
    if (this.failed !== null) throw this.failed
    const up: Promise<void> = this.bucket.put(packName(name), body).catch((err) => { this.failed ??= err }).finally(() => this.flying.delete(up))
    this.flying.add(up)
  }
}
