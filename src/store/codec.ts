// Values in the store are MessagePack (msgpackr). Records are plain objects so that the
// on-disk format does not depend on shared structure definitions: a store stays readable
// by any later version that knows the same field names.
//
// Layer and base entries go through encodeEntry/decodeEntry: a file's sparse chunk map travels
// as a flat array [idx, hash|null, ...] (field `d`) so that MessagePack keeps the integer keys.
// Entries written by cpfs 0.1 (a dense `chunks` array in which 1 meant "the same bytes as src")
// are read too.
import { Packr } from 'msgpackr'
import { CHUNK_SIZE, type Entry, type FileEntry } from './entries.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })

export function encode (value: unknown): Buffer {
  return packr.pack(value)
}

export function decode<T> (buf: Buffer | Uint8Array): T {
  return packr.unpack(buf) as T
}

export function encodeEntry (e: Entry): Buffer {
  if (e.t !== 'f') return packr.pack(e)
  const { chunks, ...rest } = e
  const d: Array<number | Buffer | null> = []
  for (const [idx, ref] of [...chunks].sort((a, b) => a[0] - b[0])) d.push(idx, ref)
  return packr.pack({ ...rest, d })
}

export function decodeEntry (buf: Buffer | Uint8Array): Entry {
  const raw = packr.unpack(buf) as any
  if (raw.t !== 'f') return raw as Entry
  const chunks = new Map<number, Buffer | null>()
  if (Array.isArray(raw.d)) {
    for (let i = 0; i + 1 < raw.d.length; i += 2) chunks.set(raw.d[i], raw.d[i + 1] === null ? null : Buffer.from(raw.d[i + 1]))
    delete raw.d
  } else if (Array.isArray(raw.chunks)) {
    // cpfs 0.1: one slot per chunk, a hash, null (a hole) or 1 (the same range of src). Its
    // src slots always form the front of the file (truncation cut them, growth added holes).
    let srcEnd = 0
    raw.chunks.forEach((c: unknown, idx: number) => {
      if (c === 1) srcEnd = (idx + 1) * CHUNK_SIZE
      else if (c) chunks.set(idx, Buffer.from(c as Uint8Array))
    })
    if (raw.src !== undefined) {
      raw.srcSize = Math.min(srcEnd, raw.size)
      raw.chunks.forEach((c: unknown, idx: number) => { if (c === null && idx * CHUNK_SIZE < raw.srcSize) chunks.set(idx, null) })
    }
  }
  raw.chunks = chunks
  return raw as FileEntry
}
