// Making a lazy clone full (`cpfs pull --full`): every chunk the store holds on its remote only
// (R<hex>, store/remote-chunks.ts) fetched into its packs, so that the history no longer needs
// the remote. Each chunk is checked against its hash as it arrives and written through the
// session's chunk store (the persister's batches carry their references); only once those
// have landed are the R<hex> records deleted — killed in between, a chunk is both local and
// on the remote, and the local copy wins.
import type { Session } from '../session/session.js'
import { hexName } from '../store/chunks.js'
import { REMOTE_CHUNK_PREFIX, prefixEnd, type BatchOp } from '../store/keys.js'
import { decodePlace, type ChunkPlace } from './chunk-index.js'
import { lazySource } from './config.js'
import { fetchChunks } from './fetch.js'
import { Bucket, parseS3Url } from './s3.js'

/** Chunk bytes held before they go to the store's packs. */
const SPILL_BYTES = 32 * 1024 * 1024

export interface Filled {
  /** Chunks fetched from the remote (0 for a store that was not a lazy clone). */
  chunks: number
  bytes: number
}

export async function fetchRemoteChunks (session: Session, env?: Record<string, string>): Promise<Filled> {
  const src = lazySource(session.store.path)
  if (src === undefined) return { chunks: 0, bytes: 0 }
  return await session.exclusive(async () => {
    const places = new Map<string, ChunkPlace>()
    const dels: BatchOp[] = []
    for await (const [key, raw] of session.store.entries({ gte: REMOTE_CHUNK_PREFIX, lt: prefixEnd(REMOTE_CHUNK_PREFIX) })) {
      const hex = key.slice(REMOTE_CHUNK_PREFIX.length)
      dels.push({ type: 'del', key })
      if (session.chunks.pin(hex)) continue // fetched into the packs already (a pull)
      places.set(hex, decodePlace(raw))
    }
    let bytes = 0
    if (places.size > 0) {
      const bucket = new Bucket({ ...parseS3Url(src.url), ...(src.endpoint !== undefined ? { endpoint: src.endpoint } : {}), ...(env !== undefined ? { env } : {}) })
      try {
        await fetchChunks(bucket, places, async (hash, data) => {
          if (!session.chunks.pin(hexName(hash))) session.chunks.put(data)
          bytes += data.length
          if (session.chunks.pendingBytes() >= SPILL_BYTES) await session.persister.flushAll(false)
        })
      } finally {
        bucket.destroy()
      }
    }
    await session.persister.flushAll(true)
    for (let i = 0; i < dels.length; i += 1000) await session.store.batch(dels.slice(i, i + 1000), true)
    return { chunks: places.size, bytes }
  })
}
