// How layers merge into a view (src/overlay/view.ts), over a real lower directory: whiteouts,
// opaque and redirected directories, and a metadata copy that must not hide what came between.
// (The real guarantees are tested on real mounts in test/*.test.ts; these pin the rules.)
import t from 'tap'
import { View } from '../../../src/overlay/view.js'
import type { Entry } from '../../../src/store/entries.js'
import { realLower } from '../helpers.js'

// The entries these tests write, in one place (the store's field names may change).
const meta = { mode: 0o644, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, ino: 9 }
const file = (): Entry => ({ kind: 'f', ...meta, size: 0, chunks: new Map() })
const dir = (extra: object = {}): Entry => ({ kind: 'd', ...meta, mode: 0o755, ...extra })
const whiteout = (): Entry => ({ kind: 'w' })
const layer = (o: Record<string, Entry>) => new Map(Object.entries(o))

t.test('layers merge: whiteouts, opaque and redirected directories', async t => {
  const o = await realLower(t, { '/d': 'd', '/d/x': 'x', '/d/y': 'y', '/e': 'd', '/e/z': 'z' })
  const v = View.build(o, [
    layer({ '/d/x': whiteout() }),
    layer({ '/m': dir({ opaque: 1, redirect: '/e', fresh: 1 }), '/e': whiteout() })
  ])
  t.same(v.readdir('/').sort(), ['d', 'm'], 'the moved directory appears under its new name only')
  t.same(v.readdir('/d'), ['y'], 'a whiteout hides a lower file')
  t.equal(v.resolve('/m/z')?.kind, 'lower', 'a redirected directory finds its children in the lower')
  t.equal(v.resolve('/e/z'), null)
  t.equal(v.resolve('/d/x'), null, 'a whited-out lower file does not resolve')
  t.equal(v.resolve('/d/y')?.kind, 'lower')
})

t.test('a whiteout hides everything below it; a later layer brings a path back', async t => {
  const o = await realLower(t, { '/d': 'd', '/d/sub': 'd', '/d/sub/f': 'f' })
  const v = View.build(o, [layer({ '/d': whiteout() }), layer({ '/d': dir({ opaque: 1, fresh: 1 }), '/d/new': file() })])
  t.equal(v.resolve('/d/sub/f'), null, 'the old child stays hidden by the opaque directory')
  t.same(v.readdir('/d'), ['new'])
  t.equal(v.resolve('/d/new')?.kind, 'upper')
})

t.test('a metadata copy of an opaque directory in a later layer hides nothing', async t => {
  const o = await realLower(t, { '/d': 'd', '/d/old': 'o' })
  const v = View.build(o, [
    layer({ '/d': dir({ opaque: 1, fresh: 1 }) }), // rm -rf d && mkdir d
    layer({ '/d/new': file() }),
    layer({ '/d': dir({ opaque: 1, mode: 0o700 }) }) // chmod 700 d
  ])
  t.same(v.readdir('/d'), ['new'], 'the file added between the two survives the chmod copy')
})
