// The kernel's nodes (src/fuse/nodes.ts): each node keeps every path the kernel knows it by —
// one name held as a string, several (hard links) as a set — across links, renames, removals
// and FORGET. Pure bookkeeping: no mount.
import t from 'tap'
import { Nodes, nameCount, namesOf } from '../../../src/fuse/nodes.js'

const names = (n: Parameters<typeof namesOf>[0]): string[] => [...namesOf(n)].sort()

t.test('one name, then a hard link, then back to one', async t => {
  const nodes = new Nodes(1)
  const a = nodes.remember(100, '/a')
  t.same(names(a), ['/a'])
  t.equal(nameCount(a), 1)
  t.equal(nodes.remember(100, '/a'), a, 'looked up again: the same node')
  t.equal(nameCount(a), 1, 'and still one name')
  t.equal(nodes.remember(100, '/b'), a, 'a second name of the same inode')
  t.same(names(a), ['/a', '/b'])
  t.equal(nameCount(a), 2)
  t.equal(a.path, '/b', 'the latest looked up')
  nodes.removed('/b')
  t.same(names(a), ['/a'], 'the link removed')
  t.equal(a.path, '/a', 'served by the name it has left')
  t.equal(nodes.at('/b'), undefined)
  t.equal(nodes.at('/a'), a)
})

t.test('renames move every name below, and a name taken over leaves its old node', async t => {
  const nodes = new Nodes(1)
  const d = nodes.remember(10, '/d')
  const f = nodes.remember(11, '/d/f')
  const g = nodes.remember(12, '/g')
  nodes.remember(11, '/x') // f has two names, one of them outside /d
  nodes.renamed('/d', '/e')
  t.same(names(d), ['/e'])
  t.same(names(f), ['/e/f', '/x'])
  t.equal(nodes.at('/d/f'), undefined)
  nodes.renamed('/x', '/g') // over g
  t.same(names(f), ['/e/f', '/g'])
  t.equal(nameCount(g), 0, 'g lost its only name')
  t.equal(g.path, null, 'and has no path')
  t.equal(nodes.at('/g'), f)
})

t.test('the last removal leaves the open file, and FORGET drops every name', async t => {
  const nodes = new Nodes(1)
  const a = nodes.remember(100, '/a')
  nodes.remember(100, '/b')
  t.equal(nodes.forget(a.id, 1), false, 'one of two lookups given back')
  nodes.removed('/a')
  nodes.removed('/b', null)
  t.equal(a.path, null)
  t.throws(() => nodes.path(a.id), { code: 'ESTALE' }, 'no name, no open file: stale')
  const c = nodes.remember(200, '/c')
  t.equal(nodes.forget(c.id, 1), true, 'forgotten')
  t.equal(nodes.at('/c'), undefined, 'its name is gone with it')
  t.same(names(c), [])
})

t.test('after the daemon changed the tree, names that lead elsewhere are dropped', async t => {
  const nodes = new Nodes(1)
  const a = nodes.remember(100, '/a')
  nodes.remember(100, '/b')
  nodes.revalidate((p) => p !== '/b')
  t.same(names(a), ['/a'])
  t.equal(nodes.at('/b'), undefined)
})
