// The bytes of a pack file (packs.ts): chunk bytes written once, in order, outside LevelDB.
// A pack describes itself, so that a scan alone can rebuild what LevelDB says about it and
// fsck can check it without LevelDB:
//
//   file header (32 bytes)   "CPFSPACK" | u32 format version | u32 flags (0) | u64 pack id | u64 created (ms)
//   record header (52 bytes) "CHNK" | SHA-256 of the chunk (32) | u32 stored length | u32 chunk length
//                            | u8 compression (0: none) | 3 bytes zero | u32 CRC-32 of the 48 bytes before it
//   record data              `stored length` bytes
//   ...                      more records, up to the end of the file
//
// Integers are little-endian. The header's CRC makes a torn or damaged header show as such
// (a scan stops there); the data is checked against its SHA-256 on every read.
import { crc32 } from 'node:zlib'

export const PACK_MAGIC = Buffer.from('CPFSPACK')
export const PACK_VERSION = 1
export const PACK_HEADER = 32
export const RECORD_MAGIC = Buffer.from('CHNK')
export const RECORD_HEADER = 52
/** Compression of a record's bytes: none (local packs: chunks are hashed, stored and read as they are). */
export const COMPRESSION_NONE = 0
/** Brotli: only in a remote's packs (remote/packer.ts), which are written once and read whole. */
export const COMPRESSION_BROTLI = 1

export interface PackHeader {
  version: number
  id: number
  created: number
}

export interface RecordHeader {
  hash: Buffer
  /** Bytes of data after the header. */
  stored: number
  /** Bytes of the chunk (stored, once decompressed). */
  length: number
  compression: number
}

export function packHeader (id: number, created = Date.now()): Buffer {
  const b = Buffer.alloc(PACK_HEADER)
  PACK_MAGIC.copy(b, 0)
  b.writeUInt32LE(PACK_VERSION, 8)
  b.writeUInt32LE(0, 12)
  b.writeBigUInt64LE(BigInt(id), 16)
  b.writeBigUInt64LE(BigInt(created), 24)
  return b
}

/** The file header, or why it is not one. */
export function readPackHeader (b: Buffer): PackHeader | string {
  if (b.length < PACK_HEADER) return 'shorter than a pack header'
  if (!b.subarray(0, 8).equals(PACK_MAGIC)) return 'not a cpfs pack (bad magic)'
  const version = b.readUInt32LE(8)
  if (version !== PACK_VERSION) return `pack format version ${version}, this cpfs reads ${PACK_VERSION}`
  return { version, id: Number(b.readBigUInt64LE(16)), created: Number(b.readBigUInt64LE(24)) }
}

export function recordHeader (hash: Buffer, length: number, stored = length, compression = COMPRESSION_NONE): Buffer {
  const b = Buffer.alloc(RECORD_HEADER)
  RECORD_MAGIC.copy(b, 0)
  hash.copy(b, 4)
  b.writeUInt32LE(stored, 36)
  b.writeUInt32LE(length, 40)
  b[44] = compression
  b.writeUInt32LE(crc32(b.subarray(0, 48)), 48)
  return b
}

/** A record header, or why it is not one (torn, damaged, or not a record at all). */
export function readRecordHeader (b: Buffer): RecordHeader | string {
  if (b.length < RECORD_HEADER) return 'torn record header'
  if (!b.subarray(0, 4).equals(RECORD_MAGIC)) return 'no record here (bad magic)'
  if (crc32(b.subarray(0, 48)) !== b.readUInt32LE(48)) return 'record header fails its checksum'
  const compression = b[44]
  if (compression !== COMPRESSION_NONE && compression !== COMPRESSION_BROTLI) return `unknown compression ${compression}`
  return { hash: Buffer.from(b.subarray(4, 36)), stored: b.readUInt32LE(36), length: b.readUInt32LE(40), compression }
}

export interface ScannedRecord extends RecordHeader {
  /** Offset of the record's data in the file. */
  offset: number
}

export interface PackScan {
  header: PackHeader | null
  records: ScannedRecord[]
  /** Where the intact records end: what follows is a torn tail (or damage), if anything. */
  end: number
  /** Why the scan stopped before the end of the file, or null. */
  stopped: string | null
}

/**
 * Walk a pack's records with `read(offset, length)` (which may return fewer bytes at the end of
 * the file), up to `size`. A header that does not check stops the walk: nothing after it can be
 * found without trusting the length it holds.
 */
export function scanPack (read: (offset: number, length: number) => Buffer, size: number): PackScan {
  const h = readPackHeader(read(0, PACK_HEADER))
  if (typeof h === 'string') return { header: null, records: [], end: 0, stopped: h }
  const records: ScannedRecord[] = []
  let at = PACK_HEADER
  while (at < size) {
    const r = readRecordHeader(read(at, RECORD_HEADER))
    if (typeof r === 'string') return { header: h, records, end: at, stopped: r }
    if (at + RECORD_HEADER + r.stored > size) return { header: h, records, end: at, stopped: 'torn record data' }
    records.push({ ...r, offset: at + RECORD_HEADER })
    at += RECORD_HEADER + r.stored
  }
  return { header: h, records, end: at, stopped: null }
}

/** Where LevelDB says a chunk is: a pack, the offset of its data there, its stored length. */
export interface ChunkRef {
  pack: number
  offset: number
  length: number
}
