// How a store notices damage when it opens (src/store/integrity.ts) and what cpfs fsck does
// with it (src/store/fsck.ts): a real LevelDB, no mount (the mounted cases are in
// test/integrity.test.ts).
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../../src/store/store.js'
import { ChunkStore } from '../../src/store/chunks.js'
import { INTEGRITY_KEY, WITNESS_FILE, readWitness } from '../../src/store/integrity.js'
import { fsckStore } from '../../src/store/fsck.js'
import { encode, encodeEntry } from '../../src/store/codec.js'
import { entryKey, turnKey } from '../../src/store/keys.js'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-integrity-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
const put = (key: string, v: string) => ({ type: 'put' as const, key, value: Buffer.from(v) })

t.test('synced batches are counted inside and outside LevelDB; LevelDB behind the witness is a loss', async t => {
  const d = join(dir, 'a')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.batch([put('x', '1')], true)
  await s.batch([put('x', '2')], false)
  await s.batch([put('x', '3')], true)
  t.equal(readWitness(d)?.n, 2, 'the witness follows synced batches only')
  await s.close()
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.syncCount, 2, 'LevelDB holds the same number')
  await s.db.put(INTEGRITY_KEY, encode(1)) // as if LevelDB had lost the last synced batch
  await s.close()
  await t.rejects(Store.open(d, { workspace: '/w', create: false }), { code: 'STORE_CORRUPT', message: /lost its last 1 synced change/ })
  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false, 'fsck reports it')
  t.match(r.repaired.join('\n'), /accepted the history/)
  t.equal((await fsckStore(d, '/w')).clean, true, 'and the store is clean after')
})

t.test('a store of an earlier version (no counter, no witness) opens as before', async t => {
  const d = join(dir, 'b')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.batch([put('x', '1')], true)
  await s.db.del(INTEGRITY_KEY)
  await s.close()
  fs.rmSync(join(d, WITNESS_FILE))
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.syncCount, 0)
  await s.batch([put('x', '2')], true)
  t.equal(readWitness(d)?.n, 1, 'and starts counting')
  await s.close()
})

t.test('fsck: a missing turn record is reported and rebuilt empty', async t => {
  const d = join(dir, 'c')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.db.del(turnKey(1))
  await s.close()
  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false)
  t.match(r.damage.join('\n'), /missing the record of turn 1/)
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.turnRecord(1).openedAt, 0, 'an empty record')
  await s.close()
})

t.test('fsck: damaged and missing chunks name their files and turns; unreferenced chunks and unreadable records go', async t => {
  const d = join(dir, 'd')
  const s = await Store.open(d, { workspace: '/w', create: true })
  const c = new ChunkStore(s)
  const good = c.put(Buffer.from('good bytes'))
  const bad = c.put(Buffer.from('bytes to damage'))
  const missing = Buffer.alloc(32, 9)
  c.put(Buffer.from('nobody uses me'))
  const ops: any[] = []
  c.drain(ops)
  const file = (chunk: Buffer) => encodeEntry({ t: 'f', mode: 0o644, size: 10, mtime: 0, chunks: new Map([[0, chunk]]) } as any)
  ops.push({ type: 'put', key: entryKey(1, '/good.txt'), value: file(good) })
  ops.push({ type: 'put', key: entryKey(1, '/bad.txt'), value: file(bad) })
  ops.push({ type: 'put', key: entryKey(1, '/gone.txt'), value: file(missing) })
  ops.push({ type: 'put', key: entryKey(1, '/garbled.txt'), value: Buffer.from([0x85, 0xa1]) })
  await s.batch(ops, true)
  await s.db.put('c' + bad.toString('hex'), Buffer.from('bytes to damagf'))
  await s.close()
  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false)
  const lost = r.lost.map(l => `${l.path} in ${l.where}`).sort()
  t.same(lost, ['/bad.txt in turn 1', '/garbled.txt in turn 1', '/gone.txt in turn 1'], 'what is lost, where')
  t.match(r.damage.join('\n'), /chunk [0-9a-f]+ is damaged/)
  t.match(r.damage.join('\n'), /chunk 0909[0-9a-f]+ is missing/)
  t.match(r.repaired.join('\n'), /deleted 1 unreferenced chunk/)
  t.match(r.repaired.join('\n'), /deleted 1 record\(s\) that do not decode/)
  const again = await fsckStore(d, '/w')
  t.same(again.lost.map(l => l.path).sort(), ['/bad.txt', '/gone.txt'], 'a damaged chunk stays damaged: the next run says so again')
})

t.test('fsck: LevelDB that cannot open is rebuilt by its repair', async t => {
  const d = join(dir, 'e')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.batch([{ type: 'put', key: entryKey(1, '/a'), value: encodeEntry({ t: 'd', mode: 0o755 } as any) }], true)
  await s.close()
  for (const name of fs.readdirSync(join(d, 'db'))) {
    if (name.startsWith('MANIFEST')) fs.writeFileSync(join(d, 'db', name), Buffer.alloc(4096, 0xab))
  }
  await t.rejects(Store.open(d, { workspace: '/w', create: false }), { code: 'STORE_CORRUPT', message: /is corrupt/ })
  const r = await fsckStore(d, '/w')
  t.match(r.repaired.join('\n'), /LevelDB's repair rebuilt/)
  s = await Store.open(d, { workspace: '/w', create: false })
  t.ok(s.getSync(entryKey(1, '/a')), 'the records are back')
  await s.close()
})
