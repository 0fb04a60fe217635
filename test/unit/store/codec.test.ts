// The store's record format (src/store/codec.ts): MessagePack values, and layer entries whose
// sparse chunk map travels as a flat array; entries written by cpfs 0.1 (a dense chunk array,
// 1 for "the same bytes as src") read as today's sparse maps.
import t from 'tap'
import { createHash } from 'node:crypto'
import { decode, decodeEntry, encode, encodeEntry } from '../../../src/store/codec.js'
import { CHUNK_SIZE, type Entry } from '../../../src/store/entries.js'

const hash = (s: string): Buffer => createHash('sha256').update(s).digest()

// The entries these tests write, in one place (the store's field names may change).
const meta = { mode: 0o644, uid: 1000, gid: 1000, atime: 1, mtime: 2, ctime: 3, mtimeNs: 999_999, ino: 2 ** 52 + 7 }
const file = (chunks: Array<[number, Buffer | null]>, extra: object = {}): Entry => ({ kind: 'f', ...meta, size: 10 * CHUNK_SIZE, chunks: new Map(chunks), ...extra })
const others = (): Entry[] => [
  { kind: 'd', ...meta, mode: 0o755, opaque: 1, redirect: '/moved from', fresh: 1 },
  { kind: 'l', ...meta, target: '../a b/é' },
  { kind: 'n', ...meta, fmt: 0o020000, rdev: 0x0103 },
  { kind: 'w', newInTurn: 1 },
  { kind: 'h', ino: 2 ** 52 + 1 },
  { kind: 'd', ...meta, xattrs: { 'user.tag': Buffer.from([0, 1, 255]) } }
]
/** A file entry as cpfs 0.1 wrote it: one slot per chunk, a hash, null or 1 (src's bytes). */
const v01 = (chunks: Array<Buffer | null | 1>, extra: object): Buffer => encode({ t: 'f', ...meta, size: chunks.length * CHUNK_SIZE, chunks, ...extra })
const chunksOf = (e: Entry): Map<number, Buffer | null> => (e as { chunks: Map<number, Buffer | null> }).chunks
const field = (e: Entry, name: string): unknown => (e as unknown as Record<string, unknown>)[name]

t.test('plain values round-trip, integer-keyed objects included', async t => {
  const v = { stack: [1, 2, 3], redo: [[4, 5]], nested: { a: null, b: 'é😀', n: 2 ** 53 - 1 }, buf: Buffer.from('x') }
  const back = decode<typeof v>(encode(v))
  t.same(back.stack, v.stack)
  t.same(back.redo, v.redo)
  t.same(back.nested, v.nested)
  t.ok(Buffer.from(back.buf).equals(v.buf), 'bytes come back as bytes')
  t.same(decode(encode({ 1: 'a', 20: 'b' })), { 1: 'a', 20: 'b' }, 'an object with integer keys')
})

t.test('a file\'s sparse chunk map round-trips: hashes, nulls (zeros over the lower), far indexes', async t => {
  const e = file([[9, hash('nine')], [0, hash('zero')], [3, null], [2 ** 30, hash('far')]], { src: '/lower file', srcSize: 5 * CHUNK_SIZE + 3 })
  const back = decodeEntry(encodeEntry(e))
  t.same(back, e, 'the same entry')
  t.ok(chunksOf(back) instanceof Map, 'the chunk map is a Map again')
  t.same([...chunksOf(back).keys()], [0, 3, 9, 2 ** 30], 'indexes are numbers, in order')
  t.ok(Buffer.isBuffer(chunksOf(back).get(0)), 'hashes are Buffers')
  t.equal(chunksOf(back).get(3), null)
  t.same(decodeEntry(encodeEntry(file([]))), file([]), 'an empty file')
  t.equal(field(back, 'chunkRefs'), undefined, 'the wire field does not leak into the entry')
})

t.test('entries other than files round-trip as they are', async t => {
  for (const e of others()) t.same(decodeEntry(encodeEntry(e)), e, JSON.stringify(e, (_, v) => v?.type === 'Buffer' ? 'buf' : v))
})

t.test('cpfs 0.1 entries: a dense chunk array read as a sparse map', async t => {
  const h = hash('written')
  // No src: a null slot is a hole, nothing to record.
  const plain = decodeEntry(v01([h, null, null, h], {}))
  t.same([...chunksOf(plain)], [[0, h], [3, h]], 'hashes kept, holes dropped')
  t.equal(field(plain, 'srcSize'), undefined)
  t.equal(field(plain, 'chunks') instanceof Map, true)
  // With src: 1s form the front; src shows through below the last of them, and a null slot
  // there hides it (zeros over the lower's bytes).
  const copied = decodeEntry(v01([null, 1, h, 1, null, null], { src: '/big' }))
  t.equal(field(copied, 'srcSize'), 4 * CHUNK_SIZE, 'src reaches the end of the last 1')
  t.same([...chunksOf(copied)].sort((a, b) => a[0] - b[0]), [[0, null], [2, h]], 'a null below srcSize hides src; holes above it are not recorded')
  // A file truncated inside its src slots: srcSize is cut at the size.
  const cut = decodeEntry(encode({ t: 'f', ...meta, size: 100, chunks: [1], src: '/big' }))
  t.equal(field(cut, 'srcSize'), 100)
})
