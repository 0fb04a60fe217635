// Pack files on disk (src/store/packs.ts): appends read back, sealing names a pack by what it
// holds, a pack a crash left open is cut at its last whole record and sealed, fully freed packs
// of this session can go.
import t from 'tap'
import * as fs from 'node:fs'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PackSet, SEAL_AT } from '../../../src/store/packs.js'
import { PACK_HEADER, RECORD_HEADER } from '../../../src/store/pack-format.js'

const sha = (b: Buffer): Buffer => createHash('sha256').update(b).digest()
const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-packs-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))

t.test('appends read back; a sealed pack is named <id>-<sha256 of its headers>.pack; sync and reopen', async t => {
  const store = join(dir, 'a')
  fs.mkdirSync(store)
  const p = PackSet.open(store)
  const one = Buffer.alloc(1000, 1)
  const two = Buffer.alloc(65536, 2)
  const r1 = p.append(sha(one), one)
  const r2 = p.append(sha(two), two)
  t.same(r1, { pack: 1, offset: PACK_HEADER + RECORD_HEADER, length: 1000 })
  t.ok(p.read(r1).equals(one) && p.read(r2).equals(two), 'the bytes read back before any sync')
  t.same(fs.readdirSync(p.dir), ['0000000001.open'], 'the pack being written')
  await p.sync()
  p.close()
  const names = fs.readdirSync(join(store, 'packs'))
  t.equal(names.length, 1)
  const buf = fs.readFileSync(join(store, 'packs', names[0]))
  const h = createHash('sha256').update(buf.subarray(0, PACK_HEADER))
  h.update(buf.subarray(PACK_HEADER, PACK_HEADER + RECORD_HEADER))
  h.update(buf.subarray(r2.offset - RECORD_HEADER, r2.offset))
  t.equal(names[0], `0000000001-${h.digest('hex')}.pack`, 'sealed when the store closes, named by its headers\' hash')
  const again = PackSet.open(store)
  t.ok(again.read(r2).equals(two), 'read after reopening')
  const r3 = again.append(sha(one), one)
  t.equal(r3.pack, 2, 'new appends go to a new pack')
  again.close()
})

t.test('a pack is sealed once it reaches SEAL_AT', async t => {
  const store = join(dir, 'b')
  fs.mkdirSync(store)
  const p = PackSet.open(store)
  const big = Buffer.alloc(1024 * 1024)
  for (let i = 0; i * big.length <= SEAL_AT; i++) {
    big.writeUInt32LE(i)
    p.append(sha(big), big)
  }
  t.equal(p.ids().length, 2, 'a second pack was started')
  t.match(p.fileName(1)!, /^0000000001-[0-9a-f]{64}\.pack$/, 'the first is sealed')
  p.close()
})

t.test('appendAll: many chunks in few writes, split where a pack is sealed, each readable; the sealed pack is synced in the background', async t => {
  const store = join(dir, 'many')
  fs.mkdirSync(store)
  const p = PackSet.open(store)
  const items: Array<[Buffer, Buffer]> = []
  for (let i = 0; i < 600; i++) {
    const d = Buffer.alloc(64 * 1024, i % 251)
    d.writeUInt32LE(i)
    items.push([sha(d), d])
  }
  const refs = p.appendAll(items)
  t.equal(refs.length, items.length, 'one reference a chunk')
  t.ok(refs.every((r, i) => p.read(r).equals(items[i][1])), 'every chunk reads back')
  t.same([...new Set(refs.map(r => r.pack))], [1, 2, 3], '600 × 64 KiB crosses SEAL_AT twice')
  t.ok(refs.filter(r => r.pack === 1).length * 64 * 1024 >= SEAL_AT, 'a pack is sealed only once it reached SEAL_AT')
  t.match(p.fileName(1)!, /^0000000001-[0-9a-f]{64}\.pack$/, 'the first is sealed')
  await p.sync()
  p.close()
  const again = PackSet.open(store)
  t.ok(refs.every((r, i) => again.read(r).equals(items[i][1])), 'and after reopening')
  for (const id of again.ids()) t.equal(again.scan(id).records.length, refs.filter(r => r.pack === id).length, `pack ${id} scans whole`)
  again.close()
})

t.test('a pack left open by a crash: a torn record at its end is cut off and the pack sealed', async t => {
  const store = join(dir, 'c')
  fs.mkdirSync(store)
  const p = PackSet.open(store)
  const a = Buffer.alloc(5000, 'a')
  const b = Buffer.alloc(5000, 'b')
  const ra = p.append(sha(a), a)
  p.append(sha(b), b)
  // kill -9 in the middle of the second append: the file ends inside its bytes.
  const file = join(p.dir, '0000000001.open')
  fs.truncateSync(file, ra.offset + a.length + RECORD_HEADER + 100)
  const again = PackSet.open(store)
  const names = fs.readdirSync(again.dir)
  t.match(names, [/^0000000001-[0-9a-f]{64}\.pack$/], 'sealed')
  t.equal(fs.statSync(join(again.dir, names[0])).size, ra.offset + a.length, 'at the end of its last whole record')
  t.ok(again.read(ra).equals(a), 'which reads')
  again.close()
  // A pack file with no whole record (killed right after it was made) is removed.
  fs.writeFileSync(join(again.dir, '0000000009.open'), Buffer.alloc(10))
  const third = PackSet.open(store)
  t.notOk(fs.existsSync(join(third.dir, '0000000009.open')), 'an empty open pack goes')
  third.close()
})

t.test('packs of this session whose every chunk was freed are reclaimable', async t => {
  const store = join(dir, 'd')
  fs.mkdirSync(store)
  const p = PackSet.open(store)
  const x = Buffer.from('x')
  const y = Buffer.from('y')
  const rx = p.append(sha(x), x)
  p.append(sha(y), y)
  p.noteFreed(rx.pack)
  t.same(p.reclaimable(), [], 'one chunk of two freed: the pack stays')
  p.noteFreed(rx.pack)
  t.same(p.reclaimable(), [rx.pack], 'both freed')
  p.remove(rx.pack)
  t.same(fs.readdirSync(p.dir), [], 'removed')
  t.same(p.ids(), [])
  p.close()
})
