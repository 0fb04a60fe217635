// Pure logic, no FUSE: path rules, how layers merge into a view, and the planner's order.
// (The real guarantees are tested on real mounts in test/*.test.ts; these pin the rules.)
import t from 'tap'
import { isSafePath, normaliseUserPath, rebase, isWithin } from '../../src/overlay/paths.js'
import { View } from '../../src/overlay/view.js'
import type { Origin } from '../../src/overlay/origin.js'
import type { Entry } from '../../src/store/entries.js'
import { planViews } from '../../src/plans/planner.js'

// An in-memory origin: path -> 'd' | file content.
function origin (tree: Record<string, 'd' | string>): Origin {
  const st = (p: string) => {
    const v = p === '/' ? 'd' : tree[p]
    if (v === undefined) return null
    return { kind: v === 'd' ? 'd' : 'f', mode: v === 'd' ? 0o40755 : 0o100644, uid: 0, gid: 0, size: v === 'd' ? 0 : v.length, atime: 0, mtime: 0, ctime: 0, ino: 1, nlink: 1, blocks: 0 }
  }
  return {
    stat: st,
    readdir: (p: string) => Object.keys(tree).filter(k => k !== p && k.startsWith(p === '/' ? '/' : p + '/') && !k.slice(p === '/' ? 1 : p.length + 1).includes('/')).map(k => k.slice(k.lastIndexOf('/') + 1)),
    readlink: () => '',
    read: () => 0,
    xattrs: () => undefined
  } as unknown as Origin
}

const meta = { mode: 0o644, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, ino: 9 }
const file = (): Entry => ({ kind: 'f', ...meta, size: 0, chunks: new Map() })
const dir = (extra: object = {}): Entry => ({ kind: 'd', ...meta, mode: 0o755, ...extra })
const layer = (o: Record<string, Entry>) => new Map(Object.entries(o))

t.test('paths', async t => {
  t.ok(isSafePath('/a/b'))
  for (const bad of ['a', '/a/../b', '/a/./b', '/a//b', '/a/', '/a\0b', '/..']) t.notOk(isSafePath(bad), `unsafe: ${JSON.stringify(bad)}`)
  t.equal(normaliseUserPath('a/./b/../c'), '/a/c')
  t.equal(normaliseUserPath('../x'), null, 'a path climbing out is refused')
  t.equal(rebase('/a/b/c', '/a/b', '/z'), '/z/c')
  t.ok(isWithin('/a/b', '/a'))
  t.notOk(isWithin('/ab', '/a'), 'a prefix is not containment')
})

t.test('layers merge: whiteouts, opaque and redirected directories', async t => {
  const o = origin({ '/d': 'd', '/d/x': 'x', '/d/y': 'y', '/e': 'd', '/e/z': 'z' })
  const v = View.build(o, [
    layer({ '/d/x': { kind: 'w' } }),
    layer({ '/m': dir({ opaque: 1, redirect: '/e', fresh: 1 }), '/e': { kind: 'w' } })
  ])
  t.same(v.readdir('/').sort(), ['d', 'm'], 'the moved directory appears under its new name only')
  t.same(v.readdir('/d'), ['y'], 'a whiteout hides an origin file')
  t.equal(v.resolve('/m/z')?.kind, 'origin', 'a redirected directory finds its children in the origin')
  t.equal(v.resolve('/e/z'), null)
})

t.test('a metadata copy of an opaque directory in a later layer hides nothing', async t => {
  const o = origin({ '/d': 'd', '/d/old': 'o' })
  const v = View.build(o, [
    layer({ '/d': dir({ opaque: 1, fresh: 1 }) }), // rm -rf d && mkdir d
    layer({ '/d/new': file() }),
    layer({ '/d': dir({ opaque: 1, mode: 0o700 }) }) // chmod 700 d
  ])
  t.same(v.readdir('/d'), ['new'], 'the file added between the two survives the chmod copy')
})

t.test('the planner orders removals before replacements and directory modes last', async t => {
  const o = origin({ '/a': 'old', '/d': 'd', '/d/f': 'f' })
  const expected = View.build(o, [])
  const target = View.build(o, [layer({ '/a': dir({ opaque: 1, fresh: 1, mode: 0o500 }), '/a/in': file(), '/d/f': { kind: 'w' } })])
  const plan = planViews(expected, target, ['/a', '/a/in', '/d/f'])
  t.same(plan.ops.map(op => `${op.op} ${op.path}`), ['remove /a', 'mkdir /a', 'write /a/in', 'remove /d/f', 'chmod /a'])
  t.same(planViews(expected, expected, ['/a']).ops, [], 'nothing differs, nothing planned')
})
