// A chunk reference as LevelDB holds it (r<hex> keys): where a chunk's bytes are in the packs.
import { decode, encode } from './codec.js'
import type { ChunkRef } from './pack-format.js'

/** [pack, offset, length]. */
export function encodeRef (r: ChunkRef): Buffer {
  return encode([r.pack, r.offset, r.length])
}

export function decodeRef (raw: Buffer): ChunkRef {
  const v = decode<unknown>(raw)
  if (!Array.isArray(v) || v.length !== 3 || !v.every(n => Number.isSafeInteger(n) && n >= 0)) throw new Error('not a chunk reference')
  return { pack: v[0], offset: v[1], length: v[2] }
}
