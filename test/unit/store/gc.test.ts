// Garbage collection (src/store/gc.ts): layers no stack references and chunks no remaining
// entry references go; everything a stack, the redo stack or a base entry can still reach
// stays. A history made by a real Session in this process, then collected on its store.
import t from 'tap'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import * as fs from 'node:fs'
import { inProcess, openSession } from '../../contract/filesystems.js'
import { collectGarbage } from '../../../src/store/gc.js'
import { decodeEntry } from '../../../src/store/codec.js'
import type { Entry } from '../../../src/store/entries.js'
import { JOURNAL_KEY, refKey, entryKey, turnKey } from '../../../src/store/keys.js'
import { Store, encodeRef } from '../../../src/store/store.js'
import { tmpDir } from '../helpers.js'

// Entries are looked at through this (the store's field names may change).
const chunkHexes = (e: Entry): string[] => [...((e as { chunks?: Map<number, Buffer | null> }).chunks?.values() ?? [])].flatMap(c => c ? [c.toString('hex')] : [])

t.test('what a rewind left is kept as a branch; once retention drops the branch it is collected; the rest stays', async t => {
  const dir = tmpDir(t, 'gc')
  const lower = join(dir, 'lower')
  fs.mkdirSync(join(lower, 'w'), { recursive: true })
  const storePath = join(dir, 'store')
  let { session, close } = await openSession(lower, storePath)
  let w = inProcess(session, 'w', 0o022)
  await w.writeFile('kept', 'bytes of turn 1')
  await session.turn()
  await w.writeFile('dropped', 'bytes of turn 2, rewound')
  await session.persister.flushAll(true)
  const droppedLayer = session.headLayer
  const droppedHexes = chunkHexes(decodeEntry(session.store.getSync(entryKey(droppedLayer, '/w/dropped'))!))
  t.equal(droppedHexes.length, 1)
  await session.turn()
  await session.rewind(2)
  await w.writeFile('after', 'a write: the rewound turns are kept as a branch')
  await close()

  const store = await Store.open(storePath, { workspace: lower, create: false })
  const orphan = createHash('sha256').update('nobody').digest('hex')
  await store.batch([{ type: 'put', key: refKey(orphan), value: encodeRef(store.packs.append(Buffer.from(orphan, 'hex'), Buffer.from('nobody'))) }], true)
  const keptLayer = store.meta.stack[0]
  const keptHexes = chunkHexes((await store.loadLayer(keptLayer)).get('/w/kept')!)
  t.equal(keptHexes.length, 1)
  t.equal(store.meta.branches!.length, 1, 'the rewound turns are a branch')
  t.equal((await collectGarbage(store)).layersDeleted, 0, 'gc keeps a branch\'s layers')
  for (const hex of droppedHexes) t.not(store.getSync(refKey(hex)), undefined, 'and its chunks')
  store.meta.branches = [] // what prune --keep-branches 0 does (session/prune.ts dropBranches)
  store.meta.redo = []
  await store.batch([store.metaOp()], true)
  const r = await collectGarbage(store)
  t.ok(r.layersDeleted >= 2, `the rewound turns' layers (${r.layersDeleted})`)
  t.ok(r.chunksDeleted >= 1, `unreferenced chunks (${r.chunksDeleted})`)
  t.ok(r.bytesFreed >= 'nobody'.length)
  t.equal(store.getSync(refKey(orphan)), undefined, 'a chunk nothing references is gone')
  for (const hex of droppedHexes) t.equal(store.getSync(refKey(hex)), undefined, 'the rewound file\'s chunk is gone')
  t.equal(store.getSync(entryKey(droppedLayer, '/w/dropped')), undefined, 'its entry too')
  t.equal(store.getSync(turnKey(droppedLayer)), undefined, 'and its turn record')
  for (const hex of keptHexes) t.not(store.getSync(refKey(hex)), undefined, 'a chunk of the stack stays')
  t.same(await collectGarbage(store), { layersDeleted: 0, chunksDeleted: 0, bytesFreed: 0 }, 'a second run finds nothing')
  await store.batch([{ type: 'put', key: JOURNAL_KEY, value: Buffer.from('x') }], true)
  await t.rejects(collectGarbage(store), /a plan is in progress/, 'never while a plan is in progress')
  await store.batch([{ type: 'del', key: JOURNAL_KEY }], true)
  await store.close()

  ;({ session, close } = await openSession(lower, storePath))
  t.teardown(close)
  w = inProcess(session, 'w', 0o022)
  t.equal((await w.readFile('kept')).toString(), 'bytes of turn 1', 'the history reads as before')
  t.equal((await w.readFile('after')).toString(), 'a write: the rewound turns are kept as a branch')
  t.same(await w.readdir(''), ['after', 'kept'])
})
