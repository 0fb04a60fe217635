// Values in the store are MessagePack (msgpackr). Records are plain objects so that the
// on-disk format does not depend on shared structure definitions: a store stays readable
// by any later version that knows the same field names. A record's fields on disk are the
// fields of its type in memory, with the same readable names (store version 4); records of
// versions 1 to 3 used one-letter names and are converted as they are read (legacyEntry,
// and fingerprints.ts, plans/journal.ts for theirs).
//
// Layer and base entries go through encodeEntry/decodeEntry: a file's sparse chunk map travels
// as a flat array [idx, hash|null, ...] (field `chunkRefs`) so that MessagePack keeps the
// integer keys. Entries written by cpfs 0.1 (a dense `chunks` array in which 1 meant "the same
// bytes as src") are read too.
import { Packr } from 'msgpackr'
import { CHUNK_SIZE, type Entry, type FileEntry } from './entries.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })

export function encode (value: unknown): Buffer {
  return packr.pack(value)
}

export function decode<T> (buf: Buffer | Uint8Array): T {
  return packr.unpack(buf) as T
}

/**
 * `by`: the processes that changed the entry's key in its layer (session/attribution.ts),
 * stored in the entry's record but never kept in memory with it (decodeEntry leaves it out;
 * entryBy reads it).
 */
export function encodeEntry (e: Entry, by?: string[]): Buffer {
  if (e.kind !== 'f') return packr.pack(by === undefined ? e : { ...e, by })
  const { chunks, ...rest } = e
  const chunkRefs: Array<number | Buffer | null> = []
  for (const [idx, ref] of [...chunks].sort((a, b) => a[0] - b[0])) chunkRefs.push(idx, ref)
  return packr.pack(by === undefined ? { ...rest, chunkRefs } : { ...rest, chunkRefs, by })
}

/** The processes an entry's record names as having changed it (encodeEntry's `by`), if any. */
export function entryBy (buf: Buffer | Uint8Array | undefined): string[] | undefined {
  return buf === undefined ? undefined : byOf(packr.unpack(buf))
}

function byOf (raw: { by?: unknown }): string[] | undefined {
  return Array.isArray(raw.by) ? raw.by.filter((id): id is string => typeof id === 'string') : undefined
}

/** An entry and the processes its record names, from one decoding (gc reads both of every entry). */
export function decodeEntryBy (buf: Buffer | Uint8Array): { entry: Entry, by: string[] | undefined } {
  const raw = packr.unpack(buf) as any
  return { by: byOf(raw), entry: entryOf(raw) }
}

export function decodeEntry (buf: Buffer | Uint8Array): Entry {
  return entryOf(packr.unpack(buf))
}

function entryOf (raw: any): Entry {
  if (raw.by !== undefined) {
    const { by, ...rest } = raw
    raw = rest
  }
  if (raw.kind === undefined) return legacyEntry(raw)
  if (raw.kind !== 'f') return raw as Entry
  raw.chunks = chunkMap(raw.chunkRefs ?? [])
  delete raw.chunkRefs
  return raw as FileEntry
}

function chunkMap (flat: Array<number | Uint8Array | null>): Map<number, Buffer | null> {
  const chunks = new Map<number, Buffer | null>()
  for (let i = 0; i + 1 < flat.length; i += 2) chunks.set(flat[i] as number, flat[i + 1] === null ? null : Buffer.from(flat[i + 1] as Uint8Array))
  return chunks
}

/**
 * An entry of store versions 1 to 3, named t (kind), n (newInTurn), x (xattrs), o (realPath)
 * and, for files, d (chunkRefs) or, in cpfs 0.1, a dense `chunks` array: as this version's.
 */
function legacyEntry (raw: any): Entry {
  const { t, n, x, o, d, chunks: dense, ...rest } = raw
  const e: any = { kind: t, ...rest }
  if (n !== undefined) e.newInTurn = n
  if (x !== undefined) e.xattrs = x
  if (o !== undefined) e.realPath = o
  if (t !== 'f') return e as Entry
  if (Array.isArray(d)) e.chunks = chunkMap(d)
  else if (Array.isArray(dense)) {
    // cpfs 0.1: one slot per chunk, a hash, null (a hole) or 1 (the same range of src). Its
    // src slots always form the front of the file (truncation cut them, growth added holes).
    const chunks = new Map<number, Buffer | null>()
    let srcEnd = 0
    dense.forEach((c: unknown, idx: number) => {
      if (c === 1) srcEnd = (idx + 1) * CHUNK_SIZE
      else if (c) chunks.set(idx, Buffer.from(c as Uint8Array))
    })
    if (e.src !== undefined) {
      e.srcSize = Math.min(srcEnd, e.size)
      dense.forEach((c: unknown, idx: number) => { if (c === null && idx * CHUNK_SIZE < e.srcSize) chunks.set(idx, null) })
    }
    e.chunks = chunks
  } else e.chunks = new Map()
  return e as FileEntry
}
