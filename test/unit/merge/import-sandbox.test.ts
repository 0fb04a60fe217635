// A sandboxed run's layers copied into the shared store as a branch (src/merge/import-sandbox.ts),
// and prune keeping its mergeBase (src/session/prune.ts): two real Sessions in this process,
// one the shared history, one the run's own store, on the same real directory.
import t from 'tap'
import { join } from 'node:path'
import * as fs from 'node:fs'
import { inProcess, openSession } from '../../contract/filesystems.js'
import { importFromStore, type SandboxRun } from '../../../src/merge/import-sandbox.js'
import { squashOldest } from '../../../src/session/prune.js'
import { Store } from '../../../src/store/store.js'
import { decodeEntry } from '../../../src/store/codec.js'
import { entryPrefix, prefixEnd, refKey } from '../../../src/store/keys.js'
import { hexName } from '../../../src/store/chunks.js'
import { tmpDir } from '../helpers.js'

/** A shared history of four turns, and a run's store with its found layer (1) and one turn (2). */
async function setup (t: Parameters<typeof tmpDir>[0]): Promise<{ dir: string, lower: string, shared: string, run: SandboxRun }> {
  const dir = tmpDir(t, 'sandbox-import')
  const lower = join(dir, 'lower')
  fs.mkdirSync(join(lower, 'w'), { recursive: true })
  const shared = join(dir, 'shared')
  const { session, close } = await openSession(lower, shared)
  const w = inProcess(session, 'w', 0o022)
  for (let i = 1; i <= 3; i++) {
    await w.writeFile(`f${i}`, `turn ${i}`)
    await session.turn()
  }
  const applied = session.meta.stack.slice(0, 3)
  await close()
  const runStore = join(dir, 'run')
  const r = await openSession(lower, runStore)
  const rw = inProcess(r.session, 'w', 0o022)
  await rw.writeFile('found', 'what the run found')
  await r.session.turn()
  await rw.writeFile('made', 'the run\'s work '.repeat(5000))
  await r.close()
  return { dir, lower, shared, run: { store: runStore, what: 'agent --task x', startedAt: 1, applied, found: 1, turns: [{ layer: 2, parts: [] }], unsure: ['/w/u'] } }
}

async function entries (store: Store, layer: number): Promise<Map<string, ReturnType<typeof decodeEntry>>> {
  const out = new Map<string, ReturnType<typeof decodeEntry>>()
  for await (const [k, v] of store.entries({ gte: entryPrefix(layer), lt: prefixEnd(entryPrefix(layer)) })) out.set(k.slice(entryPrefix(layer).length), decodeEntry(v))
  return out
}

t.test('the run becomes a branch standing alone; prune keeps its mergeBase on the found layer', async t => {
  const { lower, shared, run } = await setup(t)
  const store = await Store.open(shared, { workspace: lower, create: false })
  const layersBefore = store.meta.nextLayer
  const inoBefore = store.meta.nextIno
  const r = await importFromStore(store, run)
  t.same(r, { branch: 'b1', unsure: ['/w/u'] })
  const b = store.meta.branches!.at(-1)!
  t.match(b, { n: 1, by: 'sandbox', what: 'agent --task x', mergeBase: 4, unsure: ['/w/u'] })
  t.same(b.stack.slice(0, 3), run.applied, 'its base starts with the applied layers')
  t.ok(b.stack.slice(3).every(id => id >= layersBefore), 'then new layers of the shared store')
  const tip = await entries(store, b.stack[4])
  const made = tip.get('/w/made')
  t.ok(made && made.kind === 'f', 'the run\'s file is in its turn')
  if (made?.kind === 'f') {
    t.ok(made.ino >= inoBefore && made.ino < store.meta.nextIno, `a fresh inode number of the shared store (${made.ino})`)
    t.equal(made.src, undefined, 'no reference into the real directory')
    for (const ref of made.chunks.values()) if (ref) t.ok(store.hasChunk(hexName(ref)), 'its chunks are in the shared store')
  }
  t.ok((await entries(store, b.stack[3])).has('/w/found'), 'the found layer is turn mergeBase')
  await store.close()

  // Retention merges turns 1-3 of the head's line, which the branch holds too.
  const { session, close } = await openSession(lower, shared)
  const sq = await squashOldest(session, 3)
  t.equal(sq.squashed, 3)
  const after = session.meta.branches!.at(-1)!
  t.equal(after.mergeBase, 2, 'mergeBase moved down by the two layers merged away')
  t.equal(after.stack[0], session.meta.stack[0], 'the base starts with the merged layer')
  t.equal(after.stack[after.mergeBase! - 1], b.stack[3], 'and still ends at the found layer')
  await close()
})

t.test('a failing import changes nothing in the shared store', async t => {
  const { lower, shared, run } = await setup(t)
  // The run's store loses a chunk its turn needs.
  const src = await Store.open(run.store, { workspace: lower, create: false })
  const made = (await src.loadLayer(2)).get('/w/made')!
  const ref = made.kind === 'f' ? [...made.chunks.values()].find(Boolean)! : null
  t.ok(ref, 'the run\'s file has a chunk')
  await src.batch([{ type: 'del', key: refKey(hexName(ref!)) }], true)
  await src.close()

  const store = await Store.open(shared, { workspace: lower, create: false })
  const meta = JSON.stringify(store.meta)
  const keys: string[] = []
  for await (const [k] of store.entries({ gte: '', lt: '\uffff' })) keys.push(k)
  await t.rejects(importFromStore(store, run), { code: 'IMPORT_FAILED' })
  const { nextLayer, nextIno, ...rest } = store.meta
  const { nextLayer: l0, nextIno: i0, ...rest0 } = JSON.parse(meta)
  t.same(JSON.parse(JSON.stringify(rest)), rest0, 'no branch in the live metadata (only counters moved)')
  t.ok(nextLayer >= l0 && nextIno >= i0)
  await store.close()
  const again = await Store.open(shared, { workspace: lower, create: false })
  const keysAfter: string[] = []
  for await (const [k] of again.entries({ gte: '', lt: '\uffff' })) keysAfter.push(k)
  t.same(keysAfter.filter(k => !k.startsWith('s')), keys.filter(k => !k.startsWith('s')), 'and no record written')
  t.same(again.meta.branches, [], 'nor in the stored metadata')
  await again.close()
})

t.test('turns of the run\'s base merged by prune during the run: the branch starts from the merged layer', async t => {
  const { lower, shared, run } = await setup(t)
  const { session, close } = await openSession(lower, shared)
  t.equal((await squashOldest(session, 3)).squashed, 3)
  const merged = session.meta.stack[0]
  await close()
  t.notOk(run.applied.includes(merged))
  const store = await Store.open(shared, { workspace: lower, create: false })
  const r = await importFromStore(store, run)
  t.equal(r.branch, 'b1')
  const b = store.meta.branches!.at(-1)!
  t.same(b.stack.slice(0, 1), [merged], 'its base is the merged layer')
  t.equal(b.mergeBase, 2, 'then the found layer')
  t.ok((await entries(store, b.stack[1])).has('/w/found'))
  await store.close()
})
