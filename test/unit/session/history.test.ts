// The history of a session (src/session/history.ts, driven through src/session/session.ts):
// turns, rewind, redo, undo, ids and -N, checked on the overlay's view. A Session in this
// process over a real lower directory and a real store: no FUSE, no root. Nothing here runs a
// plan, so the real directory itself never changes.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import type { Filesystem } from '../../contract/filesystems.js'
import { sessionIn, tmpDir, type Tap } from '../helpers.js'

const session = (t: Tap, dir = tmpDir(t, 'history')) => sessionIn(t, dir)

const read = async (f: Filesystem, p: string): Promise<string | null> => {
  try { return (await f.readFile(p)).toString() } catch (e: any) { if (e.code === 'ENOENT') return null; throw e }
}

t.test('turns, rewind and redo change the view, not the real directory', async t => {
  const { s, fs: w, dir } = await session(t)
  t.equal(s.head, 1, 'a new history starts at turn 1')
  await w.writeFile('a.txt', 'one')
  await w.writeFile('b.txt', 'bee')
  t.equal(await s.turn({ message: 'first' }), 2, 'a turn opens turn 2')
  await w.writeFile('a.txt', 'two')
  await w.unlink('b.txt')
  await s.turn()
  await w.writeFile('c.txt', 'see')
  t.equal(s.head, 3)

  t.same(await s.rewind(2), { head: 2, dropped: 2 }, 'rewind 2: turns 2 and 3 set aside')
  t.equal(await read(w, 'a.txt'), 'one', 'the state at the start of turn 2')
  t.equal(await read(w, 'b.txt'), 'bee')
  t.equal(await read(w, 'c.txt'), null)
  t.equal(s.status().redo, 1)

  t.same(await s.redo(), { head: 3 })
  t.equal(await read(w, 'a.txt'), 'two', 'redo brings the set-aside turns back')
  t.equal(await read(w, 'b.txt'), null)
  t.equal(await read(w, 'c.txt'), 'see', 'the head turn\'s changes too')

  await s.rewind(1)
  t.equal(await read(w, 'a.txt'), 'lower', 'turn 1\'s start: the lower')
  t.same(await w.readdir(''), ['a.txt'])
  t.equal(fs.readFileSync(join(dir, 'lower', 'w', 'a.txt'), 'utf8'), 'lower', 'the real file was never touched')
  t.same(fs.readdirSync(join(dir, 'lower', 'w')), ['a.txt'])
})

t.test('undo goes back to the head\'s start, then a turn further; redo after a write keeps both', async t => {
  const { s, fs: w } = await session(t)
  await t.rejects(s.undo(), { code: 'NOTHING_TO_UNDO' }, 'nothing written yet')
  await w.writeFile('a.txt', 'one')
  await s.turn()
  await w.writeFile('a.txt', 'two')
  await s.undo()
  t.equal(await read(w, 'a.txt'), 'one', 'the head turn\'s changes undone')
  t.equal(s.head, 2)
  await s.undo()
  t.equal(await read(w, 'a.txt'), 'lower', 'the head was empty: the turn before is undone')
  t.equal(s.head, 1)
  await s.redo()
  t.equal(await read(w, 'a.txt'), 'one', 'redo steps forward one undo at a time')
  await w.writeFile('z', 'new')
  t.equal(s.status().redo, 1, 'a write keeps the way back')
  await s.redo()
  t.equal(await read(w, 'a.txt'), 'two', 'redo after a write: back to the tip the first undo left')
  t.equal(await read(w, 'z'), null)
  t.equal(s.status().redo, 0)
  const written = s.meta.branches!.find(b => b.by === 'redo')
  t.ok(written, 'what was written after the undo is a branch of its own')
  await s.rewind(`b${written!.n}`)
  t.equal(await read(w, 'z'), 'new', 'its tip comes back whole')
  t.equal(await read(w, 'a.txt'), 'one')
  await s.redo()
  t.equal(await read(w, 'a.txt'), 'two', 'going to a branch is a rewind too: redo goes back')
  await t.rejects(s.redo(), { code: 'NOTHING_TO_REDO' }, 'each redo goes back one rewind: none is left')
})

t.test('branches: turns of any branch by bN:T, unreachable never', async t => {
  const { s, fs: w } = await session(t)
  for (const v of ['one', 'two', 'three']) {
    await w.writeFile('a.txt', v)
    await s.turn()
  }
  await s.rewind(2)
  await w.writeFile('b.txt', 'bee')
  await s.turn()
  await s.rewind(1)
  t.same(s.meta.branches!.map(b => b.stack.length), [4, 3], 'both stacks left are kept')
  const [first, second] = s.meta.branches!
  await s.rewind(`b${first.n}:3`)
  t.equal(await read(w, 'a.txt'), 'two', 'the start of turn 3 of the first branch')
  t.equal(s.head, 3)
  await s.rewind(`b${second.n}:-1`)
  t.equal(await read(w, 'b.txt'), 'bee', '-1 counts back from that branch\'s tip turn')
  await t.rejects(s.rewind('b99:1'), { code: 'UNKNOWN_BRANCH' })
  await t.rejects(s.rewind(`b${first.n}:9`), { code: 'UNKNOWN_TURN' })
  await t.rejects(s.redo('3'), { code: 'BAD_BRANCH' })
  t.ok(s.meta.branches!.every(b => b.stack.at(-1) !== s.headLayer), 'no branch holds the head layer writes go to')
})

t.test('a rewind to where the workspace already is adds no redo step', async t => {
  const { s, fs: w } = await session(t)
  await w.writeFile('a.txt', 'one')
  await s.turn()
  t.same(await s.rewind(2), { head: 2, dropped: 0 })
  t.equal(s.status().redo, 0)
})

t.test('turns by number, by -N and by id', async t => {
  const { s, fs: w } = await session(t)
  await w.writeFile('a.txt', 'one')
  await s.turn({ id: 'msg_2' })
  await w.writeFile('a.txt', 'two')
  await s.turn({ id: 'msg_3', prompt: 'third \x1b[31mred\x1b[0m' })
  t.equal(s.resolveTurn('msg_2'), 2)
  t.equal(s.resolveTurn('-1'), 3, '-1 is the head turn')
  t.equal(s.resolveTurn('-3'), 1)
  t.equal(s.resolveTurn(' 2 '), 2)
  t.throws(() => s.resolveTurn('4'), { code: 'UNKNOWN_TURN' })
  t.throws(() => s.resolveTurn('-4'), { code: 'UNKNOWN_TURN' })
  t.throws(() => s.resolveTurn('nope'), { code: 'UNKNOWN_TURN' })
  await t.rejects(s.turn({ id: 'msg_2' }), { code: 'DUPLICATE_ID' }, 'an id names one turn')
  await t.rejects(s.turn({ id: '42' }), { code: 'BAD_ID' }, 'an id is never a number')
  const log = s.log()
  t.same(log.map(l => [l.turn, l.id]), [[1, null], [2, 'msg_2'], [3, 'msg_3']])
  t.equal(log[2].prompt, 'third red', 'a prompt is stored without its escape sequences')
  await s.rewind('msg_2')
  t.equal(await read(w, 'a.txt'), 'one')
  t.equal(s.log()[1].id, 'msg_2', 'the rewound turn keeps its id')
})

t.test('the history is the same after the session is closed and opened again', async t => {
  const first = await session(t)
  await first.fs.writeFile('a.txt', 'one')
  await first.s.turn({ message: 'did one' })
  await first.fs.writeFile('a.txt', 'two')
  await first.s.turn()
  await first.s.rewind(2)
  await first.close()
  const again = await session(t, first.dir)
  t.equal(again.s.head, 2)
  t.equal(await read(again.fs, 'a.txt'), 'one', 'the rewound view')
  t.equal(again.s.status().redo, 1, 'the redo stack')
  t.equal(again.s.log()[0].message, 'did one', 'the turn\'s message')
  await again.s.redo()
  t.equal(await read(again.fs, 'a.txt'), 'two', 'and redo after reopening')
})
