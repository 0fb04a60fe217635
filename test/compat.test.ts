// A history written by cpfs 0.1 (dense chunk lists in which 1 meant "the same bytes as the
// origin file", millisecond times, store version 1) still reads, mounts and applies byte-exact.
import t from 'tap'
import * as fs from 'node:fs'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { ClassicLevel } from 'classic-level'
import { Packr } from 'msgpackr'
import { fuseAvailable, workspace } from './helpers.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })
const CHUNK = 64 * 1024

if (fuseAvailable(t)) {
  t.test('a version-1 store: a partly rewritten lower file and a new file', async t => {
    const lower = Buffer.alloc(3 * CHUNK, 'L')
    const w = workspace(t)
    fs.writeFileSync(join(w.ws, 'lower.bin'), lower)
    // Register the workspace the way cpfs does, then write the old format by hand.
    w.ok('mount', w.ws)
    const store = JSON.parse(w.ok('status', w.ws, '--json')).store
    w.ok('unmount', w.ws, '--discard')
    fs.rmSync(store, { recursive: true })
    fs.mkdirSync(store, { recursive: true })
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const written = Buffer.alloc(CHUNK, 'W')
    const hash = createHash('sha256').update(written).digest()
    const now = Date.now()
    const meta = { mode: 0o644, uid: 0, gid: 0, atime: now, mtime: now, ctime: now, ino: 0x80000001 }
    await db.batch([
      { type: 'put', key: 'm', value: packr.pack({ version: 1, workspace: w.ws, stack: [1], redo: [], applied: [], nextLayer: 2, nextIno: 0x80000005, createdAt: now }) },
      { type: 'put', key: 't0000000001', value: packr.pack({ layer: 1, openedAt: now }) },
      // lower.bin: chunk 0 rewritten, chunk 1 the origin's, then truncated within chunk 2's place.
      { type: 'put', key: 'e0000000001/lower.bin', value: packr.pack({ t: 'f', ...meta, size: 2 * CHUNK, chunks: [hash, 1], src: '/lower.bin' }) },
      { type: 'put', key: 'e0000000001/new.txt', value: packr.pack({ t: 'f', ...meta, ino: 0x80000002, size: CHUNK + 5, chunks: [hash, null], n: 1 }) },
      { type: 'put', key: 'c' + hash.toString('hex'), value: written }
    ], { sync: true })
    await db.close()

    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log[0].changes.map((c: any) => c.path), ['/lower.bin', '/new.txt'], 'the old history reads')
    w.ok('mount', w.ws)
    const got = fs.readFileSync(join(w.ws, 'lower.bin'))
    t.ok(got.equals(Buffer.concat([written, lower.subarray(CHUNK, 2 * CHUNK)])), 'the mount shows the rewritten chunk, then the origin\'s')
    const n = fs.readFileSync(join(w.ws, 'new.txt'))
    t.ok(n.equals(Buffer.concat([written, Buffer.alloc(5)])), 'a hole reads as zeros')
    w.ok('unmount', w.ws)
    t.ok(fs.readFileSync(join(w.ws, 'lower.bin')).equals(got), 'applied byte-exact')
    t.ok(fs.readFileSync(join(w.ws, 'new.txt')).equals(n))
    w.ok('rewind', '1', w.ws)
    t.ok(fs.readFileSync(join(w.ws, 'lower.bin')).equals(lower), 'and turn 1 rewinds to the original')
  })
}
