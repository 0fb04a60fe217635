// LevelDB's table files (*.ldb, *.sst) checked by cpfs itself: classic-level opens LevelDB
// without verify_checksums or paranoid_checks, so LevelDB hands back whatever bytes a damaged
// block holds (and its own repair does not look either). Written from LevelDB's
// doc/table_format.md and Snappy's format_description.txt:
//   table  = data blocks, meta blocks (the filter), metaindex block, index block, footer
//   footer = the last 48 bytes: metaindex and index BlockHandles (varint64 offset, varint64
//            size), zero padding, magic 0xdb4775248b80fb57 (fixed64, little-endian)
//   block  = contents (`size` bytes), then a trailer: 1 byte compression type (0 none,
//            1 Snappy) and 4 bytes masked CRC32C of the contents and the type byte
//   contents = entries (varint32 shared key bytes, varint32 unshared, varint32 value length,
//            the unshared key bytes, the value), uint32 restart offsets, uint32 their count
// Keys in data and index blocks are LevelDB's internal keys: the user's key, then 8 bytes
// (sequence number << 8 | type; type 0 is a deletion).
// Pure: reads files, never writes them (fsck-tables.ts decides what to do with what it finds).
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { CpfsError } from '../errors.js'

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), a table of 8 × 256: eight bytes per
// step (slicing-by-8) — one byte per step ran at about a third of the speed, and fsck runs
// this over every byte of the store.
const T = new Uint32Array(8 * 256)
for (let i = 0; i < 256; i++) {
  let c = i
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1
  T[i] = c
}
for (let i = 0; i < 256; i++) for (let s = 1; s < 8; s++) T[s * 256 + i] = (T[(s - 1) * 256 + i] >>> 8) ^ T[T[(s - 1) * 256 + i] & 0xff]

export function crc32c (b: Uint8Array, start = 0, end = b.length): number {
  let c = ~0
  let p = start
  for (; p + 8 <= end; p += 8) {
    const lo = c ^ (b[p] | b[p + 1] << 8 | b[p + 2] << 16 | b[p + 3] << 24)
    c = T[1792 + (lo & 0xff)] ^ T[1536 + ((lo >>> 8) & 0xff)] ^ T[1280 + ((lo >>> 16) & 0xff)] ^ T[1024 + (lo >>> 24)] ^
      T[768 + b[p + 4]] ^ T[512 + b[p + 5]] ^ T[256 + b[p + 6]] ^ T[b[p + 7]]
  }
  for (; p < end; p++) c = T[(c ^ b[p]) & 0xff] ^ (c >>> 8)
  return ~c >>> 0
}

/** LevelDB stores CRCs masked (a CRC of data that holds CRCs is otherwise weak). */
export const maskCrc = (crc: number): number => ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0
export const unmaskCrc = (m: number): number => { const r = (m - 0xa282ead8) >>> 0; return ((r >>> 17) | (r << 15)) >>> 0 }

const bad = (msg: string): CpfsError => new CpfsError('TABLE_FORMAT', msg)

function varint (b: Uint8Array, p: number, end = b.length): [number, number] {
  let v = 0
  for (let mul = 1, i = 0; i < 10 && p < end; i++, mul *= 128) {
    const byte = b[p++]
    v += (byte & 0x7f) * mul
    if (byte < 0x80) return [v, p]
  }
  throw bad('a varint runs past its end')
}

/** Snappy's raw format: varint length, then literals and copies (format_description.txt). */
export function snappyDecode (src: Uint8Array): Buffer {
  const { out, error } = snappy(src)
  if (error) throw bad(error)
  return out
}

/** What decodes, and where it stops if it does not all decode (a damaged block's prefix). */
function snappy (src: Uint8Array): { out: Buffer, error?: string } {
  let len, p
  try {
    [len, p] = varint(src, 0)
  } catch {
    return { out: Buffer.alloc(0), error: 'Snappy length does not read' }
  }
  if (len > 0xffffffff) return { out: Buffer.alloc(0), error: 'Snappy length too large' }
  const out = Buffer.allocUnsafe(len)
  let o = 0
  const stop = (error: string): { out: Buffer, error: string } => ({ out: out.subarray(0, o), error })
  while (p < src.length) {
    const tag = src[p++]
    if ((tag & 3) === 0) {
      let n = tag >>> 2
      if (n >= 60) {
        const bytes = n - 59 // the length takes 1-4 more bytes, little-endian
        if (p + bytes > src.length) return stop('Snappy literal length cut short')
        n = 0
        for (let i = bytes - 1; i >= 0; i--) n = n * 256 + src[p + i]
        p += bytes
      }
      n += 1
      if (p + n > src.length || o + n > len) return stop('Snappy literal runs past its end')
      out.set(src.subarray(p, p + n), o)
      o += n
      p += n
      continue
    }
    let length: number
    let offset: number
    const bytes = [0, 1, 2, 4][tag & 3]
    if (p + bytes > src.length) return stop('Snappy copy cut short')
    if ((tag & 3) === 1) {
      length = ((tag >>> 2) & 7) + 4
      offset = ((tag >>> 5) << 8) | src[p]
    } else {
      length = (tag >>> 2) + 1
      offset = bytes === 2 ? src[p] | src[p + 1] << 8 : (src[p] | src[p + 1] << 8 | src[p + 2] << 16 | src[p + 3] << 24) >>> 0
    }
    p += bytes
    if (offset === 0 || offset > o || o + length > len) return stop('Snappy copy points outside the output')
    // Byte by byte: a copy may overlap what it writes (a run).
    for (let i = 0; i < length; i++, o++) out[o] = out[o - offset]
  }
  return o === len ? { out } : stop(`Snappy output is ${o} bytes, ${len} announced`)
}

export interface BlockEntry {
  key: Buffer
  value: Buffer
  /** Where the entry starts and ends in the block's contents. */
  at: number
  end: number
}

/**
 * The entries of a block's (uncompressed) contents, as far as they can be read. `restarts`
 * false: the contents are a prefix (of a damaged block), entries run to their end.
 */
export function blockEntries (b: Uint8Array, restarts = true): { entries: BlockEntry[], error?: string } {
  const entries: BlockEntry[] = []
  try {
    let end = b.length
    if (restarts) {
      if (b.length < 4) throw bad('block shorter than its restart count')
      const n = Buffer.from(b.buffer, b.byteOffset, b.length).readUInt32LE(b.length - 4)
      end = b.length - 4 - 4 * n
      if (n === 0 || end < 0) throw bad(`restart count ${n} does not fit the block`)
    }
    let key = Buffer.alloc(0)
    let p = 0
    while (p < end) {
      const at = p
      let shared, unshared, vlen
      ;[shared, p] = varint(b, p, end)
      ;[unshared, p] = varint(b, p, end)
      ;[vlen, p] = varint(b, p, end)
      if (shared > key.length || p + unshared + vlen > end) throw bad(`entry at ${at} runs past the entries`)
      key = Buffer.concat([key.subarray(0, shared), b.subarray(p, p + unshared)])
      p += unshared
      entries.push({ key, value: Buffer.from(b.subarray(p, p + vlen)), at, end: p + vlen })
      p += vlen
    }
    return { entries }
  } catch (err: any) {
    return { entries, error: err.message }
  }
}

/** The user's key and the sequence number and type of an internal key. */
export function internalKey (k: Buffer): { key: Buffer, seq: number, deletion: boolean } | null {
  if (k.length < 8) return null
  const lo = k.readUInt32LE(k.length - 8)
  return { key: k.subarray(0, k.length - 8), seq: k.readUInt32LE(k.length - 4) * 2 ** 24 + (lo >>> 8), deletion: (lo & 0xff) === 0 }
}

/**
 * A single-byte change that explains a checksum mismatch, if exactly one does: CRC32C is
 * linear, so the XOR of the stored and the computed CRC is what one changed byte at position k
 * with difference v leaves after the bytes that follow it. Walking back from the end, the
 * difference is undone one zero byte at a time and compared with the 255 single-byte ones.
 * A damaged byte of the stored CRC itself is looked for too. `data`: contents and type byte.
 */
function locateByte (data: Uint8Array, storedMasked: number): { at: number, byte: number } | null {
  const found: Array<{ at: number, byte: number }> = []
  const actual = crc32c(data)
  const inCrc = (maskCrc(actual) ^ storedMasked) >>> 0
  for (let i = 0; i < 4; i++) if (inCrc === (inCrc & (0xff << (8 * i))) >>> 0) found.push({ at: data.length + i, byte: (maskCrc(actual) >>> (8 * i)) & 0xff })
  let d = (actual ^ unmaskCrc(storedMasked)) >>> 0
  for (let k = data.length - 1; k >= 0 && found.length < 2; k--) {
    const v = SINGLE.get(d)
    if (v !== undefined) found.push({ at: k, byte: data[k] ^ v })
    const i = TOP[d >>> 24]
    d = (((d ^ T[i]) << 8) | i) >>> 0 // one zero byte undone: the top byte of T[i] names i
  }
  return found.length === 1 ? found[0] : null
}
const SINGLE = new Map<number, number>()
const TOP = new Uint8Array(256)
for (let v = 1; v < 256; v++) SINGLE.set(T[v], v)
for (let i = 0; i < 256; i++) TOP[T[i] >>> 24] = i

export type BlockKind = 'data' | 'index' | 'metaindex' | 'filter' | 'footer'

export interface TableProblem {
  /** TABLE_SHORT, TABLE_FOOTER, BLOCK_OUTSIDE, BLOCK_CHECKSUM, BLOCK_TYPE, BLOCK_FORMAT. */
  code: string
  file: string
  kind: BlockKind
  /** The block's offset and size in the file (its trailer follows); the footer's for TABLE_*. */
  offset: number
  size: number
  message: string
  /** The one byte that, put back, makes the checksum match and the block readable. */
  fix?: { at: number, byte: number }
  /** User keys of the block's records (as far as they can be read; after the fix, if any). */
  keys: Array<{ key: Buffer, seq: number, deletion: boolean, value: Buffer }>
  /** The key of the record that holds the fixed byte (uncompressed blocks only). */
  fixKey?: Buffer
  /** `keys` are all the block's records. */
  complete: boolean
  /** Data blocks: the user keys the block's records lie between (from the index). */
  range?: { from: Buffer | null, to: Buffer }
}

export interface TableCheck {
  file: string
  bytes: number
  blocks: number
  problems: TableProblem[]
}

const MAGIC_LO = 0x8b80fb57
const MAGIC_HI = 0xdb477524
const FOOTER = 48

function handle (b: Uint8Array, p: number, end = b.length): { offset: number, size: number, next: number } {
  const [offset, q] = varint(b, p, end)
  const [size, next] = varint(b, q, end)
  return { offset, size, next }
}

/** A block's contents and entries from its stored bytes (`data`: contents and type byte). */
function contentsOf (data: Uint8Array, size: number, kind: BlockKind, partial = false): { contents?: Buffer, entries: BlockEntry[], code?: string, error?: string } {
  const type = data[size]
  if (type !== 0 && type !== 1) return { entries: [], code: 'BLOCK_TYPE', error: `unknown compression type ${type}` }
  const z = type === 1 ? snappy(data.subarray(0, size)) : { out: Buffer.from(data.buffer, data.byteOffset, size) }
  if (z.error && !partial) return { entries: [], code: 'BLOCK_FORMAT', error: z.error }
  if (kind === 'filter') return { contents: z.out, entries: [] }
  let r = blockEntries(z.out, !z.error)
  if (partial && r.error && !r.entries.length) r = blockEntries(z.out, false)
  return { contents: z.out, entries: r.entries, code: r.error ? 'BLOCK_FORMAT' : undefined, error: z.error ?? r.error }
}

/**
 * One block: its checksum, then its contents (decompressed). A damaged block that one byte
 * explains is read as it would be with that byte put back, and the problem says so; of
 * another, the records that still read (within the key range the index gives the block).
 */
function readBlock (name: string, buf: Buffer, kind: BlockKind, offset: number, size: number, problems: TableProblem[], range?: TableProblem['range']): Buffer | null {
  const where = `table ${name}: ${kind} block at ${offset} (${size} bytes)`
  const problem: TableProblem = { code: 'BLOCK_OUTSIDE', file: name, kind, offset, size, keys: [], complete: false, range, message: `${where} runs past the end of the file (${buf.length} bytes)` }
  if (offset + size + 5 > buf.length) {
    problems.push(problem)
    return null
  }
  const data = buf.subarray(offset, offset + size + 1)
  const stored = buf.readUInt32LE(offset + size + 1)
  if (maskCrc(crc32c(data)) === stored) {
    const r = contentsOf(data, size, kind)
    if (!r.error) return r.contents!
    problems.push({ ...problem, code: r.code!, message: `${where}: ${r.error}` })
    return null
  }
  problems.push(Object.assign(problem, { code: 'BLOCK_CHECKSUM', message: `${where} fails its checksum` }))
  const fix = locateByte(data, stored)
  const fixed = Buffer.from(data)
  if (fix && fix.at <= size) fixed[fix.at] = fix.byte
  const r = fix ? contentsOf(fixed, size, kind) : null
  if (fix && r && !r.error) {
    problem.fix = { at: offset + fix.at, byte: fix.byte }
    problem.complete = true
    if (fixed[size] === 0) problem.fixKey = r.entries.find(e => fix.at < e.end)?.key.subarray(0, -8)
    for (const e of r.entries) { const k = internalKey(e.key); if (k) problem.keys.push({ ...k, value: e.value }) }
    return r.contents!
  }
  if (r) problem.message += ` (one changed byte would explain it, but the block would still not read: ${r.error})`
  // What still reads: keys in order, inside the range; the rest is garbage or cannot be named.
  const best = contentsOf(data, size, kind, true)
  problem.complete = !best.error
  let last: Buffer | null = null
  for (const e of best.entries) {
    const k = internalKey(e.key)
    if (!k || (last && Buffer.compare(k.key, last) < 0) || (range?.from && Buffer.compare(k.key, range.from) < 0) || (range && Buffer.compare(k.key, range.to) > 0)) {
      problem.complete = false
      break
    }
    last = k.key
    problem.keys.push({ ...k, value: e.value })
  }
  return null
}

/** The footer's two handles; throws TABLE_SHORT or TABLE_FOOTER. */
function footerOf (name: string, buf: Buffer): { meta: { offset: number, size: number }, index: { offset: number, size: number } } {
  if (buf.length < FOOTER) throw new CpfsError('TABLE_SHORT', `table ${name}: ${buf.length} bytes, shorter than a table's footer (cut short?)`)
  const f = buf.length - FOOTER
  if (buf.readUInt32LE(buf.length - 8) !== MAGIC_LO || buf.readUInt32LE(buf.length - 4) !== MAGIC_HI) {
    throw new CpfsError('TABLE_FOOTER', `table ${name}: no table footer at its end (cut short, or the footer is damaged)`)
  }
  try {
    const meta = handle(buf, f, buf.length - 8)
    return { meta, index: handle(buf, meta.next, buf.length - 8) }
  } catch (err: any) {
    throw new CpfsError('TABLE_FOOTER', `table ${name}: its footer does not read: ${err.message}`)
  }
}

/** Check every block of a table held in `buf`; `name` is what problems call the file. */
export function checkTableBytes (name: string, buf: Buffer): TableCheck {
  const res: TableCheck = { file: name, bytes: buf.length, blocks: 0, problems: [] }
  let meta, index
  try {
    ({ meta, index } = footerOf(name, buf))
  } catch (err: any) {
    res.problems.push({ code: err.code, file: name, kind: 'footer', offset: Math.max(0, buf.length - FOOTER), size: FOOTER, keys: [], complete: false, message: err.message })
    return res
  }
  const metaBlock = readBlock(name, buf, 'metaindex', meta.offset, meta.size, res.problems)
  for (const e of metaBlock ? blockEntries(metaBlock).entries : []) {
    if (!e.key.toString('latin1').startsWith('filter.')) continue
    try {
      const h = handle(e.value, 0)
      readBlock(name, buf, 'filter', h.offset, h.size, res.problems)
      res.blocks++
    } catch {}
  }
  const indexBlock = readBlock(name, buf, 'index', index.offset, index.size, res.problems)
  res.blocks += 2
  if (!indexBlock) return res
  let from: Buffer | null = null
  for (const e of blockEntries(indexBlock).entries) {
    let h
    try {
      h = handle(e.value, 0)
    } catch (err: any) {
      res.problems.push({ code: 'BLOCK_FORMAT', file: name, kind: 'index', offset: index.offset, size: index.size, keys: [], complete: false, message: `table ${name}: an index entry does not read: ${err.message}` })
      continue
    }
    res.blocks++
    // A data block whose checksum holds is not decompressed: the CRC covers what is stored.
    const stored = h.offset + h.size + 5 <= buf.length ? buf.readUInt32LE(h.offset + h.size + 1) : -1
    const to = e.key.subarray(0, -8)
    if (stored === -1 || maskCrc(crc32c(buf, h.offset, h.offset + h.size + 1)) !== stored) readBlock(name, buf, 'data', h.offset, h.size, res.problems, { from, to })
    from = to // the separator is >= the last key of its block and <= the next block's first
  }
  return res
}

export const isTableFile = (name: string): boolean => /^\d+\.(ldb|sst)$/.test(name)

/** Check every table file of a LevelDB directory. */
export function checkTables (dir: string): TableCheck[] {
  return readdirSync(dir).filter(isTableFile).sort().map(name => checkTableBytes(name, readFileSync(join(dir, name))))
}

/**
 * The highest sequence number of each of `keys` (user keys, as latin1 strings) in a table:
 * only the data blocks whose index range can hold the key are read.
 */
export function newestVersions (name: string, buf: Buffer, keys: Set<string>, into: Map<string, number>): void {
  if (!keys.size) return
  const sorted = [...keys].map(k => Buffer.from(k, 'latin1'))
  let low: Buffer | null = null
  for (const { key, offset, size } of tableIndex(name, buf)) {
    const high = key.subarray(0, -8)
    // The block holds user keys from the previous separator's to its own (both included).
    if (sorted.some(k => (!low || Buffer.compare(k, low) >= 0) && Buffer.compare(k, high) <= 0)) {
      for (const d of blockEntries(blockContents(buf, offset, size)).entries) {
        const k = internalKey(d.key)
        const s = k?.key.toString('latin1')
        if (k && s !== undefined && keys.has(s) && k.seq > (into.get(s) ?? -1)) into.set(s, k.seq)
      }
    }
    low = high
  }
}

/** The index of a table: each data block's separator key and place (the index's CRC checked). */
export function tableIndex (name: string, buf: Buffer): Array<{ key: Buffer, offset: number, size: number }> {
  const { index } = footerOf(name, buf)
  const block = readBlock(name, buf, 'index', index.offset, index.size, [])
  if (!block) throw new CpfsError('BLOCK_CHECKSUM', `table ${name}: its index block does not read`)
  return blockEntries(block).entries.map(e => ({ key: e.key, ...handle(e.value, 0) }))
}

/** A block's contents, decompressed (its CRC not checked). */
export function blockContents (buf: Buffer, offset: number, size: number): Buffer {
  const raw = buf.subarray(offset, offset + size)
  return buf[offset + size] === 1 ? snappyDecode(raw) : raw
}
