#!/usr/bin/env node
// Checkpoint costs side by side: cpfs mount / turn / live rewind on a small and a
// 100,000-file tree, against a shadow-git checkpoint (git add -A && git commit into a
// separate git dir) of the same tree. Medians of repeated runs; run as root with /dev/fuse.
//   node bench/checkpoint.mjs [--files 100000] [--runs 5]
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')
const arg = (name, def) => { const i = process.argv.indexOf(name); return i > 0 ? Number(process.argv[i + 1]) : def }
const FILES = arg('--files', 100000)
const RUNS = arg('--runs', 5)

const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-'))
const env = { ...process.env, CPFS_HOME: join(base, 'home') }
const sh = (cmd, cwd = base) => {
  const r = spawnSync('bash', ['-c', cmd], { cwd, env, encoding: 'utf8', maxBuffer: 1 << 26 })
  if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr}`)
  return r.stdout
}
const cpfs = (...a) => sh(`node ${CLI} ${a.join(' ')}`)
const time = (fn) => { const t0 = process.hrtime.bigint(); fn(); return Number(process.hrtime.bigint() - t0) / 1e6 }
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const runs = (n, fn) => median(Array.from({ length: n }, fn))

function makeTree (dir, files) {
  fs.mkdirSync(dir, { recursive: true })
  const perDir = 1000
  for (let i = 0; i < files; i++) {
    const d = join(dir, `d${Math.floor(i / perDir)}`)
    if (i % perDir === 0) fs.mkdirSync(d)
    fs.writeFileSync(join(d, `f${i}.txt`), `file ${i}\n`.repeat(1 + (i % 20)))
  }
}

const rows = []
const growth = []
try {
  for (const [label, n] of [['50 files', 50], [`${FILES} files`, FILES]]) {
    const ws = join(base, `ws-${n}`)
    makeTree(ws, n)
    const gitDir = join(base, `shadow-${n}.git`)
    sh(`git init -q --bare ${gitDir}`)
    const shadow = `git --git-dir=${gitDir} --work-tree=${ws} -c user.email=b@b -c user.name=b`
    const gitFirst = time(() => sh(`${shadow} add -A && ${shadow} commit -qm first`))
    const gitWarm = runs(RUNS, () => { sh(`echo x >> ${ws}/d0/f0.txt`); return time(() => sh(`${shadow} add -A && ${shadow} commit -qm warm`)) })
    const mount = runs(RUNS, () => { const ms = time(() => cpfs('mount', ws)); cpfs('unmount', ws, '--discard'); return ms })
    cpfs('mount', ws)
    const turn = runs(RUNS * 2, () => { sh(`echo y >> ${ws}/d0/f1.txt`); return time(() => cpfs('turn', ws)) })
    rows.push([label, 'cpfs mount', mount], [label, 'cpfs turn', turn], [label, 'shadow-git first checkpoint', gitFirst], [label, 'shadow-git warm checkpoint', gitWarm])
    if (n >= 1000) {
      for (const changed of [1, 100, 1000]) {
        const ms = runs(3, () => {
          sh(`for i in $(seq 0 ${changed - 1}); do echo changed >> d$((i / 1000))/f$i.txt; done`, ws)
          return time(() => cpfs('undo', ws))
        })
        rows.push([label, `live rewind of ${changed} changed files`, ms])
      }
    }
    cpfs('unmount', ws, '--discard')
  }
  // Store growth: the same 100 MiB written twice, and a 4 KiB write into a 1 GiB lower file.
  const ws = join(base, 'ws-growth')
  fs.mkdirSync(ws)
  sh(`head -c 1073741824 /dev/urandom > ${ws}/gig.bin && head -c 104857600 /dev/urandom > ${base}/100m.bin`)
  cpfs('mount', ws)
  const storeBytes = () => JSON.parse(cpfs('status', ws, '--json')).storeBytes
  const s0 = storeBytes()
  sh(`cp ${base}/100m.bin ${ws}/first.bin && sync`)
  cpfs('turn', ws)
  const s1 = storeBytes()
  sh(`cp ${base}/100m.bin ${ws}/second.bin && sync`)
  cpfs('turn', ws)
  const s2 = storeBytes()
  sh(`head -c 4096 /dev/urandom | dd of=${ws}/gig.bin bs=4096 seek=100000 conv=notrunc status=none`)
  cpfs('turn', ws)
  const s3 = storeBytes()
  cpfs('unmount', ws, '--discard')
  growth.push(['100 MiB of random bytes, first write', s1 - s0], ['the same 100 MiB again (another file)', s2 - s1], ['4 KiB write into a 1 GiB lower file', s3 - s2])
} finally {
  spawnSync('bash', ['-c', `grep ' ${base}' /proc/mounts | awk '{print $2}' | xargs -r -n1 umount -l; rm -rf ${base}`])
}
console.log('| tree | step | median ms |\n|---|---|---|')
for (const [tree, step, ms] of rows) console.log(`| ${tree} | ${step} | ${ms.toFixed(1)} |`)
console.log('\n| store growth | bytes | MiB |\n|---|---:|---:|')
for (const [what, b] of growth) console.log(`| ${what} | ${b} | ${(b / 1048576).toFixed(2)} |`)
