// The write-ahead log in front of LevelDB. The mount answers a create, a rename, a chmod or a
// close only once the change would survive kill -9 of the daemon. LevelDB's own log gives
// that, but classic-level writes only from its thread pool: every such answer waited for a
// hop to another thread and back (≈ 50–100 µs on this machine kind, more than the request
// itself). Appending the same batch to this file is one write(2) on the daemon's thread
// (≈ 3 µs); the batches go on to LevelDB a few milliseconds later, several at a time.
//
// Each record is one batch: [u32 length][u32 CRC-32 of the payload][payload], the payload a
// MessagePack [seq, [[key, value | null], ...]] (null: delete). Every LevelDB batch that
// carries logged records also puts WAL_SEQ_KEY = the last seq it holds, atomically with
// them. Opening the store replays the records LevelDB does not have yet (seq above that key)
// in order, and a torn record at the end (the daemon killed in the middle of a write) ends the
// log: its batch was never answered. A bad record with good ones after it is damage, not a
// torn end: opening refuses (scanWal) and `cpfs fsck` decides. Once LevelDB holds everything
// logged, the file is emptied. Nothing here is synced: fsync and sealed turns are synced LevelDB batches.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { CpfsError } from '../errors.js'
import { decode, encode } from './codec.js'
import type { BatchOp } from './keys.js'

export const WAL_SEQ_KEY = 'w'

/** Emptied once LevelDB holds all of it and it is at least this big (an ftruncate costs ~100 µs). */
const RESET_AT = 4 * 1024 * 1024

export interface WalRecord {
  seq: number
  ops: BatchOp[]
}

export class Wal {
  private readonly fd: number
  /** Bytes in the file (records not yet emptied out). */
  size = 0
  /** The last sequence number handed out. */
  seq = 0

  private constructor (fd: number) {
    this.fd = fd
    this.size = fs.fstatSync(fd).size
  }

  static open (storePath: string): Wal {
    return new Wal(fs.openSync(join(storePath, 'wal'), fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600))
  }

  /**
   * The intact records, in order. A torn end (the daemon killed in the middle of a write) ends
   * the log quietly; damage before the end (see `scan`) is an error: a record lost there was
   * answered, and the records after it must not be applied without it.
   */
  records (storePath = ''): WalRecord[] {
    const { records, damage } = this.scan()
    if (damage) throw walCorrupt(storePath, damage)
    return records
  }

  /** Every record up to the first bad one, and what is wrong if that is damage, not a torn end. */
  scan (): WalScan {
    return scanWal(readAll(this.fd))
  }

  /** Log one batch; returns its sequence number. Durable against kill -9 once this returns. */
  append (ops: BatchOp[]): number {
    const seq = this.seq + 1
    const payload = encode([seq, ops.map(op => [op.key, op.type === 'put' ? op.value : null])])
    const head = Buffer.allocUnsafe(8)
    head.writeUInt32LE(payload.length, 0)
    head.writeUInt32LE(crc32(payload), 4)
    const rec = Buffer.concat([head, payload])
    let off = 0
    while (off < rec.length) off += fs.writeSync(this.fd, rec, off, rec.length - off, this.size + off)
    this.size += rec.length
    this.seq = seq
    return seq
  }

  /** LevelDB holds every record up to `seq`: when that is all of them, the file may start over. */
  landed (seq: number, force = false): void {
    if (seq < this.seq || this.size === 0 || (!force && this.size < RESET_AT)) return
    fs.ftruncateSync(this.fd, 0)
    this.size = 0
  }

  private closed = false

  close (): void {
    if (this.closed) return
    this.closed = true
    fs.closeSync(this.fd)
  }
}

export interface WalDamage {
  /** Byte offset of the first bad record. */
  offset: number
  reason: string
  /** Valid records found after the bad one (their changes cannot be applied without it). */
  after: WalRecord[]
}

export interface WalScan {
  records: WalRecord[]
  damage: WalDamage | null
}

export function walCorrupt (storePath: string, d: WalDamage, workspace = ''): CpfsError {
  return new CpfsError('STORE_CORRUPT', `the write-ahead log of store ${storePath} is damaged at byte ${d.offset} (${d.reason}; ${d.after.length} later record(s) cannot be applied)`, `run cpfs fsck ${workspace ? workspace + ' ' : ''}to apply what can be saved and list what is lost`)
}

/** One record at `at`, or why there is none. */
function recordAt (buf: Buffer, at: number): WalRecord | string {
  if (at + 8 > buf.length) return 'torn header'
  const len = buf.readUInt32LE(at)
  if (at + 8 + len > buf.length) return 'length past the end'
  const payload = buf.subarray(at + 8, at + 8 + len)
  if (crc32(payload) !== buf.readUInt32LE(at + 4)) return 'checksum mismatch'
  let seq: number, raw: Array<[string, Buffer | null]>
  try {
    [seq, raw] = decode<[number, Array<[string, Buffer | null]>]>(payload)
    if (!Number.isSafeInteger(seq) || !Array.isArray(raw)) return 'undecodable record'
    return { seq, ops: raw.map(([key, value]) => value === null ? { type: 'del', key } : { type: 'put', key, value: Buffer.from(value) }) }
  } catch {
    return 'undecodable record'
  }
}

/**
 * Read records until the first bad one. A bad record is a torn end only if nothing valid
 * follows it: an append is one pwrite at the end of the file, so a kill leaves a prefix of the
 * last record and never a good record behind a bad one. A flipped byte in the middle (or in a
 * length field, which hides where the next record starts) leaves good records after it: look
 * for one at every later offset (cheap: a payload starts with 0x92, a two-element array).
 * Sequence numbers must follow each other; a gap is damage too.
 */
export function scanWal (buf: Buffer): WalScan {
  const records: WalRecord[] = []
  let at = 0
  while (at < buf.length) {
    const r = recordAt(buf, at)
    if (typeof r === 'string') {
      const after = recordsAfter(buf, at + 1, records[records.length - 1]?.seq ?? 0)
      return { records, damage: after.length ? { offset: at, reason: r, after } : null }
    }
    const prev = records[records.length - 1]
    if (prev && r.seq !== prev.seq + 1) {
      return { records, damage: { offset: at, reason: `record ${r.seq} follows record ${prev.seq}`, after: recordsAfter(buf, at, 0) } }
    }
    records.push(r)
    at += 8 + buf.readUInt32LE(at)
  }
  return { records, damage: null }
}

/**
 * The valid records from the first one found at or after `from` on, numbered above `seq` (the
 * bytes of a torn record are file data, which may hold anything, even a copy of a log: only a
 * record that continues the numbering counts).
 */
function recordsAfter (buf: Buffer, from: number, seq: number): WalRecord[] {
  for (let o = from; o + 9 <= buf.length; o++) {
    if (buf[o + 8] !== 0x92) continue
    const r = recordAt(buf, o)
    if (typeof r === 'string' || r.seq <= seq) continue
    const out: WalRecord[] = [r]
    let at = o + 8 + buf.readUInt32LE(o)
    for (;;) {
      const n = recordAt(buf, at)
      if (typeof n === 'string' || n.seq !== out[out.length - 1].seq + 1) break
      out.push(n)
      at += 8 + buf.readUInt32LE(at)
    }
    return out
  }
  return []
}

function readAll (fd: number): Buffer {
  const size = fs.fstatSync(fd).size
  const buf = Buffer.allocUnsafe(size)
  let got = 0
  while (got < size) {
    const n = fs.readSync(fd, buf, got, size - got, got)
    if (n === 0) break
    got += n
  }
  return buf.subarray(0, got)
}

/** The op that records, in the same LevelDB batch, that LevelDB now holds records up to `seq`. */
export function walSeqOp (seq: number): BatchOp {
  return { type: 'put', key: WAL_SEQ_KEY, value: encode(seq) }
}
