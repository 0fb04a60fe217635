// Which chunks a remote holds, and where: the union of its index objects. Index objects are
// immutable, so each is fetched once and kept in the store's cache directory; a push lists
// `index/` (one request per 1,000 indexes) and fetches only the new ones. One prefix holds
// many workspaces, so a chunk any of them pushed is never sent again.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { decode, encode } from '../store/codec.js'
import { indexName, openObject, type RemoteIndex } from './objects.js'
import type { Bucket } from './s3.js'

export interface ChunkPlace {
  pack: string
  offset: number
  stored: number
  length: number
  compression: number
}

/** A place as a lazy clone records it (R<hex>, store/remote-chunks.ts): [pack, offset, stored, length, compression]. */
export function encodePlace (p: ChunkPlace): Buffer {
  return encode([p.pack, p.offset, p.stored, p.length, p.compression])
}

export function decodePlace (raw: Buffer): ChunkPlace {
  const [pack, offset, stored, length, compression] = decode<[string, number, number, number, number]>(raw)
  return { pack, offset, stored, length, compression }
}

export class ChunkIndex {
  private readonly places = new Map<string, ChunkPlace>()
  /** Chunks sent by this push that no index names yet. */
  private readonly pending = new Set<string>()
  /** Index objects known, by name: the packs each covers. */
  readonly indexes = new Map<string, string[]>()
  /** Which index covers each pack. */
  readonly indexOfPack = new Map<string, string>()

  /**
   * Read every index object under the remote (from `cacheDir` when fetched before). Only
   * packs that are there and that no gc mark names count (`marked`: object names, marks.ts):
   * a push never builds on a pack that a gc may delete.
   */
  static async load (bucket: Bucket, cacheDir: string, marked: ReadonlySet<string> = new Set()): Promise<ChunkIndex> {
    const out = new ChunkIndex()
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 })
    const present = new Set((await bucket.list('packs/')).map(o => o.key).filter(k => !marked.has(k)))
    out.usable = (pack) => present.has(`packs/${pack}.pack`)
    const listed = await bucket.list('index/')
    const names = listed.filter(o => !marked.has(o.key)).map(o => o.key.slice('index/'.length)).filter(n => /^[0-9a-f]{64}$/.test(n))
    await inBatches(names, 8, async (hex) => {
      const cached = join(cacheDir, hex)
      let body: Buffer | null = null
      try {
        body = fs.readFileSync(cached)
      } catch {}
      let index: RemoteIndex
      try {
        index = openObject<RemoteIndex>(body!, hex, `index ${hex}`)
      } catch {
        // Not cached, or the cached copy is damaged: fetch (and check) it.
        const got = await bucket.get(indexName(hex))
        if (got === null) return // deleted by gc since the listing: its packs went with it
        index = openObject<RemoteIndex>(got.body, hex, `index ${hex}`)
        fs.writeFileSync(cached + '.tmp', got.body)
        fs.renameSync(cached + '.tmp', cached)
      }
      out.addIndex(hex, index)
    })
    return out
  }

  /** Packs this index may name: those there and unmarked (load), or every one (a push's own). */
  private usable: (pack: string) => boolean = () => true

  addIndex (hex: string, index: RemoteIndex, own = false): void {
    const packs: string[] = []
    for (const p of index.packs) {
      if (!own && !this.usable(p.name)) continue
      packs.push(p.name)
      this.indexOfPack.set(p.name, hex)
      const c = p.chunks
      for (let i = 0; i + 4 < c.length; i += 5) {
        const h = Buffer.from(c[i] as Uint8Array).toString('hex')
        this.pending.delete(h)
        if (!this.places.has(h)) this.places.set(h, { pack: p.name, offset: c[i + 1] as number, stored: c[i + 2] as number, length: c[i + 3] as number, compression: c[i + 4] as number })
      }
    }
    this.indexes.set(hex, packs)
  }

  has (hex: string): boolean {
    return this.places.has(hex) || this.pending.has(hex)
  }

  /** A chunk this push is sending (its index comes at the end). */
  note (hex: string): void {
    if (!this.places.has(hex)) this.pending.add(hex)
  }

  place (hex: string): ChunkPlace | undefined {
    return this.places.get(hex)
  }
}

/** Run fn over items, at most `n` at a time. */
export async function inBatches<T> (items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++])
  }
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker))
}
