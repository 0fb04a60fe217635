// Files the kernel opened without asking (src/fuse/open-by-node.ts), over a real in-process
// session: requests by node id reach the file the node names now; a file that loses its last
// name stays readable until the kernel forgets it; a close waits only when its node was written.
import t from 'tap'
import { OpenByNode } from '../../../src/fuse/open-by-node.js'
import { Nodes } from '../../../src/fuse/nodes.js'
import { sessionIn, tmpDir } from '../helpers.js'

async function setup (t: any): Promise<{ fs: any, nodes: Nodes, byNode: OpenByNode, id: (p: string) => number }> {
  const { s } = await sessionIn(t, tmpDir(t, 'open-by-node'))
  const fs = s.overlay
  const nodes = new Nodes(fs.getattr('/').ino)
  const byNode = new OpenByNode(fs, nodes)
  byNode.active = true
  const id = (p: string): number => nodes.remember(fs.getattr(p).ino, p).id
  return { fs, nodes, byNode, id }
}

const read = (fs: any, fh: number): string => {
  const b = Buffer.alloc(64)
  return b.subarray(0, fs.read(fh, b, 64, 0)).toString()
}

t.test('a request by node reads the file its node names, lower or written', async t => {
  const { fs, byNode, id } = await setup(t)
  const a = id('/w/a.txt')
  t.equal(byNode.with(a, (fh) => read(fs, fh)), 'lower', 'the lower file')
  byNode.with(a, (fh) => fs.write(fh, Buffer.from('LOW'), 3, 0, null))
  t.equal(byNode.with(a, (fh) => read(fs, fh)), 'LOWer', 'a write by node is read back by node')
  t.equal(fs.fileAt('/w/a.txt')?.dirty.size, 1, 'its data waits in the file node after the one-request handle closed')
})

t.test('a file that loses its last name stays readable until the kernel forgets its node', async t => {
  const { fs, nodes, byNode, id } = await setup(t)
  fs.release(fs.create('/w/b.txt', 0o644, { uid: 0, gid: 0 }))
  const b = id('/w/b.txt')
  byNode.with(b, (fh) => fs.write(fh, Buffer.from('kept'), 4, 0, null))
  byNode.beforeRemoval('/w/b.txt')
  const file = fs.fileAt('/w/b.txt')
  fs.unlink('/w/b.txt')
  nodes.removed('/w/b.txt', file)
  t.equal(byNode.with(b, (fh) => read(fs, fh)), 'kept', 'read through the pinned handle after unlink')
  t.ok(byNode.pinned(b) !== undefined, 'pinned while the kernel knows the node')
  t.ok(nodes.forget(b, 1), 'the kernel forgets the node')
  byNode.forgotten(b)
  t.equal(byNode.pinned(b), undefined, 'and the pin goes with it')
  t.throws(() => byNode.with(b, (fh) => read(fs, fh)), { code: 'ESTALE' }, 'a forgotten node reaches nothing')
})

t.test('a removal that did not happen leaves no pin: the file is served by its name again', async t => {
  const { fs, byNode, id } = await setup(t)
  fs.release(fs.create('/w/d.txt', 0o644, { uid: 0, gid: 0 }))
  const d = id('/w/d.txt')
  const pinned = byNode.beforeRemoval('/w/d.txt')
  t.equal(pinned, d, 'pinned before the removal')
  t.ok(fs.fileAt('/w/d.txt'), 'through an open handle')
  byNode.unpin(pinned) // the unlink failed (say EACCES)
  t.equal(byNode.pinned(d), undefined, 'unpinned')
  t.equal(fs.fileAt('/w/d.txt'), null, 'and its handle released')
  byNode.with(d, (fh) => fs.write(fh, Buffer.from('by name'), 7, 0, null))
  t.equal(byNode.with(d, (fh) => read(fs, fh)), 'by name', 'requests by node reach the file by its name')
  byNode.unpin(null)
  t.pass('unpin(null) (nothing was pinned) does nothing')
})

t.test('a removed name the kernel does not know pins nothing', async t => {
  const { fs, byNode } = await setup(t)
  fs.release(fs.create('/w/c.txt', 0o644, { uid: 0, gid: 0 }))
  byNode.beforeRemoval('/w/c.txt')
  t.equal(fs.fileAt('/w/c.txt'), null, 'no handle was opened for it')
})

t.test('a close waits for the store only when its node was written, or joins a flush under way', async t => {
  const { byNode } = await setup(t)
  let flushes = 0
  let finish = (): void => {}
  const flushAll = (): Promise<void> => { flushes++; return new Promise<void>(resolve => { finish = resolve }) }
  t.equal(byNode.flush(7, flushAll), null, 'a reader\'s close is answered at once')
  t.equal(flushes, 0, 'without a flush')
  byNode.noteWritten(7)
  const first = byNode.flush(7, flushAll)
  t.ok(first, 'a writer\'s close waits')
  t.equal(byNode.flush(7, flushAll), first, 'a second close of the node while that flush runs waits for the same flush')
  t.equal(flushes, 1, 'one flush for both')
  finish()
  await first
  await new Promise(resolve => setImmediate(resolve))
  t.equal(byNode.flush(7, flushAll), null, 'once it is done, a close without new writes waits for nothing')
})

t.test('a handle CREATE gave out is closed at RELEASE, or when the kernel forgets its node', async t => {
  const { fs, byNode, id } = await setup(t)
  const orphaned: number[] = []
  byNode.onOrphan = (fh) => { orphaned.push(fh); fs.release(fh) }
  const released = fs.create('/w/r.txt', 0o644, { uid: 0, gid: 0 })
  const kept = fs.create('/w/k.txt', 0o644, { uid: 0, gid: 0 })
  const r = id('/w/r.txt')
  const k = id('/w/k.txt')
  byNode.handedOut(r, released)
  byNode.handedOut(k, kept)
  byNode.released(released)
  fs.release(released)
  byNode.forgotten(r)
  t.same(orphaned, [], 'a released handle is not closed again when its node is forgotten')
  byNode.forgotten(k)
  t.same(orphaned, [kept], 'a handle never released is closed when the kernel forgets its node')
  t.equal(fs.fileAt('/w/k.txt'), null, 'and its file node goes with it')
})
