// The pack file format (src/store/pack-format.ts): headers that describe themselves, a
// checksum on every record header, a scan that stops at a torn or damaged header.
import t from 'tap'
import { createHash } from 'node:crypto'
import { PACK_HEADER, RECORD_HEADER, packHeader, readPackHeader, readRecordHeader, recordHeader, scanPack } from '../../../src/store/pack-format.js'

const sha = (b: Buffer): Buffer => createHash('sha256').update(b).digest()

function pack (chunks: Buffer[]): Buffer {
  return Buffer.concat([packHeader(7, 1234), ...chunks.flatMap(c => [recordHeader(sha(c), c.length), c])])
}

const reader = (b: Buffer) => (offset: number, length: number): Buffer => b.subarray(offset, offset + length)

t.test('a pack header names the format, its version and the pack', async t => {
  const h = packHeader(42, 99)
  t.equal(h.length, PACK_HEADER)
  t.equal(h.subarray(0, 8).toString(), 'CPFSPACK', 'magic')
  t.same(readPackHeader(h), { version: 1, id: 42, created: 99 })
  const future = Buffer.from(h)
  future.writeUInt32LE(2, 8)
  t.match(readPackHeader(future), /version 2/, 'a later format is refused, by name')
  t.match(readPackHeader(Buffer.from('not a pack at all, not at all......')), /bad magic/)
  t.match(readPackHeader(h.subarray(0, 10)), /shorter/)
})

t.test('a record header carries the chunk\'s SHA-256, its lengths, its compression, and a checksum of itself', async t => {
  const data = Buffer.from('some chunk bytes')
  const h = recordHeader(sha(data), data.length)
  t.equal(h.length, RECORD_HEADER)
  const r = readRecordHeader(h)
  t.same(r, { hash: sha(data), stored: data.length, length: data.length, compression: 0 })
  for (const at of [0, 5, 36, 40, 44, 50]) {
    const bad = Buffer.from(h)
    bad[at] ^= 0x10
    t.type(readRecordHeader(bad), 'string', `a flipped bit at byte ${at} is found`)
  }
  t.match(readRecordHeader(h.subarray(0, 30)), /torn/)
})

t.test('a scan finds every record, and stops where a crash tore the end', async t => {
  const chunks = [Buffer.alloc(100, 1), Buffer.alloc(65536, 2), Buffer.from('tail')]
  const whole = pack(chunks)
  const s = scanPack(reader(whole), whole.length)
  t.same(s.header, { version: 1, id: 7, created: 1234 })
  t.equal(s.stopped, null)
  t.equal(s.end, whole.length)
  t.same(s.records.map(r => whole.subarray(r.offset, r.offset + r.stored)), chunks, 'offsets point at the bytes')
  t.same(s.records.map(r => r.hash), chunks.map(sha), 'with their hashes')
  const lastStart = whole.length - 4 - RECORD_HEADER
  for (const cut of [lastStart + 10, lastStart + RECORD_HEADER + 2]) {
    const torn = whole.subarray(0, cut)
    const ts = scanPack(reader(torn), torn.length)
    t.equal(ts.records.length, 2, `cut at ${cut}: the two whole records`)
    t.equal(ts.end, lastStart, 'and the end of the last whole one')
    t.type(ts.stopped, 'string')
  }
  const damaged = Buffer.from(whole)
  damaged[PACK_HEADER + RECORD_HEADER + 100 + 3] ^= 1 // the second record's header
  const ds = scanPack(reader(damaged), damaged.length)
  t.equal(ds.records.length, 1, 'a damaged header stops the scan: nothing after it is trusted')
  t.match(ds.stopped, /checksum|magic/)
})
