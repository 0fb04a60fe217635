// The planner (src/plans/planner.ts): from the view the real directory holds to the view it
// should hold, the operations in the order the applier needs them. Views over a real lower.
import t from 'tap'
import { View } from '../../../src/overlay/view.js'
import type { Entry } from '../../../src/store/entries.js'
import { planViews, sameXattrs, touchedPaths } from '../../../src/plans/planner.js'
import { realLower } from '../helpers.js'

// The entries these tests write, in one place (the store's field names may change).
const meta = { mode: 0o644, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, ino: 9 }
const file = (extra: object = {}): Entry => ({ kind: 'f', ...meta, size: 0, chunks: new Map(), ...extra })
const dir = (extra: object = {}): Entry => ({ kind: 'd', ...meta, mode: 0o755, ...extra })
const whiteout = (): Entry => ({ kind: 'w' })
const layer = (o: Record<string, Entry>) => new Map(Object.entries(o))
const listed = (ops: Array<{ op: string, path: string }>): string[] => ops.map(op => `${op.op} ${op.path}`)

t.test('the planner orders removals before replacements and directory modes last', async t => {
  const o = await realLower(t, { '/a': 'old', '/d': 'd', '/d/f': 'f' })
  const expected = View.build(o, [])
  const target = View.build(o, [layer({ '/a': dir({ opaque: 1, fresh: 1, mode: 0o500 }), '/a/in': file(), '/d/f': whiteout() })])
  const plan = planViews(expected, target, ['/a', '/a/in', '/d/f'])
  t.same(listed(plan.ops), ['remove /a', 'mkdir /a', 'write /a/in', 'remove /d/f', 'chmod /a'])
  t.same(planViews(expected, expected, ['/a']).ops, [], 'nothing differs, nothing planned')
})

t.test('a rewind\'s plan is the way back: what the turn added goes, what it removed returns', async t => {
  const o = await realLower(t, { '/keep': 'k', '/gone': 'g' })
  const turn = layer({ '/new': file({ size: 0 }), '/gone': whiteout() })
  const after = View.build(o, [turn])
  const before = View.build(o, [])
  const touched = touchedPaths([turn], [])
  t.same([...touched].sort(), ['/gone', '/new'], 'the paths the turn touched')
  const back = planViews(after, before, touched)
  t.same(listed(back.ops).sort(), ['remove /new', 'write /gone'])
  const write = back.ops.find(op => op.op === 'write')
  t.same(write?.op === 'write' && write.content, { from: 'lower', path: '/gone' }, 'its content is the lower file\'s')
  t.same(listed(planViews(before, after, touched).ops).sort(), ['remove /gone', 'write /new'], 'and forward again')
})

t.test('only touched paths are looked at', async t => {
  const o = await realLower(t, { '/x': 'x' })
  const target = View.build(o, [layer({ '/x': whiteout(), '/y': file() })])
  t.same(listed(planViews(View.build(o, []), target, ['/y']).ops), ['write /y'], '/x differs, but nothing touched it')
})

t.test('sameXattrs compares sets of extended attributes', async t => {
  const a = { 'user.a': Buffer.from('1') }
  t.ok(sameXattrs(undefined, undefined))
  t.ok(sameXattrs(undefined, {}), 'none is the empty set')
  t.ok(sameXattrs(a, { 'user.a': Buffer.from('1') }))
  t.notOk(sameXattrs(a, { 'user.a': Buffer.from('2') }), 'a value differs')
  t.notOk(sameXattrs(a, { 'user.b': Buffer.from('1') }), 'a name differs')
  t.notOk(sameXattrs(a, undefined))
})
