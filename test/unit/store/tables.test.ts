// LevelDB's table files read by cpfs itself (src/store/tables.ts; its checksum and decompression
// have their own tests, crc32c and snappy): a
// real store written by classic-level (Snappy-compressed and stored blocks, a filter block),
// every block verified and every record read back as LevelDB reads it; damage found, named
// and, for one changed byte, located.
import t from 'tap'
import * as fs from 'node:fs'
import { randomBytes, createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ClassicLevel } from 'classic-level'
import { blockContents, blockEntries, checkTableBytes, checkTables, internalKey, tableIndex } from '../../../src/store/tables.js'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-tables-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))

/** A store of small compressible records and large random ones, all of it in table files. */
async function store (name: string): Promise<{ db: string, records: Map<string, Buffer> }> {
  const db = join(dir, name)
  const level = new ClassicLevel<string, Buffer>(db, { valueEncoding: 'buffer' })
  await level.open()
  const records = new Map<string, Buffer>()
  for (let i = 0; i < 2000; i++) records.set(`e0000000001/dir/file-${String(i).padStart(5, '0')}`, Buffer.from(JSON.stringify({ kind: 'f', mode: 420, size: i })))
  for (let i = 0; i < 20; i++) records.set('c' + createHash('sha256').update(String(i)).digest('hex'), randomBytes(9000))
  records.set('m', Buffer.from('meta'))
  for (const [k, v] of records) await level.put(k, v)
  await level.close()
  await level.open() // its log becomes a table
  await level.close()
  return { db, records }
}

const tableOf = (db: string): string => join(db, fs.readdirSync(db).find(n => n.endsWith('.ldb'))!)

t.test('a store written by classic-level: every block verified, every record read back', async t => {
  const { db, records } = await store('clean')
  const checks = checkTables(db)
  t.ok(checks.length >= 1)
  t.same(checks.flatMap(c => c.problems), [], 'no problems')
  const read = new Map<string, Buffer>()
  const types = new Set<number>()
  let blocks = 0
  for (const c of checks) {
    const buf = fs.readFileSync(join(db, c.file))
    const index = tableIndex(c.file, buf)
    blocks += index.length + 3 // index, metaindex, filter
    for (const { offset, size } of index) {
      types.add(buf[offset + size])
      const { entries, error } = blockEntries(blockContents(buf, offset, size))
      t.notOk(error)
      for (const e of entries) read.set(internalKey(e.key)!.key.toString(), e.value)
    }
  }
  t.same([...types].sort(), [0, 1], 'blocks stored as they are and Snappy-compressed')
  t.equal(checks.reduce((n, c) => n + c.blocks, 0), blocks, 'data, index, metaindex and filter blocks counted')
  t.equal(read.size, records.size, 'every record')
  for (const [k, v] of records) if (!read.get(k)?.equals(v)) t.fail(`record ${k} reads back wrong`)
})

t.test('a flipped byte in a data block: the file and the block are named, the byte located', async t => {
  const { db } = await store('flip')
  const file = tableOf(db)
  const orig = fs.readFileSync(file)
  const name = file.split('/').pop()!
  const index = tableIndex(name, orig)
  // A block stored as it is (a random chunk) and one compressed (small records).
  for (const type of [0, 1]) {
    const block = index.find(b => orig[b.offset + b.size] === type)!
    const buf = Buffer.from(orig)
    const at = block.offset + Math.floor(block.size / 2)
    buf[at] ^= 0x20
    const c = checkTableBytes(name, buf)
    t.equal(c.problems.length, 1, `type ${type}: one problem`)
    const p = c.problems[0]
    t.match(p, { code: 'BLOCK_CHECKSUM', kind: 'data', offset: block.offset, size: block.size, complete: true })
    t.match(p.message, new RegExp(`^table ${name}: data block at ${block.offset} \\(${block.size} bytes\\) fails its checksum`))
    t.same(p.fix, { at, byte: orig[at] }, 'the byte and its value are found')
    t.ok(p.keys.length >= 1, 'the records of the block are named')
    const holder = blockEntries(blockContents(orig, block.offset, block.size)).entries.find(e => e.key.includes(p.fixKey!))
    t.ok(p.fixKey && holder, 'and the record the byte belongs to')
    if (type === 0) t.ok(holder!.at <= at - block.offset && at - block.offset < holder!.end, 'which holds it')
  }
  // The stored checksum itself, and the type byte.
  const block = index[1]
  for (const at of [block.offset + block.size, block.offset + block.size + 3]) {
    const buf = Buffer.from(orig)
    buf[at] ^= 0x01
    t.same(checkTableBytes(name, buf).problems[0]?.fix, { at, byte: orig[at] }, `byte ${at - block.offset - block.size} of the trailer`)
  }
})

t.test('damage that one byte does not explain: no fix, the records that read are named', async t => {
  const { db } = await store('two')
  const file = tableOf(db)
  const name = file.split('/').pop()!
  const buf = fs.readFileSync(file)
  const block = tableIndex(name, buf).find(b => buf[b.offset + b.size] === 0)!
  buf[block.offset + block.size - 20] ^= 0x01 // in the restart array
  buf[block.offset + block.size - 30] ^= 0x10
  const [p] = checkTableBytes(name, buf).problems
  t.match(p, { code: 'BLOCK_CHECKSUM', kind: 'data', offset: block.offset })
  t.notOk(p.fix, 'nothing to put back')
  t.ok(p.keys.length >= 1, 'the records that still read are named')
  t.ok(p.range?.to.length, 'and the range of keys the block holds')
})

t.test('a truncated table, a damaged index: found', async t => {
  const { db } = await store('cut')
  const file = tableOf(db)
  const name = file.split('/').pop()!
  const buf = fs.readFileSync(file)
  for (const len of [buf.length - 1, buf.length - 48, 30, 0]) {
    const [p] = checkTableBytes(name, buf.subarray(0, len)).problems
    t.match(p, { code: len < 48 ? 'TABLE_SHORT' : 'TABLE_FOOTER', kind: 'footer' }, `cut to ${len} bytes`)
    t.match(p.message, `table ${name}:`)
  }
  fs.truncateSync(file, buf.length - 100)
  t.match(checkTables(db)[0].problems[0], { code: 'TABLE_FOOTER', file: name }, 'checkTables reads the file as it is')
  // The index block is the one before the footer: two bytes of it.
  const damaged = Buffer.from(buf)
  damaged[buf.length - 60] ^= 0x04
  damaged[buf.length - 70] ^= 0x04
  const problems = checkTableBytes(name, damaged).problems
  t.match(problems, [{ code: 'BLOCK_CHECKSUM', kind: 'index' }], 'the index fails, no data block is read')
})
