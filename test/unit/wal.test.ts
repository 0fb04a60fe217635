// The write-ahead log (src/store/wal.ts) and its replay when a store opens: records come back
// in order, a torn or corrupt end stops the log (never a wrong batch), records LevelDB has
// already are skipped, and sequence numbers go on increasing across reopenings. Real files and
// a real LevelDB, no mount.
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Wal, WAL_SEQ_KEY } from '../../src/store/wal.js'
import { Store } from '../../src/store/store.js'
import { decode } from '../../src/store/codec.js'
import type { BatchOp } from '../../src/store/keys.js'

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
