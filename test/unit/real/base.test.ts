// BaseMap (src/real/base.ts), the base entries of the lower with its indexes: each lookup
// checked against the plain walk over every ancestor that it replaces, on random inputs.
import t from 'tap'
import { ancestors, parentOf } from '../../../src/paths/paths.js'
import { BaseMap } from '../../../src/real/base.js'
import type { Entry } from '../../../src/store/entries.js'
import { randomPath, rng } from '../helpers.js'

// The entries these tests write, in one place (the store's field names may change).
const meta = { uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0 }
const whiteout = (): Entry => ({ kind: 'w' })
const dirEntry = (): Entry => ({ kind: 'd', mode: 0o755, ...meta, ino: 1 })
const symlink = (): Entry => ({ kind: 'l', mode: 0o777, ...meta, ino: 2, target: 'x' })
const isDir = (e: Entry): boolean => e.kind === 'd'

t.test('BaseMap.cover is the walk over every ancestor', async t => {
  const naive = (base: Map<string, Entry>, p: string): Entry | 'hidden' | undefined => {
    if (base.size === 0) return undefined
    const e = base.get(p)
    if (e) return e
    for (const a of ancestors(p)) {
      const ea = base.get(a)
      if (ea && !isDir(ea)) return 'hidden'
    }
    return undefined
  }
  for (let seed = 1; seed <= 20; seed++) {
    const r = rng(seed)
    const entries = new Map<string, Entry>()
    const kinds: Entry[] = [whiteout(), dirEntry(), symlink()]
    for (let i = r(4); i > 0; i--) entries.set(randomPath(r, 4), kinds[r(kinds.length)])
    const base = new BaseMap(entries)
    let bad = 0
    for (let i = 0; i < 3000; i++) {
      const p = randomPath(r, 5)
      // Entries change between looks, as captures do during a plan (directories and hiders alike).
      if (r(5) === 0) base.set(randomPath(r, 4), kinds[r(kinds.length)])
      if (base.cover(p) !== naive(entries, p)) bad++
      if (r(50) === 0) {
        const dir = parentOf(p)
        const want = [...entries.keys()].filter(q => q !== '/' && parentOf(q) === dir).map(q => q.slice(dir === '/' ? 1 : dir.length + 1)).sort()
        t.same([...(base.children(dir) ?? [])].sort(), want, 'children of ' + dir)
      }
    }
    t.equal(bad, 0, `seed ${seed}: every cover as the walk gives it`)
  }
})


t.test('a directory entry hides nothing; turned into a whiteout it hides what is below, and back', async t => {
  const base = new BaseMap(new Map([['/d', dirEntry()]]))
  t.equal(base.cover('/d/x'), undefined, 'below a directory: nothing')
  const own = base.cover('/d')
  t.ok(own !== undefined && own !== 'hidden' && isDir(own), 'its own entry')
  t.same([...base.children('/')!], ['d'])
  base.set('/d', whiteout())
  t.equal(base.cover('/d/x/y'), 'hidden', 'below a whiteout: hidden')
  base.set('/d', dirEntry())
  t.equal(base.cover('/d/x/y'), undefined, 'a directory again: the memo forgot the hiding')
  t.equal(new BaseMap(new Map()).cover('/anything'), undefined, 'an empty base covers nothing')
})
