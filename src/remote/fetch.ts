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
import { inBatches } from './chunk-index.js'
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
    const stored = body.subarray(r.offset, r.offset + r.stored)
    let data: Buffer
    try {
      data = r.compression === COMPRESSION_BROTLI ? brotliDecompressSync(stored, { maxOutputLength: Math.max(r.length, 1) }) : Buffer.from(stored)
    } catch {
      throw damaged(what, `chunk ${hex} does not decompress`)
    }
    if (data.length !== r.length || !hashChunk(data).equals(r.hash)) throw damaged(what, `chunk ${hex} does not match its SHA-256`)
    each(r.hash, data)
    n++
  }
  return n
}

function missing (bucket: Bucket, what: string): CpfsError {
  return new CpfsError('REMOTE_MISSING', `${what} is missing from ${bucket.where()}`, 'nothing was changed here; push again from a machine that has this history')
}
