// Layer entries' arithmetic (src/store/entries.ts): times split into milliseconds and
// nanoseconds, chunk counts and lengths, and the bytes a file really holds in the store.
import t from 'tap'
import { CHUNK_SIZE, chunkCount, chunkLen, cloneEntry, fromNs, fromSecNs, sameTime, setTime, srcBytes, storedBytes, toSecNs, type Entry, type FileEntry, type Meta } from '../../../src/store/entries.js'

// The entries these tests write, in one place (the store's field names may change).
const meta = (): Meta => ({ mode: 0o644, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, ino: 5 })
const file = (size: number, chunks: Array<[number, Buffer | null]>, src?: { path: string, size: number }): FileEntry =>
  ({ kind: 'f', ...meta(), size, chunks: new Map(chunks), ...(src ? { src: src.path, srcSize: src.size } : {}) }) as FileEntry
const H = Buffer.alloc(32, 1)

t.test('times: seconds and nanoseconds to milliseconds and back', async t => {
  t.same(fromSecNs(1, 2_345_678), { ms: 1002, ns: 345_678 })
  t.same(toSecNs(1002, 345_678), { sec: 1, nsec: 2_345_678 })
  for (const [sec, nsec] of [[0, 0], [1_700_000_000, 999_999_999], [5, 1]]) t.same(toSecNs(fromSecNs(sec, nsec).ms, fromSecNs(sec, nsec).ns), { sec, nsec }, `${sec}.${nsec}`)
  t.same(fromNs(1_500_000_123n), { ms: 1500, ns: 123 })
  t.same(fromNs(-1n), { ms: -1, ns: 999_999 }, 'before the epoch: the nanoseconds stay positive')
  const m = meta()
  setTime(m, 'm', { ms: 10, ns: 5 })
  t.equal(m.mtime, 10)
  t.equal(m.mtimeNs, 5)
  setTime(m, 'm', { ms: 11, ns: 0 })
  t.equal(m.mtimeNs, undefined, 'no nanoseconds: the field goes')
  const other = meta()
  other.mtime = 11
  t.ok(sameTime(m, other, 'm'))
  setTime(other, 'a', { ms: 0, ns: 1 })
  t.notOk(sameTime(m, other, 'a'), 'a nanosecond apart')
})

t.test('chunk counts and lengths', async t => {
  t.equal(chunkCount(0), 0)
  t.equal(chunkCount(1), 1)
  t.equal(chunkCount(CHUNK_SIZE), 1)
  t.equal(chunkCount(CHUNK_SIZE + 1), 2)
  t.equal(chunkLen(CHUNK_SIZE + 10, 0), CHUNK_SIZE)
  t.equal(chunkLen(CHUNK_SIZE + 10, 1), 10, 'the last chunk is cut at the size')
  t.equal(chunkLen(CHUNK_SIZE + 10, 2), 0, 'past the end: nothing')
})

t.test('stored bytes: written chunks plus the lower bytes that still show through', async t => {
  t.equal(storedBytes(file(10 * CHUNK_SIZE, [])), 0, 'a sparse file holds nothing')
  t.equal(storedBytes(file(CHUNK_SIZE + 10, [[0, H], [1, H]])), CHUNK_SIZE + 10, 'written chunks, the last one cut')
  t.equal(storedBytes(file(CHUNK_SIZE, [[0, null]])), 0, 'zeros over the lower cost nothing')
  const copied = file(4 * CHUNK_SIZE, [[1, H], [3, H]], { path: '/big', size: 2 * CHUNK_SIZE + 5 })
  t.equal(srcBytes(copied), 2 * CHUNK_SIZE + 5)
  // src: chunks 0 and 2 (5 bytes) show through; chunk 1 is written over it; 3 is written.
  t.equal(storedBytes(copied), CHUNK_SIZE + 5 + 2 * CHUNK_SIZE)
  t.equal(srcBytes(file(100, [], { path: '/big', size: 5000 })), 100, 'src cut by a truncation')
})

t.test('a clone does not share its chunk map or attributes', async t => {
  const e = file(1, [[0, H]])
  e.xattrs = { 'user.a': Buffer.from('1') }
  const c = cloneEntry(e)
  c.chunks.set(1, null)
  c.xattrs!['user.b'] = Buffer.from('2')
  t.equal(e.chunks.size, 1)
  t.same(Object.keys(e.xattrs), ['user.a'])
  const w: Entry = { kind: 'w' }
  t.not(cloneEntry(w), w, 'a copy')
})
