// The write-ahead log (src/store/wal.ts) and its replay when a store opens: records come back
// in order, a torn or corrupt end stops the log (never a wrong batch), records LevelDB has
// already are skipped, and sequence numbers go on increasing across reopenings. Real files and
// a real LevelDB, no mount.
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Wal, WAL_SEQ_KEY, scanWal } from '../../../src/store/wal.js'
import { Store } from '../../../src/store/store.js'
import { decode } from '../../../src/store/codec.js'
import type { BatchOp } from '../../../src/store/keys.js'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-wal-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
const put = (key: string, v: string): BatchOp => ({ type: 'put', key, value: Buffer.from(v) })

t.test('records round-trip; a torn end and a flipped byte end the log there', async t => {
  const d = fs.mkdtempSync(join(dir, 'a-'))
  const w = Wal.open(d)
  t.equal(w.append([put('x1', 'one'), { type: 'del', key: 'gone' }]), 1)
  t.equal(w.append([put('x2', 'two')]), 2)
  t.equal(w.append([put('x3', 'three')]), 3)
  w.close()
  const file = join(d, 'wal')
  const full = fs.readFileSync(file)
  const read = () => { const r = Wal.open(d); try { return r.records() } finally { r.close() } }
  t.same(read().map(r => r.seq), [1, 2, 3])
  t.same(read()[0].ops, [put('x1', 'one'), { type: 'del', key: 'gone' }], 'puts and deletes as written')
  fs.writeFileSync(file, full.subarray(0, full.length - 3)) // killed in the middle of the last write
  t.same(read().map(r => r.seq), [1, 2], 'a torn last record is not a record')
  const flipped = Buffer.from(full)
  flipped[full.length - 20] ^= 0xff
  fs.writeFileSync(file, flipped)
  t.same(read().map(r => r.seq), [1, 2], 'nor one whose checksum fails')
  fs.writeFileSync(file, Buffer.concat([full, Buffer.alloc(5, 0xff)]))
  t.same(read().map(r => r.seq), [1, 2, 3], 'garbage after the last record is ignored')
})

t.test('opening a store replays what LevelDB does not have, once, and numbering goes on', async t => {
  const d = fs.mkdtempSync(join(dir, 'b-'))
  let s = await Store.open(d, { workspace: '/w', create: true })
  const seq1 = s.wal.append([put('k1', 'a')])
  await s.db.batch([{ type: 'put', key: 'k1', value: Buffer.from('a') }, { type: 'put', key: WAL_SEQ_KEY, value: Buffer.from([seq1]) }] as any)
  // LevelDB holds seq1 (as msgpack: a positive fixint is the byte itself); seq2 and seq3 only the log.
  const seq2 = s.wal.append([put('k2', 'b'), put('k1', 'a2')])
  const seq3 = s.wal.append([{ type: 'del', key: 'k2' }, put('k3', 'c')])
  t.same([seq1, seq2, seq3], [1, 2, 3])
  await s.db.close() // as if the daemon died here (the log's file stays as it is)
  s.wal.close()
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.getSync('k1')?.toString(), 'a2', 'the records LevelDB did not have are applied')
  t.equal(s.getSync('k2'), undefined, 'in order: the later delete wins')
  t.equal(s.getSync('k3')?.toString(), 'c')
  t.equal(decode<number>(s.getSync(WAL_SEQ_KEY)!), 3, 'with the last sequence number')
  t.equal(fs.statSync(join(d, 'wal')).size, 0, 'and the log starts over')
  t.equal(s.wal.append([put('k4', 'd')]), 4, 'numbering goes on after the last replayed record')
  await s.close()
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.getSync('k4')?.toString(), 'd', 'a record written after a replay is replayed too')
  t.equal(s.wal.append([]), 5)
  await s.close()
})

t.test('damage before the end is not a torn end (scanWal)', async t => {
  const d = fs.mkdtempSync(join(dir, 'd-'))
  const w = Wal.open(d)
  for (let i = 1; i <= 4; i++) w.append([put('k' + i, 'value ' + i)])
  w.close()
  const full = fs.readFileSync(join(d, 'wal'))
  const starts: number[] = []
  for (let at = 0; at < full.length; at += 8 + full.readUInt32LE(at)) starts.push(at)
  const variant = (f: (b: Buffer) => void): Buffer => { const b = Buffer.from(full); f(b); return b }

  const payloadFlip = scanWal(variant(b => { b[starts[1] + 10] ^= 0x01 }))
  t.same(payloadFlip.records.map(r => r.seq), [1], 'records before the damage')
  t.equal(payloadFlip.damage?.offset, starts[1], 'damage at the bad record')
  t.match(payloadFlip.damage?.reason, /checksum/)
  t.same(payloadFlip.damage?.after.map(r => r.seq), [3, 4], 'the records after it are found')

  const lengthFlip = scanWal(variant(b => { b[starts[1] + 1] ^= 0x40 })) // the length now reaches past the end
  t.same(lengthFlip.damage?.after.map(r => r.seq), [3, 4], 'a damaged length is not taken for a torn end')

  const crcFlip = scanWal(variant(b => { b[starts[2] + 5] ^= 0x01 }))
  t.same(crcFlip.damage?.after.map(r => r.seq), [4], 'nor a damaged checksum')

  t.equal(scanWal(full.subarray(0, full.length - 5)).damage, null, 'a torn last record is quiet')
  t.same(scanWal(full.subarray(0, full.length - 5)).records.map(r => r.seq), [1, 2, 3])
  t.equal(scanWal(variant(b => { b[b.length - 2] ^= 0x01 })).damage, null, 'so is a bad last record: nothing follows it')
  t.equal(scanWal(full.subarray(0, starts[2] + 3)).damage, null, 'and a torn header')

  // A torn record's bytes are file data, and may hold a copy of a log: not a record of this one.
  const w2 = Wal.open(fs.mkdtempSync(join(dir, 'e-')))
  w2.append([put('z', 'x')])
  const copy = fs.readFileSync(join(dir, fs.readdirSync(dir).find(n => n.startsWith('e-'))!, 'wal'))
  w2.close()
  const torn = Buffer.concat([full.subarray(0, starts[3]), full.subarray(starts[3], starts[3] + 8), copy])
  t.equal(scanWal(torn).damage, null, 'a copied record numbered before the tear does not make it damage')

  const gap = Buffer.concat([full.subarray(0, starts[1]), full.subarray(starts[2])])
  t.match(scanWal(gap).damage?.reason, /record 3 follows record 1/, 'a missing record between good ones is damage')
  t.throws(() => { const r = Wal.open(d); fs.writeFileSync(join(d, 'wal'), gap); try { r.records('/s') } finally { r.close() } }, { code: 'STORE_CORRUPT' }, 'records() refuses it')
})

t.test('opening refuses damage LevelDB does not cover, replays past damage it does', async t => {
  const d = fs.mkdtempSync(join(dir, 'f-'))
  let s = await Store.open(d, { workspace: '/w', create: true })
  for (let i = 1; i <= 4; i++) s.wal.append([put('k' + i, 'v' + i)])
  await s.close()
  const file = join(d, 'wal')
  const full = fs.readFileSync(file)
  const second = 8 + full.readUInt32LE(0)
  const bad = Buffer.from(full)
  bad[second + 10] ^= 0x01
  fs.writeFileSync(file, bad)
  await t.rejects(Store.open(d, { workspace: '/w', create: false }), { code: 'STORE_CORRUPT', message: /write-ahead log of store .* is damaged at byte/ }, 'record 2 is only in the log: refused')
  t.same(fs.readFileSync(file), bad, 'and the log is left as it is')
  s = await Store.open(d, { workspace: '/w', create: false, tolerate: true })
  t.equal(s.problems[0]?.kind, 'wal', 'fsck opens it and sees the damage')
  t.equal(s.getSync('k1'), undefined, 'nothing applied yet')
  await s.close()
  // LevelDB already holds records up to 2: the damage costs nothing.
  s = await Store.open(d, { workspace: '/w', create: false, tolerate: true })
  await s.db.put(WAL_SEQ_KEY, Buffer.from([2]))
  await s.close()
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.getSync('k3')?.toString(), 'v3', 'records after it are replayed')
  t.equal(s.getSync('k4')?.toString(), 'v4')
  await s.close()
})

t.test('a log that starts after what LevelDB holds: LevelDB lost batches', async t => {
  const d = fs.mkdtempSync(join(dir, 'g-'))
  let s = await Store.open(d, { workspace: '/w', create: true })
  s.wal.seq = 7 // records 1..7 reached LevelDB and the log started over; LevelDB then lost them
  s.wal.append([put('k8', 'v8')])
  await s.close()
  await t.rejects(Store.open(d, { workspace: '/w', create: false }), { code: 'STORE_CORRUPT', message: /lost recorded changes 1\.\.7/ })
  s = await Store.open(d, { workspace: '/w', create: false, tolerate: true })
  t.equal(s.problems[0]?.kind, 'lost')
  await s.close()
})
