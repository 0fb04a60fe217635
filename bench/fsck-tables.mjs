#!/usr/bin/env node
// What checking LevelDB's table checksums costs `cpfs fsck` (issue 18 item 3): a real store of
// MiB of random 64 KiB chunks, in files of 16 chunks (so fsck keeps them all), compacted into
// tables. Then, alternating, median of the runs (OS cache warm): the table check alone
// (checkTables: every block's CRC32C) and all of fsckStore (the table check, then every record
// decoded and every chunk hashed). Last, once: fsck after two bytes of one chunk's block were
// flipped (more than one byte: LevelDB's repair and a full compaction run). Needs
// `npm run build`.
//   node bench/fsck-tables.mjs [--mib 300] [--runs 5]
import { randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../dist/store/store.js'
import { ChunkStore } from '../dist/store/chunks.js'
import { encodeEntry } from '../dist/store/codec.js'
import { entryKey } from '../dist/store/keys.js'
import { fsckStore } from '../dist/store/fsck.js'
import { checkTables } from '../dist/store/tables.js'

const argv = process.argv.slice(2)
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? Number(argv[i + 1]) : def }
const MIB = opt('--mib', 300)
const RUNS = opt('--runs', 5)
const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-fsck-'))
try {
  const path = join(base, 's')
  let store = await Store.open(path, { workspace: '/bench', create: true })
  for (let mb = 0; mb < MIB; mb++) {
    const data = randomBytes(1 << 20)
    const c = new ChunkStore(store)
    const chunks = new Map()
    for (let i = 0; i < 16; i++) chunks.set(i, c.put(data.subarray(i * 65536, (i + 1) * 65536)))
    const ops = []
    c.drain(ops)
    ops.push({ type: 'put', key: entryKey(1, `/f${mb}`), value: encodeEntry({ t: 'f', mode: 0o644, size: 1 << 20, mtime: 0, chunks }) })
    await store.batch(ops)
  }
  await store.close()
  store = await Store.open(path, { workspace: '/bench', create: false })
  await store.db.compactRange('\u0000', '\uffff') // everything in tables, as in a store used for a while
  await store.close()
  const db = join(path, 'db')
  const tables = fs.readdirSync(db).filter(n => n.endsWith('.ldb'))
  const bytes = tables.reduce((n, f) => n + fs.statSync(join(db, f)).size, 0)
  const times = { 'table check alone': [], 'cpfs fsck (fsckStore), all of it': [] }
  let blocks = 0
  for (let run = 0; run < RUNS; run++) {
    let t0 = performance.now()
    const checks = checkTables(db)
    times['table check alone'].push(performance.now() - t0)
    blocks = checks.reduce((n, c) => n + c.blocks, 0)
    if (checks.some(c => c.problems.length)) throw new Error('a fresh store has damaged tables?')
    t0 = performance.now()
    const r = await fsckStore(path, '/bench')
    times['cpfs fsck (fsckStore), all of it'].push(performance.now() - t0)
    if (!r.clean || r.chunks !== MIB * 16) throw new Error(`fsck: ${JSON.stringify(r.damage)} ${r.chunks}`)
  }
  const victim = join(db, fs.readdirSync(db).filter(n => n.endsWith('.ldb')).sort()[0])
  const buf = fs.readFileSync(victim)
  buf[1000] ^= 1
  buf[2000] ^= 1
  fs.writeFileSync(victim, buf)
  const t0 = performance.now()
  const r = await fsckStore(path, '/bench')
  const damaged = performance.now() - t0
  if (r.clean || !r.lost.length) throw new Error('the damage was not found')
  const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
  console.log(`A store of ${MIB} MiB of chunks: ${tables.length} tables, ${(bytes / 2 ** 20).toFixed(0)} MiB, ${blocks} blocks; median of ${RUNS}, OS cache warm:\n`)
  console.log('| what | seconds | MiB/s of tables |\n|---|---:|---:|')
  for (const [name, r] of Object.entries(times)) console.log(`| ${name} | ${(median(r) / 1000).toFixed(2)} | ${(bytes / 2 ** 20 / (median(r) / 1000)).toFixed(0)} |`)
  console.log(`| cpfs fsck, one block damaged beyond one byte (repair, compaction; once) | ${(damaged / 1000).toFixed(2)} | ${(bytes / 2 ** 20 / (damaged / 1000)).toFixed(0)} |`)
} finally {
  fs.rmSync(base, { recursive: true, force: true })
}
