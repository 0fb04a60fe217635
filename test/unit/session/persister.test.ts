// The persister (src/session/persister.ts): what is written through the overlay reaches the
// store, in the head turn's layer, and is there when the store is opened again. A Session in
// this process over a real lower directory and a real store: no FUSE, no root.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import type { Session } from '../../../src/session/session.js'
import { lastOpPerKey } from '../../../src/session/batch-chain.js'
import { ChunkStore } from '../../../src/store/chunks.js'
import { decodeEntry } from '../../../src/store/codec.js'
import { CHUNK_SIZE, type Entry } from '../../../src/store/entries.js'
import { entryKey, type BatchOp } from '../../../src/store/keys.js'
import { Store } from '../../../src/store/store.js'
import { sessionIn, tmpDir, type Tap } from '../helpers.js'


const session = (t: Tap, dir: string) => sessionIn(t, dir)

/** The head layer's stored entry for p, read from LevelDB itself. */
const stored = (s: Session, p: string): Entry | undefined => {
  const raw = s.store.getSync(entryKey(s.headLayer, p))
  return raw ? decodeEntry(raw) : undefined
}
// Entries are looked at through these (the store's field names may change).
const kindOf = (e: Entry | undefined): string | undefined => (e as { kind?: string } | undefined)?.kind
const chunksOf = (e: Entry | undefined): Map<number, Buffer | null> => (e as { chunks: Map<number, Buffer | null> }).chunks

t.test('a flush puts the head\'s entries and chunks in the store', async t => {
  const { s, fs: w } = await session(t, tmpDir(t, 'persister'))
  const big = Buffer.alloc(CHUNK_SIZE + 100, 'x')
  big.write('end', CHUNK_SIZE + 90)
  await w.writeFile('big', big)
  await w.mkdir('dir')
  await w.writeFile('a.txt', 'changed')
  await s.persister.flushAll(true)
  const e = stored(s, '/w/big')
  t.equal(kindOf(e), 'f')
  t.same([...chunksOf(e).keys()].sort(), [0, 1], 'two chunks')
  const chunks = new ChunkStore(s.store)
  const bytes = Buffer.concat([0, 1].map(i => chunks.get(chunksOf(e).get(i)!)))
  t.ok(bytes.equals(big), 'the chunks hold the bytes written')
  t.equal(kindOf(stored(s, '/w/dir')), 'd')
  t.equal(kindOf(stored(s, '/w/a.txt')), 'f', 'a changed lower file has its own entry')
  t.same([...s.overlay.head.keys()].sort(), ['/w', '/w/a.txt', '/w/big', '/w/dir'], 'the head holds these paths (/w: its times changed)')
  t.equal(s.status().headChanges, 4)
})

t.test('a removal is stored: a whiteout over a lower file, nothing for a file the turn made', async t => {
  const { s, fs: w } = await session(t, tmpDir(t, 'persister'))
  await w.writeFile('new', 'n')
  await s.persister.flushAll(true)
  t.equal(kindOf(stored(s, '/w/new')), 'f')
  await w.unlink('new')
  await w.unlink('a.txt')
  await s.persister.flushAll(true)
  t.equal(stored(s, '/w/new'), undefined, 'made and removed in one turn: no record at all')
  t.equal(kindOf(stored(s, '/w/a.txt')), 'w', 'the lower file is hidden by a whiteout')
})

t.test('what was written is there after the store is closed and opened again', async t => {
  const dir = tmpDir(t, 'persister')
  const first = await session(t, dir)
  await first.fs.writeFile('a.txt', 'one')
  await first.fs.mkdir('d')
  await first.fs.symlink('../a.txt', 'd/link')
  await first.s.turn()
  await first.fs.writeFile('d/f', 'in the head turn, not sealed')
  await first.fs.chmod('d/f', 0o600)
  await first.fs.rename('a.txt', 'moved.txt')
  // Written, not flushed by hand: closing the session must flush it.
  await first.close()
  // The store alone, as the next process opens it: the head layer holds the last changes.
  const store = await Store.open(join(dir, 'store'), { workspace: join(dir, 'lower'), create: false })
  const head = await store.loadLayer(store.meta.stack[store.meta.stack.length - 1])
  t.ok(head.has('/w/d/f'), 'the head layer has the unsealed write')
  t.ok(head.has('/w/moved.txt'), 'and the rename')
  await store.close()
  const again = await session(t, dir)
  t.equal((await again.fs.readFile('d/f')).toString(), 'in the head turn, not sealed')
  t.equal((await again.fs.stat('d/f')).perm, 0o600)
  t.equal((await again.fs.readFile('moved.txt')).toString(), 'one')
  t.same(await again.fs.readdir(''), ['d', 'moved.txt'])
  t.equal(await again.fs.readlink('d/link'), '../a.txt')
  t.equal(fs.readFileSync(join(dir, 'lower', 'w', 'a.txt'), 'utf8'), 'lower', 'the real file is untouched')
})

t.test('a durable change is in the store when durable() is done', async t => {
  const dir = tmpDir(t, 'persister')
  const { s, fs: w, close } = await session(t, dir)
  await w.mkdir('made')
  await s.persister.durable()
  // Logged (the write-ahead log) or in LevelDB: either way the next opening of the store has it.
  await close()
  const again = await session(t, dir)
  t.equal((await again.fs.stat('made')).type, 'd')
})

t.test('lastOpPerKey keeps the last op of each key, in order', async t => {
  const put = (key: string, v: string): BatchOp => ({ type: 'put', key, value: Buffer.from(v) })
  const ops: BatchOp[] = [put('a', '1'), put('b', '1'), { type: 'del', key: 'a' }, put('c', '1'), put('b', '2')]
  lastOpPerKey(ops)
  t.same(ops.map(op => op.type === 'put' ? `${op.key}=${op.value.toString()}` : `-${op.key}`), ['-a', 'c=1', 'b=2'])
  const none: BatchOp[] = []
  lastOpPerKey(none)
  t.same(none, [])
})

t.test('flushFile takes one file\'s data and leaves other files being written for their own close', async t => {
  const { s } = await session(t, tmpDir(t, 'persister'))
  // Within a few milliseconds, so that no timed batch comes in between; each create is made durable before
  // its data is written, as the mount answers CREATE.
  for (const name of ['a', 'b']) {
    const fh = s.overlay.create(`/w/${name}`, 0o644)
    await s.persister.durable()
    s.overlay.write(fh, Buffer.from(`data of ${name}`), 6, 0)
    s.overlay.release(fh)
  }
  t.same([...s.overlay.unsettled()].sort(), ['/w/a', '/w/b'], 'both files hold written data')
  const p = s.persister.flushFile('/w/a')
  t.same([...s.overlay.unsettled()], ['/w/b'], 'the close of a takes a\'s data only')
  await p
  await s.persister.flushAll(true)
  t.same([...s.overlay.unsettled()], [], 'flushAll takes the rest')
  t.equal(stored(s, '/w/a')?.kind, 'f')
  t.equal(stored(s, '/w/b')?.kind, 'f')
})

t.test('a file written past the dirty budget keeps its entry for its close, and every chunk it replaced or dropped is freed', async t => {
  const { s } = await session(t, tmpDir(t, 'persister'))
  const budget = s.persister.budgets.dirty
  const fh = s.overlay.create('/w/big', 0o644)
  await s.persister.durable()
  // Every op that goes to the log or to LevelDB, by key.
  const written: string[] = []
  const { wal } = s.store
  const append = wal.append.bind(wal)
  wal.append = (ops) => { for (const op of ops) written.push(op.key); return append(ops) }
  const batch = s.store.batch.bind(s.store)
  s.store.batch = async (ops, sync) => { for (const op of ops) written.push(op.key); return await batch(ops, sync) }
  const key = entryKey(s.headLayer, '/w/big')
  // Every chunk's bytes distinct (pass and index), so that no chunk stays referenced by another.
  const write = (pass: number, idx: number): void => {
    const chunk = Buffer.alloc(CHUNK_SIZE, pass)
    chunk.writeUInt32LE(idx)
    s.overlay.write(fh, chunk, CHUNK_SIZE, idx * CHUNK_SIZE)
    s.persister.noteWritten(CHUNK_SIZE)
  }
  // Appended: three budgets' worth, hashed in at each budget, the entry left for the close.
  const perBudget = budget / CHUNK_SIZE
  for (let i = 0; i < 3 * perBudget; i++) write(1, i)
  t.same([...s.overlay.unsettled()], [], 'every budget\'s chunks were hashed in')
  t.ok(written.length > 0, 'batches were made')
  t.notOk(written.includes(key), 'none of them held the file\'s entry')
  t.ok(s.chunks.headOnly.size > 0, 'the chunks are head-only')
  // Rewritten in place: that budget's batch takes the entry, and frees what was replaced.
  for (let i = 0; i < perBudget; i++) write(2, i)
  t.ok(written.includes(key), 'a rewrite in place puts the entry in the budget\'s batch')
  await s.persister.flushAll(true)
  t.equal(chunksOf(stored(s, '/w/big')).size, 3 * perBudget, 'the entry stored holds every chunk')
  s.overlay.ftruncate(fh, CHUNK_SIZE)
  s.overlay.release(fh)
  await s.persister.flushAll(true)
  t.equal(s.chunks.headOnly.size, 1, 'cut to one chunk: one head-only chunk is left')
  s.overlay.unlink('/w/big')
  await s.persister.flushAll(true)
  t.equal(s.chunks.headOnly.size, 0, 'after the unlink none is left: no chunk leaked')
})

t.test('a file appended in pieces that do not fill chunks keeps its entry for its close too, and leaks no chunk', async t => {
  const { s } = await session(t, tmpDir(t, 'persister'))
  const fh = s.overlay.create('/w/log', 0o644)
  await s.persister.durable()
  const written: string[] = []
  const { wal } = s.store
  const append = wal.append.bind(wal)
  wal.append = (ops) => { for (const op of ops) written.push(op.key); return append(ops) }
  const batch = s.store.batch.bind(s.store)
  s.store.batch = async (ops, sync) => { for (const op of ops) written.push(op.key); return await batch(ops, sync) }
  const key = entryKey(s.headLayer, '/w/log')
  // 10,000-byte pieces (tar's records): each budget's batch leaves a short last chunk that the
  // next pieces extend; that is an append, not a rewrite.
  const piece = 10_000
  let at = 0
  for (let i = 0; at < 3 * s.persister.budgets.dirty; i++) {
    const b = Buffer.alloc(piece, i % 251)
    b.writeUInt32LE(i)
    s.overlay.write(fh, b, piece, at)
    s.persister.noteWritten(piece)
    at += piece
  }
  t.ok(written.length > 0, 'batches were made')
  t.notOk(written.includes(key), 'none of them held the file\'s entry')
  s.overlay.release(fh)
  await s.persister.flushAll(true)
  t.equal(stored(s, '/w/log')?.kind, 'f', 'the close stores it')
  s.overlay.unlink('/w/log')
  await s.persister.flushAll(true)
  t.equal(s.chunks.headOnly.size, 0, 'after the unlink no head-only chunk is left: the short chunks the appends replaced were freed too')
})
