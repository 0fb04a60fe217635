// What cpfs fsck does with a damaged store (src/store/fsck.ts): missing records, damaged chunks,
// LevelDB that cannot open, flipped bytes in its tables. A real LevelDB, no mount (how a store
// notices damage when it opens: integrity.test.ts).
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../../../src/store/store.js'
import { ChunkStore } from '../../../src/store/chunks.js'
import { fsckStore } from '../../../src/store/fsck.js'
import { decodeEntry, encodeEntry } from '../../../src/store/codec.js'
import { entryKey, turnKey, type BatchOp } from '../../../src/store/keys.js'
import { randomBytes } from 'node:crypto'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-fsck-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))

t.test('fsck: a missing turn record is reported and rebuilt empty', async t => {
  const d = join(dir, 'c')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.db.del(turnKey(1))
  await s.close()
  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false)
  t.match(r.damage.join('\n'), /missing the record of turn 1/)
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.turnRecord(1).openedAt, 0, 'an empty record')
  await s.close()
})

t.test('fsck: damaged and missing chunks name their files and turns; unreferenced chunks and unreadable records go', async t => {
  const d = join(dir, 'd')
  const s = await Store.open(d, { workspace: '/w', create: true })
  const c = new ChunkStore(s)
  const good = c.put(Buffer.from('good bytes'))
  const bad = c.put(Buffer.from('bytes to damage'))
  const missing = Buffer.alloc(32, 9)
  c.put(Buffer.from('nobody uses me'))
  const ops: any[] = []
  c.drain(ops)
  const file = (chunk: Buffer) => encodeEntry({ kind: 'f', mode: 0o644, size: 10, mtime: 0, chunks: new Map([[0, chunk]]) } as any)
  ops.push({ type: 'put', key: entryKey(1, '/good.txt'), value: file(good) })
  ops.push({ type: 'put', key: entryKey(1, '/bad.txt'), value: file(bad) })
  ops.push({ type: 'put', key: entryKey(1, '/gone.txt'), value: file(missing) })
  ops.push({ type: 'put', key: entryKey(1, '/garbled.txt'), value: Buffer.from([0x85, 0xa1]) })
  await s.batch(ops, true)
  // The last byte of the chunk, in its pack file: 'e' becomes 'f'.
  const ref = s.chunkRef(bad.toString('hex'))!
  const fd = fs.openSync(s.packs.path(ref.pack), 'r+')
  fs.writeSync(fd, Buffer.from('f'), 0, 1, ref.offset + ref.length - 1)
  fs.closeSync(fd)
  await s.close()
  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false)
  const lost = r.lost.map(l => `${l.path} in ${l.where}`).sort()
  t.same(lost, ['/bad.txt in turn 1', '/garbled.txt in turn 1', '/gone.txt in turn 1'], 'what is lost, where')
  t.match(r.damage.join('\n'), /chunk [0-9a-f]+ is damaged/)
  t.match(r.damage.join('\n'), /chunk 0909[0-9a-f]+ is missing/)
  t.match(r.repaired.join('\n'), /deleted 1 unreferenced chunk/)
  t.match(r.repaired.join('\n'), /deleted 1 record\(s\) that do not decode/)
  const again = await fsckStore(d, '/w')
  t.same(again.lost.map(l => l.path).sort(), ['/bad.txt', '/gone.txt'], 'a damaged chunk stays damaged: the next run says so again')
})

t.test('fsck: LevelDB that cannot open is rebuilt by its repair', async t => {
  const d = join(dir, 'e')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.batch([{ type: 'put', key: entryKey(1, '/a'), value: encodeEntry({ kind: 'd', mode: 0o755 } as any) }], true)
  await s.close()
  for (const name of fs.readdirSync(join(d, 'db'))) {
    if (name.startsWith('MANIFEST')) fs.writeFileSync(join(d, 'db', name), Buffer.alloc(4096, 0xab))
  }
  await t.rejects(Store.open(d, { workspace: '/w', create: false }), { code: 'STORE_CORRUPT', message: /is corrupt/ })
  const r = await fsckStore(d, '/w')
  t.match(r.repaired.join('\n'), /LevelDB's repair rebuilt/)
  s = await Store.open(d, { workspace: '/w', create: false })
  t.ok(s.getSync(entryKey(1, '/a')), 'the records are back')
  await s.close()
})

/** A link entry whose target is random (LevelDB stores its block as it is, uncompressed). */
const link = (target: string): Buffer => encodeEntry({ kind: 'l', target, mode: 0o777 } as any)
const randomTarget = (tag: string): string => `${tag}-${randomBytes(150).toString('base64')}`

/** The table file of `db` that holds `text`, its bytes, and where `text` starts. */
function holding (db: string, text: string): { file: string, buf: Buffer, at: number } {
  for (const name of fs.readdirSync(db).filter(n => n.endsWith('.ldb'))) {
    const buf = fs.readFileSync(join(db, name))
    const at = buf.indexOf(text)
    if (at >= 0) return { file: join(db, name), buf, at }
  }
  throw new Error(`no table holds ${text}`)
}

const targetOf = (s: Store, path: string): string | undefined => { const v = s.getSync(entryKey(1, path)); return v ? (decodeEntry(v) as any).target : undefined }

t.test('fsck: a flipped byte in a LevelDB table is found by its checksum and put back', async t => {
  const d = join(dir, 'f')
  let s = await Store.open(d, { workspace: '/w', create: true })
  const targets = new Map<string, string>()
  for (let i = 0; i < 40; i++) targets.set(`/f${String(i).padStart(3, '0')}`, randomTarget(`t${i}`))
  await s.batch([...targets].map(([p, target]) => ({ type: 'put', key: entryKey(1, p), value: link(target) })), true)
  await s.close()
  s = await Store.open(d, { workspace: '/w', create: false }) // LevelDB's log becomes a table
  await s.close()
  const { file, buf, at } = holding(join(d, 'db'), targets.get('/f007')!)
  buf[at + 20] ^= 0x01
  fs.writeFileSync(file, buf)
  s = await Store.open(d, { workspace: '/w', create: false })
  t.not(targetOf(s, '/f007'), targets.get('/f007'), 'LevelDB itself hands back the wrong target')
  await s.close()

  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false, 'fsck finds the damage')
  t.match(r.damage.join('\n'), new RegExp(`table ${file.split('/').pop()}: data block at \\d+ \\(\\d+ bytes\\) fails its checksum: one byte, at ${at + 20}, .* in record "e0000000001/f007"`))
  t.match(r.repaired.join('\n'), /put back byte/)
  t.same(r.lost, [], 'nothing is lost')
  t.equal((await fsckStore(d, '/w')).clean, true, 'the next fsck finds the store clean')
  s = await Store.open(d, { workspace: '/w', create: false })
  for (const [p, target] of targets) if (targetOf(s, p) !== target) t.fail(`${p} reads wrong`)
  t.equal(targetOf(s, '/f007'), targets.get('/f007'), 'the record reads right again')
  await s.close()
})

t.test('fsck: a damaged block one byte does not explain goes; its records are listed, no older version shows through', async t => {
  const d = join(dir, 'g')
  let s = await Store.open(d, { workspace: '/w', create: true })
  const reopen = async (): Promise<void> => { await s.close(); s = await Store.open(d, { workspace: '/w', create: false }) }
  const v = { a1: randomTarget('a1'), b1: randomTarget('b1'), z1: randomTarget('z1'), z2: randomTarget('z2'), a3: randomTarget('a3'), b2: randomTarget('b2') }
  const fill = new Map<string, string>()
  for (let i = 0; i < 40; i++) fill.set(`/f${String(i).padStart(3, '0')}`, randomTarget(`f${i}`))
  const put = (p: string, target: string): BatchOp => ({ type: 'put', key: entryKey(1, p), value: link(target) })
  // Table 1: /a, /b, the fillers, /z (in a later block); table 2: a newer /z; LevelDB's log:
  // newer /a and /b.
  await s.batch([put('/a', v.a1), put('/b', v.b1), ...[...fill].map(([p, x]) => put(p, x)), put('/z', v.z1)], false)
  await reopen()
  await s.batch([put('/z', v.z2)], false)
  await reopen()
  await s.batch([put('/a', v.a3), put('/b', v.b2)], false)
  await s.close()
  const db = join(d, 'db')
  const t1 = holding(db, v.a1)
  t.ok(t1.buf.indexOf(v.z1) - t1.at > 4096, '/z is in another block of table 1 than /a')
  for (const [text, holder] of [[v.a1, t1], [v.z2, holding(db, v.z2)]] as const) {
    const at = holder.buf.indexOf(text)
    holder.buf[at + 10] ^= 0x01
    holder.buf[at + 90] ^= 0x08
    fs.writeFileSync(holder.file, holder.buf)
  }
  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false)
  t.equal(r.damage.filter(l => /no single changed byte explains it, so the block goes/.test(l)).length, 2, 'both blocks named')
  t.match(r.damage.join('\n'), /"e0000000001\/a"/, 'with their records')
  t.match(r.repaired.join('\n'), /LevelDB's repair rebuilt the database without the damaged blocks/)
  const lost = r.lost.map(l => l.path)
  t.ok(lost.includes('/z'), '/z is lost: its newest version was in a damaged block')
  t.ok(lost.some(p => p.startsWith('/f')), 'and the fillers of the damaged block')
  t.notOk(lost.includes('/a') || lost.includes('/b'), 'not /a and /b: their newest versions were elsewhere')
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(targetOf(s, '/a'), v.a3, '/a has its newest version')
  t.equal(targetOf(s, '/b'), v.b2, '/b too')
  t.equal(targetOf(s, '/z'), undefined, '/z is gone: its older version does not show through')
  for (const [p, target] of fill) {
    const now = targetOf(s, p)
    if (now !== undefined && now !== target) t.fail(`${p} reads wrong`)
    if (now === undefined && !lost.includes(p)) t.fail(`${p} is gone without being listed`)
  }
  await s.close()
  t.equal((await fsckStore(d, '/w')).clean, true, 'the next fsck finds the store clean')
})
