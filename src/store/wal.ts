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
// log: its batch was never answered. Once LevelDB holds everything logged, the file is
// emptied. Nothing here is synced: fsync and sealed turns are synced LevelDB batches.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
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

  /** The intact records, in order (reading stops at the first that is not: a torn end). */
  records (): WalRecord[] {
    const buf = readAll(this.fd)
    const out: WalRecord[] = []
    let at = 0
    while (at + 8 <= buf.length) {
      const len = buf.readUInt32LE(at)
      if (at + 8 + len > buf.length) break
      const payload = buf.subarray(at + 8, at + 8 + len)
      if (crc32(payload) !== buf.readUInt32LE(at + 4)) break
      let seq: number, raw: Array<[string, Buffer | null]>
      try {
        [seq, raw] = decode<[number, Array<[string, Buffer | null]>]>(payload)
      } catch {
        break
      }
      out.push({ seq, ops: raw.map(([key, value]) => value === null ? { type: 'del', key } : { type: 'put', key, value: Buffer.from(value) }) })
      at += 8 + len
    }
    return out
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
