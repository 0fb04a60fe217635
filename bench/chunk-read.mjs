#!/usr/bin/env node
// What checking chunks against their SHA-256 costs on a read from the store (issue 18 item 7):
// MiB of random 64 KiB chunks, written to a real store, read back cold (a fresh ChunkStore,
// each chunk once) with ChunkStore.get (checked) and with the store's getSync alone (what get
// did before the check), alternating, median of the runs. Needs `npm run build`.
//   node bench/chunk-read.mjs [--mib 256] [--runs 5]
import { randomBytes, createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../dist/store/store.js'
import { ChunkStore } from '../dist/store/chunks.js'

const argv = process.argv.slice(2)
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? Number(argv[i + 1]) : def }
const MIB = opt('--mib', 256)
const RUNS = opt('--runs', 5)
const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-chunks-'))
try {
  let store = await Store.open(join(base, 's'), { workspace: '/bench', create: true })
  const data = randomBytes(MIB << 20)
  const hashes = []
  for (let mb = 0; mb < MIB; mb++) {
    const c = new ChunkStore(store)
    for (let i = 0; i < 16; i++) hashes.push(c.put(data.subarray((mb << 20) + i * 65536, (mb << 20) + (i + 1) * 65536)))
    const ops = []
    c.drain(ops)
    await store.batch(ops)
  }
  await store.close()
  store = await Store.open(join(base, 's'), { workspace: '/bench', create: false })
  await store.db.compactRange('\u0000', '\uffff') // everything in tables, as in a store used for a while
  const times = { checked: [], unchecked: [], 'SHA-256 alone': [] }
  for (let run = 0; run < RUNS; run++) {
    let t0 = performance.now()
    const c = new ChunkStore(store)
    for (const h of hashes) c.get(h)
    times.checked.push(performance.now() - t0)
    t0 = performance.now()
    for (const h of hashes) store.getSync('c' + h.toString('hex'))
    times.unchecked.push(performance.now() - t0)
    t0 = performance.now()
    for (let o = 0; o < data.length; o += 65536) createHash('sha256').update(data.subarray(o, o + 65536)).digest()
    times['SHA-256 alone'].push(performance.now() - t0)
  }
  await store.close()
  const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
  console.log(`Reading ${MIB} MiB of 64 KiB chunks from a store (LevelDB tables, OS cache warm), median of ${RUNS}:\n`)
  console.log('| read | seconds | MiB/s |\n|---|---:|---:|')
  for (const [name, r] of Object.entries(times)) console.log(`| ${name} | ${(median(r) / 1000).toFixed(3)} | ${(MIB / (median(r) / 1000)).toFixed(0)} |`)
} finally {
  fs.rmSync(base, { recursive: true, force: true })
}
