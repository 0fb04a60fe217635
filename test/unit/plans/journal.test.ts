// The journal of a plan in progress (src/plans/journal.ts): front-coded paths, and journals read
// back from a real store as recover reads them.
import t from 'tap'
import { frontCode, frontDecode, hasJournal, readJournal, retireJournal, writeJournal, type Journal } from '../../../src/plans/journal.js'
import type { PlanOp } from '../../../src/plans/planner.js'
import type { Expect } from '../../../src/plans/verifier.js'
import { decode, encode } from '../../../src/store/codec.js'
import { randomPath, rng, tmpStore } from '../helpers.js'

const times = { atime: 1, mtime: 2, atimeNs: 0, mtimeNs: 3, uid: 0, gid: 0 }
/** A write op whose content comes from the lower file at `from`. */
const write = (path: string, from: string): PlanOp => ({ op: 'write', path, mode: 0o644, size: 5, content: { from: 'lower', path: from }, ...times } as unknown as PlanOp)
const expectFile: Expect = { type: 'f', mode: 0o644, size: 5 }

t.test('front-coded paths come back the same', async t => {
  const r = rng(3)
  for (let i = 0; i < 500; i++) {
    const paths = Array.from({ length: r(30) }, () => randomPath(r))
    // Through MessagePack: a lone half of a surrogate pair would not come back from UTF-8.
    t.same(frontDecode(decode(encode(frontCode(paths)))), paths)
  }
  let deep = ''
  const tree: string[] = []
  for (let i = 0; i < 3000; i++) tree.push(deep += '/d')
  const coded = encode(frontCode([...tree, ...tree.slice().reverse()]))
  t.ok(coded.length < 100_000, `a 3,000-level tree and back up: ${coded.length} bytes, not ${2 * 3000 * 3000} of whole paths`)
  // Journals in parts (front-coded) and whole (earlier versions): test/compat.test.ts, through a real crash.
})


t.test('a journal comes back from the store as it was written, in several parts', async t => {
  const store = await tmpStore(t, 'journal')
  t.notOk(hasJournal(store))
  t.equal(readJournal(store), null, 'no plan in progress')
  // Past one part's 20,000 items, with deep paths that front coding shortens.
  const ops: PlanOp[] = [{ op: 'mkdir', path: '/d' }]
  for (let i = 0; i < 25_000; i++) ops.push(write(`/d/${'sub/'.repeat(i % 7)}f${i}`, `/src${i}`))
  ops.push({ op: 'remove', path: '/gone', type: 'f' })
  const j: Journal = {
    id: 'plan-1',
    ops,
    expect: new Map(ops.map(op => [op.path, expectFile])),
    targetStack: [1, 2, 5],
    prints: new Map([['/d/f0', { type: 'f', size: 5, mtime: 1, ctime: 3, ino: 3 }], ['/gone', { type: null, size: 0, mtime: 0, ctime: 0, ino: 0 }]])
  }
  const header = await writeJournal(store, j)
  t.notOk(hasJournal(store), 'only parts until the header lands')
  await store.batch([header], true)
  t.ok(hasJournal(store))
  const back = readJournal(store)!
  t.equal(back.id, 'plan-1')
  t.same(back.targetStack, [1, 2, 5])
  t.equal(back.ops.length, ops.length)
  t.same(back.ops, ops, 'every op, with its path')
  t.same([...back.expect], [...j.expect], 'every expectation')
  t.same([...back.prints!], [...j.prints!], 'the fingerprints')
  // Retired: the header and every part go.
  await store.batch(await retireJournal(store), true)
  t.equal(readJournal(store), null)
  let left = 0
  for await (const _ of store.db.keys({ gte: 'J', lt: 'K' })) left++
  t.equal(left, 0, 'no part is left behind')
})

t.test('a part that is missing is damage, named', async t => {
  const store = await tmpStore(t, 'journal')
  const ops = Array.from({ length: 20_001 }, (_, i) => write(`/f${i}`, `/f${i}`))
  await store.batch([await writeJournal(store, { id: 'p', ops, expect: new Map(), targetStack: [1] })], true)
  await store.db.del('J00000001')
  t.throws(() => readJournal(store), { code: 'STORE_CORRUPT', message: /missing part 1 of 2/ })
})
