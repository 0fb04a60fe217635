// LevelDB's table files (*.ldb, *.sst) checked by cpfs itself: classic-level opens LevelDB
// without verify_checksums or paranoid_checks, so LevelDB hands back whatever bytes a damaged
// block holds (and its own repair does not look either). Written from LevelDB's
// doc/table_format.md (CRC32C in crc32c.ts, Snappy in snappy.ts):
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
import { crc32c, locateByte, maskCrc } from './crc32c.js'
import { snappy, snappyDecode } from './snappy.js'

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
  /** The key of the record the fixed byte belongs to. */
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
    if (fix.at < size) {
      // The record: where the contents as stored first differ from the contents put right.
      const was = fixed[size] === 1 ? snappy(data.subarray(0, size)).out : data.subarray(0, size)
      let i = 0
      while (i < was.length && i < r.contents!.length && was[i] === r.contents![i]) i++
      problem.fixKey = r.entries.find(e => i < e.end)?.key.subarray(0, -8)
    }
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
