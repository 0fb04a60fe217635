#!/usr/bin/env node
// How fast LevelDB stores a big write the way the daemon hands it over: 64 KiB chunks keyed
// by their SHA-256, 1 MiB per batch, up to 64 batches in flight, one synced batch at the end
// (an fsync). Compares memtable sizes (LevelDB's writeBufferSize) side by side in one run, and
// the way cpfs stores chunks since issue 21: bytes appended to pack files (dist/store/packs.js),
// LevelDB holding only references, the packs fdatasynced before the synced batch (npm run build first):
//   node bench/store.mjs [--mib 256] [--runs 3]
import { ClassicLevel } from 'classic-level'
import { createHash, randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PackSet } from '../dist/store/packs.js'
import { encodeRef } from '../dist/store/store.js'

const argv = process.argv.slice(2)
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? Number(argv[i + 1]) : def }
const MIB = opt('--mib', 256)
const RUNS = opt('--runs', 3)
const SETS = { 'LevelDB default (4 MiB)': {}, '8 MiB (cpfs before packs)': { writeBufferSize: 8 << 20 }, '16 MiB': { writeBufferSize: 16 << 20 }, '64 MiB': { writeBufferSize: 64 << 20 }, 'pack files + references, 8 MiB (cpfs)': { writeBufferSize: 8 << 20, packs: true } }

const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-store-'))
const data = randomBytes(MIB << 20)
const results = {}
try {
  for (let run = 0; run < RUNS; run++) {
    for (const [name, o] of Object.entries(SETS)) {
      const dir = join(base, 'db')
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(join(base, 'packs'), { recursive: true, force: true })
      const { packs: inPacks, ...level } = o
      const db = new ClassicLevel(dir, { keyEncoding: 'utf8', valueEncoding: 'buffer', ...level })
      await db.open()
      const packs = inPacks ? PackSet.open(base) : null
      const t0 = performance.now()
      const inflight = []
      for (let mb = 0; mb < MIB; mb++) {
        const ops = []
        for (let c = 0; c < 16; c++) {
          const v = data.subarray((mb << 20) + c * 65536, (mb << 20) + (c + 1) * 65536)
          const hash = createHash('sha256').update(v).digest()
          if (packs) ops.push({ type: 'put', key: 'r' + hash.toString('hex'), value: encodeRef(packs.append(hash, v)) })
          else ops.push({ type: 'put', key: 'c' + hash.toString('base64url'), value: v })
        }
        inflight.push(db.batch(ops))
        if (inflight.length >= 64) await inflight.shift()
      }
      await Promise.all(inflight)
      if (packs) await packs.sync()
      await db.batch([{ type: 'put', key: 'm', value: Buffer.from('x') }], { sync: true })
      ;(results[name] ??= []).push((performance.now() - t0) / 1000)
      await db.close()
      packs?.close()
    }
  }
} finally {
  fs.rmSync(base, { recursive: true, force: true })
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
console.log(`Storing ${MIB} MiB of random 64 KiB chunks, then one synced batch (median of ${RUNS}):\n`)
console.log('| where the chunk bytes go (memtable) | seconds | MiB/s |\n|---|---:|---:|')
for (const [name, r] of Object.entries(results)) console.log(`| ${name} | ${median(r).toFixed(2)} | ${(MIB / median(r)).toFixed(0)} |`)
