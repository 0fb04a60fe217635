// The chunk store's head-only chunks (src/store/chunks.ts): a chunk freed by one batch and put
// again by a file written before that batch reaches LevelDB must be stored again, or the
// delete, landing after the put was taken as "already stored", takes the new file's data.
// A real LevelDB, no mount (the mounted case is in robustness.test.ts's stress test).
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../../src/store/store.js'
import { ChunkStore } from '../../src/store/chunks.js'
import type { BatchOp } from '../../src/store/keys.js'

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
