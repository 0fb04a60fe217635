// cpfs fsck's view of the pack files (packs.ts): whether the bytes a chunk reference (r<hex>)
// names are there, under a record header that names the same chunk, and hash to its name.
import { hashChunk } from './chunks.js'
import { readRecordHeader, type ChunkRef } from './pack-format.js'
import { decodeRef, type Store } from './store.js'

export type RefCheck =
  | { state: 'ok', ref: ChunkRef }
  | { state: 'missing' | 'damaged', why: string }
  | { state: 'undecodable' }

/** Check the chunk `hex` that LevelDB places with `value` (a reference). */
export function checkRef (store: Store, hex: string, value: Buffer): RefCheck {
  let ref: ChunkRef
  try {
    ref = decodeRef(value)
  } catch {
    return { state: 'undecodable' }
  }
  const packs = store.packs
  if (!packs.has(ref.pack)) return { state: 'missing', why: `its pack ${ref.pack} is not in ${packs.dir}` }
  const where = `pack ${packs.fileName(ref.pack)} at byte ${ref.offset}`
  let head: Buffer, data: Buffer
  try {
    head = packs.readHeader(ref)
    data = packs.read(ref)
  } catch (err: any) {
    return { state: 'missing', why: `${where} cannot be read: ${err?.message ?? err}` }
  }
  if (data.length < ref.length) return { state: 'missing', why: `${where} is past the end of the file` }
  const h = readRecordHeader(head)
  if (typeof h === 'string') return { state: 'damaged', why: `${where}: ${h}` }
  if (h.hash.toString('hex') !== hex || h.stored !== ref.length) return { state: 'damaged', why: `${where}: the record there is another chunk's` }
  if (hashChunk(data).toString('hex') !== hex) return { state: 'damaged', why: `its bytes in ${where} do not match their SHA-256` }
  return { state: 'ok', ref }
}
