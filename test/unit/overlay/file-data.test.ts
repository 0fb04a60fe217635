// Written chunks' buffers (src/overlay/file-data.ts flushNode, src/store/chunk-buffers.ts): a
// buffer goes back to the pool only once it has left the file's dirty chunks, so a flush that
// fails half-way (a chunk store read failing) can be tried again without any buffer being both
// a file's unwritten data and free for the next write. A real in-process session.
import t from 'tap'
import { sessionIn, tmpDir } from '../helpers.js'

const KiB = 1024

t.test('a flush that fails half-way keeps the untaken chunks dirty and gives back only what it took', async t => {
  const { s } = await sessionIn(t, tmpDir(t, 'file-data'))
  const ov = s.overlay
  const fh = ov.create('/w/f.bin', 0o644, { uid: 0, gid: 0 })
  // Three chunks: two whole ones (their buffers are handed to the chunk store) and a short tail.
  const a = Buffer.alloc(64 * KiB, 0x61)
  const b = Buffer.alloc(64 * KiB, 0x62)
  ov.write(fh, a, a.length, 0)
  ov.write(fh, b, b.length, 64 * KiB)
  ov.write(fh, Buffer.from('tail'), 4, 128 * KiB)
  const node = ov.fileAt('/w/f.bin')!
  t.equal(node.dirty.size, 3, 'three dirty chunks')
  const put = s.chunks.put.bind(s.chunks)
  let calls = 0
  s.chunks.put = (data, forHead, owned) => {
    if (++calls === 2) throw new Error('a LevelDB read failed')
    return put(data, forHead, owned)
  }
  t.throws(() => s.overlay.settled(node.key!), /LevelDB read failed/, 'the flush fails at the second chunk')
  t.equal(node.dirty.size, 2, 'the chunk taken before the failure left dirty; the others stay')
  const dirty = new Set(node.dirty.values())
  const handedOut: Buffer[] = []
  for (let i = 0; i < 64; i++) handedOut.push(s.chunks.buffers.take())
  t.notOk(handedOut.some(x => dirty.has(x)), 'no buffer still dirty is handed to the next write')
  s.chunks.put = put
  s.overlay.settled(node.key!)
  t.equal(node.dirty.size, 0, 'tried again, every chunk is taken')
  // Whatever the pool holds now is free: scribbling over it must not touch the file.
  for (let i = 0; i < 64; i++) s.chunks.buffers.take().fill(0xff)
  const out = Buffer.alloc(128 * KiB + 4)
  t.equal(ov.read(fh, out, out.length, 0), out.length)
  t.ok(out.subarray(0, 64 * KiB).equals(a) && out.subarray(64 * KiB, 128 * KiB).equals(b) && out.subarray(128 * KiB).toString() === 'tail', 'and the file reads back byte-exact')
  ov.release(fh)
})
