// The chunk store's head-only chunks (src/store/chunks.ts): a chunk freed by one batch and put
// again by a file written before that batch reaches LevelDB must be stored again, or the
// delete, landing after the put was taken as "already stored", takes the new file's data.
// A real LevelDB, no mount (the mounted case is in robustness.test.ts's stress test).
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHash } from 'node:crypto'
import { Store } from '../../../src/store/store.js'
import { ChunkStore } from '../../../src/store/chunks.js'
import type { BatchOp } from '../../../src/store/keys.js'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-chunks-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))

async function batch (s: Store, c: ChunkStore, ops: BatchOp[]): Promise<void> {
  const { hexes } = c.drain(ops)
  await s.batch(ops, false)
  c.landed(hexes)
}

t.test('a chunk freed and put again before its delete lands is stored again', async t => {
  const s = await Store.open(join(dir, 'a'), { workspace: '/w', create: true })
  t.teardown(() => s.close())
  const c = new ChunkStore(s)
  const data = Buffer.from('x')
  const h = c.put(data, true)
  await batch(s, c, [])
  t.ok(new ChunkStore(s).get(h).equals(data), 'stored')
  // File A is deleted: its chunk is freed into batch 1, which has not reached LevelDB ...
  const ops1: BatchOp[] = []
  t.ok(c.free(h.toString('hex'), ops1) > 0, 'freed')
  const drained1 = c.drain(ops1)
  t.ok(ops1.some(o => o.type === 'del'), 'batch 1 deletes the chunk')
  // ... when file B, written with the same byte, is flushed.
  c.put(data, true)
  const ops2: BatchOp[] = []
  const drained2 = c.drain(ops2)
  t.ok(ops2.some(o => o.type === 'put'), 'batch 2 stores the chunk again')
  await s.batch(ops1, false)
  c.landed(drained1.hexes)
  await s.batch(ops2, false)
  c.landed(drained2.hexes)
  t.ok(c.get(h).equals(data), 'B reads its byte')
  const fresh = new ChunkStore(s)
  t.ok(fresh.get(h).equals(data), 'and LevelDB has it')
  // Once the delete has landed, a put finds the chunk gone in LevelDB and stores it anyway.
  const ops3: BatchOp[] = []
  c.free(h.toString('hex'), ops3)
  await batch(s, c, ops3)
  t.throws(() => new ChunkStore(s).get(h), { code: 'STORE_CORRUPT' }, 'freed for real when nothing put it again')
  c.put(data, true)
  await batch(s, c, [])
  t.ok(new ChunkStore(s).get(h).equals(data), 'and a later put stores it')
})

t.test('several batches in flight for one chunk: only the last delete to land ends its deleting state', async t => {
  const s = await Store.open(join(dir, 'b'), { workspace: '/w', create: true })
  t.teardown(() => s.close())
  const c = new ChunkStore(s)
  const data = Buffer.from('z')
  const h = c.put(data, true)
  const hex = h.toString('hex')
  await batch(s, c, [])
  // Freed (batch 1), put again (batch 2), freed again (batch 3): none has landed yet.
  const ops1: BatchOp[] = []
  c.free(hex, ops1)
  const d1 = c.drain(ops1)
  c.put(data, true)
  const ops2: BatchOp[] = []
  const d2 = c.drain(ops2)
  t.ok(ops2.some(o => o.type === 'put'), 'batch 2 stores it again')
  const ops3: BatchOp[] = []
  c.free(hex, ops3)
  const d3 = c.drain(ops3)
  t.ok(ops3.some(o => o.type === 'del'), 'batch 3 deletes it again')
  // Batches 1 and 2 land: LevelDB holds the chunk, batch 3's delete is still on its way.
  await s.batch(ops1, false)
  c.landed(d1.hexes)
  await s.batch(ops2, false)
  c.landed(d2.hexes)
  // A file written now with the same byte must store it, not count on what batch 3 removes.
  c.put(data, true)
  const ops4: BatchOp[] = []
  const d4 = c.drain(ops4)
  t.ok(ops4.some(o => o.type === 'put'), 'a put while a later delete is in flight stores the chunk')
  await s.batch(ops3, false)
  c.landed(d3.hexes)
  await s.batch(ops4, false)
  c.landed(d4.hexes)
  t.ok(new ChunkStore(s).get(h).equals(data), 'and LevelDB has it at the end')
})

t.test('a chunk whose bytes in its pack do not match its hash is an error, never data', async t => {
  const s = await Store.open(join(dir, 'corrupt'), { workspace: '/w', create: true })
  t.teardown(() => s.close())
  const c = new ChunkStore(s)
  const data = Buffer.alloc(1000, 7)
  const h = c.put(data)
  await batch(s, c, [])
  const bad = Buffer.from(data)
  bad[500] ^= 1
  // One flipped bit on disk, in the pack file that holds the chunk.
  const ref = s.chunkRef(h.toString('hex'))!
  const fd = fs.openSync(s.packs.path(ref.pack), 'r+')
  fs.writeSync(fd, bad.subarray(500, 501), 0, 1, ref.offset + 500)
  fs.closeSync(fd)
  t.throws(() => c.get(h), { code: 'STORE_CORRUPT' }, 'a written chunk is not kept in memory: read back, it is checked')
  const err = t.throws(() => new ChunkStore(s).get(h), { code: 'STORE_CORRUPT' }, 'read from its pack, it is checked')
  t.match((err as any).message, /chunk [0-9a-f]{64} in store .* is damaged/)
  t.match((err as any).hint, /cpfs fsck/, 'and the fix is named')
  const fresh = new ChunkStore(s)
  t.throws(() => fresh.get(h), { code: 'STORE_CORRUPT' })
  t.throws(() => fresh.get(h), { code: 'STORE_CORRUPT' }, 'a damaged chunk is never cached')
})

t.test('a written chunk\'s buffer is reused once its bytes are in a pack, and its bytes are read from there', async t => {
  const s = await Store.open(join(dir, 'pool'), { workspace: '/w', create: true })
  t.teardown(() => s.close())
  const c = new ChunkStore(s)
  const a = c.buffers.take()
  a.fill(0x61)
  const ha = c.put(a, true, true)
  t.equal(c.get(ha), a, 'queued without a copy')
  await batch(s, c, [])
  t.equal(c.buffers.kept, a.length, 'drained: the buffer is back for reuse')
  const b = c.buffers.take()
  t.equal(b, a, 'the next write takes the same buffer')
  b.fill(0x62)
  const got = c.get(ha)
  t.not(got, a, 'a read of the first chunk does not return the reused buffer')
  t.ok(got.equals(Buffer.alloc(a.length, 0x61)), 'it returns the bytes stored in the pack')
  // A put of bytes already stored gives an owned buffer straight back.
  const dup = c.buffers.take()
  dup.fill(0x61)
  t.same(c.put(dup, true, true), ha, 'same bytes, same hash')
  t.equal(c.buffers.take(), dup, 'the duplicate\'s buffer was given back at once')
})

t.test('a queued written chunk freed before its batch gives its buffer back; buffers of other shapes are never kept', async t => {
  const s = await Store.open(join(dir, 'pool2'), { workspace: '/w', create: true })
  t.teardown(() => s.close())
  const c = new ChunkStore(s)
  const a = c.buffers.take()
  a.fill(0x63)
  const ha = c.put(a, true, true)
  t.ok(c.free(ha.toString('hex'), []) > 0, 'freed while queued')
  t.equal(c.buffers.take(), a, 'its buffer is reused')
  c.buffers.give(Buffer.alloc(100))
  c.buffers.give(Buffer.alloc(a.length * 2).subarray(0, a.length))
  t.equal(c.buffers.kept, 0, 'a short buffer or a view into a bigger one is not taken')
})

t.test('what the chunk store keeps in memory holds no more than its own bytes', async t => {
  const s = await Store.open(join(dir, 'own'), { workspace: '/w', create: true })
  t.teardown(() => s.close())
  const c = new ChunkStore(s)
  // Hashes kept by files are slices of shared slabs, not an allocation each.
  const h1 = c.put(Buffer.from('one'), true)
  const h2 = c.put(Buffer.from('two'), true)
  t.equal(h1.length, 32)
  t.equal(h1.buffer, h2.buffer, 'two hashes, one slab')
  t.equal(h1.toString('hex'), createHash('sha256').update('one').digest('hex'), 'each the SHA-256 of its bytes')
  t.equal(h2.toString('hex'), createHash('sha256').update('two').digest('hex'))
  // A small chunk is a slice of Node's 8 KiB pool when made with Buffer.from: the store keeps
  // (queued, then in the read cache) a copy of its own instead of the whole pool.
  const small = Buffer.from('a few bytes of a small file')
  t.ok(small.buffer.byteLength > small.length, 'the caller\'s buffer is a pool slice')
  const h = c.put(small, true)
  await batch(s, c, [])
  t.equal(c.cachedBytes, 0, 'a written chunk is not cached: the kernel\'s page cache has it')
  t.ok(c.get(h).equals(small), 'read back from its pack')
  t.equal(c.cachedBytes, 0, 'a chunk read once is not cached either')
  t.ok(c.get(h).equals(small), 'read again')
  t.equal(c.cachedBytes, small.length, 'the second read caches it')
  const cached = c.get(h)
  t.ok(cached.equals(small), 'and the third is answered from the cache')
  t.equal(cached.buffer.byteLength, small.length, 'from a buffer of its own length, not the pool slice the pack read made')
  // withBytes reads whole chunks into one buffer the next such read reuses; get's buffers, and
  // what the cache keeps, are their own.
  const whole = Buffer.alloc(64 * 1024, 1)
  const other = Buffer.alloc(64 * 1024, 2)
  const third = Buffer.alloc(64 * 1024, 3)
  const hw = c.put(whole, true)
  const ho = c.put(other, true)
  const h3 = c.put(third, true)
  await batch(s, c, [])
  const got = c.get(h3)
  c.withBytes(hw, b => t.ok(b.equals(whole), 'a whole chunk, inside use'))
  c.withBytes(hw, () => {})
  const kept = c.get(hw) // the third read: from the cache
  t.ok(c.withBytes(ho, b => b.equals(other)), 'another whole chunk read from its pack')
  t.ok(kept.equals(whole), 'leaves the cached one (read three times) as it was')
  t.ok(got.equals(third), 'and a buffer get returned')
  t.ok(c.withBytes(ho, a => c.withBytes(h3, b => a.equals(other) && b.equals(third))), 'a read inside use gets a buffer of its own')
})
