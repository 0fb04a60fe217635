// PathMap (src/paths/path-map.ts): a Map of paths that hashes a long path by its end only, checked
// against a plain Map on random paths, long ones included.
import t from 'tap'
import { PathMap, pathKey } from '../../../src/paths/path-map.js'
import { randomPath, rng } from '../helpers.js'

t.test('PathMap behaves as a Map of paths', async t => {
  const r = rng(1)
  const m = new PathMap<number>()
  const ref = new Map<string, number>()
  for (let i = 0; i < 20_000; i++) {
    const p = randomPath(r)
    const op = r(4)
    if (op === 0) t.equal(m.delete(p), ref.delete(p))
    else if (op === 1) { m.set(p, i); ref.set(p, i) } else t.equal(m.get(p), ref.get(p))
    if (i % 1000 === 0) t.equal(m.size, ref.size)
  }
  t.same(m.paths().sort(), [...ref.keys()].sort(), 'the same paths')
  m.clear()
  t.equal(m.size, 0)
})


t.test('long paths that share their key are told apart', async t => {
  const end = 'z'.repeat(100)
  // The same length and the same last 64 characters: one key, one chain.
  const a = '/a' + end
  const b = '/b' + end
  t.equal(pathKey(a), pathKey(b), 'the same key')
  t.not(pathKey(a), pathKey('/ab' + end), 'a different length is a different key')
  t.equal(pathKey('/short'), '/short', 'a short path is its own key')
  const m = new PathMap<string>()
  m.set(a, 'A').set(b, 'B')
  t.equal(m.size, 2)
  t.equal(m.get(a), 'A')
  t.equal(m.get(b), 'B')
  t.ok(m.has(b))
  t.notOk(m.has('/c' + end), 'a third path on the chain is absent')
  m.set(a, 'A2')
  t.equal(m.size, 2, 'setting again replaces')
  t.equal(m.get(a), 'A2')
  // Deleting the head of the chain, then the rest.
  t.ok(m.delete(b))
  t.notOk(m.delete(b), 'deleted once')
  t.equal(m.get(a), 'A2', 'the other path on the chain stays')
  t.ok(m.delete(a))
  t.equal(m.size, 0)
  t.same(m.paths(), [])
})

t.test('a path looked up as a new string object is found', async t => {
  const m = new PathMap<number>()
  const deep = '/d'.repeat(5000)
  m.set(deep, 1)
  t.equal(m.get(('/d'.repeat(4999) + '/d').slice(0)), 1)
  t.equal(m.get(deep.slice(0, -2)), undefined, 'its parent is not')
})
