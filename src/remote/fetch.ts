// Reading immutable objects from a remote, each checked against its name before anything in
// it is used: a tree's content must hash to its name; a pack's header and record headers must
// hash to its name, and every chunk in it, once decompressed, to the SHA-256 its header gives.
// A missing or damaged object is an error that names it; nothing is written before the
// whole clone or pull has been checked.
import { createHash } from 'node:crypto'
import { brotliDecompressSync } from 'node:zlib'
import { CpfsError } from '../errors.js'
import { hashChunk } from '../store/chunks.js'
import { COMPRESSION_BROTLI, PACK_HEADER, RECORD_HEADER, scanPack } from '../store/pack-format.js'
import { damaged, openObject, packName, treeName, type RemoteLayer, type RemoteRoot } from './objects.js'
import { inBatches, type ChunkPlace } from './chunk-index.js'
import { phase } from '../progress.js'
import type { Bucket } from './s3.js'

export async function fetchTree<T> (bucket: Bucket, hex: string): Promise<T> {
  const got = await bucket.get(treeName(hex))
  if (got === null) throw missing(bucket, `tree ${hex}`)
  return openObject<T>(got.body, hex, `tree ${hex}`)
}

/** The trees `names`, each checked against its name (eight requests at a time). */
export async function fetchTrees (bucket: Bucket, names: Iterable<string>): Promise<Map<string, RemoteLayer | RemoteRoot>> {
  const unique = [...new Set(names)]
  const out = new Map<string, RemoteLayer | RemoteRoot>()
  const getting = phase('fetching turns', 'trees', unique.length)
  await inBatches(unique, 8, async (hex) => {
    out.set(hex, await fetchTree(bucket, hex))
    getting.item()
  })
  getting.end()
  return out
}

/** Every chunk of pack `name` that `want` holds, checked, to `each`. */
export async function fetchPack (bucket: Bucket, name: string, want: (hex: string) => boolean, each: (hash: Buffer, data: Buffer) => void): Promise<number> {
  const got = await bucket.get(packName(name))
  if (got === null) throw missing(bucket, `pack ${name}`)
  const body = got.body
  const what = `pack ${name}`
  const scan = scanPack((at, len) => body.subarray(at, at + len), body.length)
  if (scan.stopped !== null || scan.header === null) throw damaged(what, scan.stopped ?? 'no header')
  const merkle = createHash('sha256').update(body.subarray(0, PACK_HEADER))
  for (const r of scan.records) merkle.update(body.subarray(r.offset - RECORD_HEADER, r.offset))
  if (merkle.digest('hex') !== name) throw damaged(what, 'its headers do not match its name')
  let n = 0
  for (const r of scan.records) {
    const hex = r.hash.toString('hex')
    if (!want(hex)) continue
    each(r.hash, openChunk(body.subarray(r.offset, r.offset + r.stored), r, what))
    n++
  }
  return n
}

/** A chunk's bytes from its stored form (decompressed, at most `length` bytes), checked against its hash. */
export function openChunk (stored: Buffer, r: { hash: Buffer, length: number, compression: number }, what: string): Buffer {
  let data: Buffer
  try {
    data = r.compression === COMPRESSION_BROTLI ? brotliDecompressSync(stored, { maxOutputLength: Math.max(r.length, 1) }) : Buffer.from(stored)
  } catch {
    throw damaged(what, `chunk ${r.hash.toString('hex')} does not decompress`)
  }
  if (data.length !== r.length || !hashChunk(data).equals(r.hash)) throw damaged(what, `chunk ${r.hash.toString('hex')} does not match its SHA-256`)
  return data
}

/** Bytes between two wanted chunks of one pack that a ranged read fetches rather than splitting. */
const SPAN_GAP = 1024 * 1024
/** The most one ranged read fetches. */
const SPAN_MAX = 16 * 1024 * 1024

/**
 * The chunks `places` names, each checked against its hash, to `each`: one ranged read per run
 * of nearby chunks in a pack (a lazy clone's head view is most of a few packs, laid out in the
 * order its push walked the tree), four at a time.
 */
export async function fetchChunks (bucket: Bucket, places: Map<string, ChunkPlace>, each: (hash: Buffer, data: Buffer) => void | Promise<void>): Promise<void> {
  const byPack = new Map<string, Array<[string, ChunkPlace]>>()
  for (const [hex, p] of places) {
    let list = byPack.get(p.pack)
    if (list === undefined) byPack.set(p.pack, list = [])
    list.push([hex, p])
  }
  const spans: Array<{ pack: string, start: number, end: number, chunks: Array<[string, ChunkPlace]> }> = []
  for (const [pack, list] of byPack) {
    list.sort((a, b) => a[1].offset - b[1].offset)
    let span: (typeof spans)[number] | undefined
    for (const c of list) {
      const end = c[1].offset + c[1].stored
      if (span === undefined || c[1].offset - span.end > SPAN_GAP || end - span.start > SPAN_MAX) spans.push(span = { pack, start: c[1].offset, end, chunks: [] })
      span.end = Math.max(span.end, end)
      span.chunks.push(c)
    }
  }
  const getting = phase('fetching data', 'ranges', spans.length)
  await inBatches(spans, 4, async (s) => {
    const what = `pack ${s.pack}`
    const body = await readRange(bucket, s.pack, s.start, s.end)
    if (body.length !== s.end - s.start) throw damaged(what, `it is shorter than its index says (${s.start + body.length} of ${s.end} bytes)`)
    for (const [hex, p] of s.chunks) {
      const hash = Buffer.from(hex, 'hex')
      await each(hash, openChunk(body.subarray(p.offset - s.start, p.offset - s.start + p.stored), { hash, length: p.length, compression: p.compression }, what))
    }
    getting.item()
  })
  getting.end()
}

/** Bytes [start, end) of pack `name`; its absence said as for a whole pack. */
export async function readRange (bucket: Bucket, name: string, start: number, end: number): Promise<Buffer> {
  try {
    return await bucket.getRange(packName(name), start, end)
  } catch (err) {
    if ((err as CpfsError)?.code === 'REMOTE_MISSING') throw missing(bucket, `pack ${name}`)
    throw err
  }
}

function missing (bucket: Bucket, what: string): CpfsError {
  return new CpfsError('REMOTE_MISSING', `${what} is missing from ${bucket.where()}`, 'nothing was changed here; push again from a machine that has this history')
}
