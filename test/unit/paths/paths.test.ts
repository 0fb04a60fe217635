// Path rules (src/paths/paths.ts): the checks a recorded path passes before a plan uses it, and
// the memoised ones checked against the plain walk over every ancestor that they replace.
import t from 'tap'
import { ancestors, ancestorsDown, baseName, belowAny, depth, isSafePath, isWithin, join, normaliseUserPath, parentOf, rebase } from '../../../src/paths/paths.js'
import { randomPath, rng } from '../helpers.js'

t.test('names, parents and joins', async t => {
  t.equal(parentOf('/a/b/c'), '/a/b')
  t.equal(parentOf('/a'), '/')
  t.equal(parentOf('/'), '/', 'the root is its own parent')
  t.equal(baseName('/a/b/c'), 'c')
  t.equal(baseName('/a'), 'a')
  t.equal(join('/', 'a'), '/a', 'no double slash below the root')
  t.equal(join('/a/b', 'c'), '/a/b/c')
  t.equal(depth('/'), 0)
  t.equal(depth('/a'), 1)
  t.equal(depth('/a/b/c'), 3)
  const r = rng(11)
  for (let i = 0; i < 200; i++) {
    const p = randomPath(r)
    if (p === '/') continue
    t.equal(join(parentOf(p), baseName(p)), p, 'join(parentOf, baseName) is the path')
  }
})

t.test('containment and rebasing', async t => {
  t.ok(isWithin('/a/b', '/a'))
  t.ok(isWithin('/a', '/a'), 'a directory is within itself')
  t.ok(isWithin('/anything', '/'), 'everything is within the root')
  t.notOk(isWithin('/ab', '/a'), 'a prefix is not containment')
  t.notOk(isWithin('/a', '/a/b'), 'a parent is not within its child')
  t.equal(rebase('/a/b/c', '/a/b', '/z'), '/z/c')
  t.equal(rebase('/a/b', '/a/b', '/z'), '/z', 'the directory itself')
  t.equal(rebase('/a/b', '/', '/z'), '/z/a/b', 'from the root')
  t.equal(rebase('/a/b', '/a', '/'), '/b', 'to the root')
})

t.test('ancestors up and down', async t => {
  t.same([...ancestors('/a/b/c')], ['/a/b', '/a', '/'], 'nearest first, ending with the root')
  t.same([...ancestors('/')], [], 'the root has none')
  t.same([...ancestorsDown('/a/b/c')], ['/a', '/a/b'], 'outermost first, without the root or the path')
  t.same([...ancestorsDown('/a/b/c/d', '/a/b')], ['/a/b', '/a/b/c'], 'from a given ancestor on')
  t.same([...ancestorsDown('/a')], [])
  const r = rng(12)
  for (let i = 0; i < 300; i++) {
    const p = randomPath(r)
    t.same([...ancestorsDown(p)], [...ancestors(p)].filter(a => a !== '/').reverse(), 'down is up reversed: ' + p)
  }
})

t.test('user paths are normalised; one that climbs out is refused', async t => {
  t.equal(normaliseUserPath('a/./b/../c'), '/a/c')
  t.equal(normaliseUserPath('/a//b/'), '/a/b')
  t.equal(normaliseUserPath(''), '/')
  t.equal(normaliseUserPath('a/..'), '/')
  t.equal(normaliseUserPath('../x'), null, 'a path climbing out is refused')
  t.equal(normaliseUserPath('a/../../x'), null)
  for (const p of ['a/./b/../c', '/x//y', 'é/😀/..']) t.ok(isSafePath(normaliseUserPath(p)!), `normalised ${p} is safe`)
})

t.test('unsafe recorded paths', async t => {
  t.ok(isSafePath('/a/b'))
  t.ok(isSafePath('/'))
  t.ok(isSafePath('/...'), 'three dots is a name')
  for (const bad of ['a', '', '/a/../b', '/a/./b', '/a//b', '/a/', '/a\0b', '/..', '/.']) t.notOk(isSafePath(bad), `unsafe: ${JSON.stringify(bad)}`)
  t.notOk(isSafePath(42 as unknown as string), 'not a string')
})

t.test('belowAny is the walk over every ancestor', async t => {
  const r = rng(7)
  for (let k = 0; k < 20; k++) {
    const tops = new Set<string>()
    for (let i = r(5); i > 0; i--) tops.add(randomPath(r, 3))
    if (r(10) === 0) tops.add('/')
    const below = belowAny(tops)
    for (let i = 0; i < 500; i++) {
      const p = randomPath(r, 6)
      t.equal(below(p), [...ancestors(p)].some(a => tops.has(a)), p)
    }
  }
  // Growing while in use, as absorb does: paths by depth, each added after it is tested.
  const tops = new Set<string>()
  const below = belowAny(tops)
  const paths = [...new Set(Array.from({ length: 400 }, () => randomPath(r, 5)))].sort((a, b) => a.split('/').length - b.split('/').length)
  for (const p of paths) {
    t.equal(below(p), [...ancestors(p)].some(a => tops.has(a)), 'growing: ' + p)
    if (r(3) === 0) tops.add(p)
  }
})


t.test('isSafePath is the check by components', async t => {
  const naive = (p: string): boolean => {
    if (!p.startsWith('/') || p.includes('\0')) return false
    if (p === '/') return true
    if (p.endsWith('/')) return false
    return p.slice(1).split('/').every(part => part !== '' && part !== '.' && part !== '..')
  }
  const parts = ['', '.', '..', '...', '.a', 'a.', '..a', 'd']
  const all = (k: number): string[] => k === 0 ? [''] : all(k - 1).flatMap(q => parts.map(p => `${q}/${p}`))
  let n = 0
  for (let k = 0; k <= 4; k++) for (const q of all(k)) for (const p of [q, q + '/', q || '/', 'x' + q]) if (isSafePath(p) !== naive(p)) t.fail(JSON.stringify(p)); else n++
  t.ok(n > 15_000, `${n} paths`)
})

