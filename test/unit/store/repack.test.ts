// Giving pack space back (src/store/repack.ts, through collectGarbage): a pack nothing live is
// in is deleted; a mostly dead one is repacked — its live chunks copied forward, their
// references switched, the old pack deleted — and every live chunk still reads.
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../../../src/store/store.js'
import { ChunkStore } from '../../../src/store/chunks.js'
import { collectGarbage } from '../../../src/store/gc.js'
import { encodeEntry } from '../../../src/store/codec.js'
import { entryKey, type BatchOp } from '../../../src/store/keys.js'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-repack-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))

const file = (chunks: Buffer[]): Buffer => encodeEntry({ kind: 'f', mode: 0o644, size: chunks.length, mtime: 0, chunks: new Map(chunks.map((c, i) => [i, c])) } as any)

t.test('a dead pack is deleted, a mostly dead one repacked; live chunks read the same', async t => {
  const path = join(dir, 's')
  let s = await Store.open(path, { workspace: '/w', create: true })
  let c = new ChunkStore(s)
  // Pack 1: a small live chunk and a big dead one. Pack 2: only dead chunks.
  const small = Buffer.alloc(1000, 's')
  const big = Buffer.alloc(60000, 'b')
  const live = c.put(small)
  c.put(big)
  let ops: BatchOp[] = []
  c.drain(ops)
  ops.push({ type: 'put', key: entryKey(1, '/live'), value: file([live]) })
  await s.batch(ops, true)
  s.packs.seal()
  c.put(Buffer.alloc(5000, 'd'))
  ops = []
  c.drain(ops)
  await s.batch(ops, true)
  await s.close()
  t.equal(fs.readdirSync(join(path, 'packs')).length, 2, 'two packs')

  s = await Store.open(path, { workspace: '/w', create: false })
  const before = s.chunkRef(live.toString('hex'))!
  t.equal(before.pack, 1)
  const r = await collectGarbage(s)
  t.equal(r.chunksDeleted, 2, 'the two dead chunks')
  const after = s.chunkRef(live.toString('hex'))!
  t.not(after.pack, 1, 'the live chunk was copied to another pack')
  t.same(s.packs.ids(), [after.pack], 'both old packs are gone')
  c = new ChunkStore(s)
  t.ok(c.get(live).equals(small), 'the live chunk reads, checked against its hash')
  await s.close()
  const names = fs.readdirSync(join(path, 'packs'))
  t.equal(names.length, 1)
  t.ok(fs.statSync(join(path, 'packs', names[0])).size < 2000, 'what is left is about the live bytes')
  s = await Store.open(path, { workspace: '/w', create: false })
  t.ok(new ChunkStore(s).get(live).equals(small), 'and reads after reopening')
  const again = await collectGarbage(s)
  t.same(again, { layersDeleted: 0, chunksDeleted: 0, bytesFreed: 0 }, 'a second run finds nothing')
  t.same(s.packs.ids().length, 1, 'and leaves the repacked pack alone')
  await s.close()
})
