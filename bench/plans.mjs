#!/usr/bin/env node
// Plan costs: unmount (plan + capture + apply + verify) with 1,000 changed files, and with a
// 1 GiB file written in the mount; then an offline rewind of each. Run as root with /dev/fuse:
//   node bench/plans.mjs
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli', 'cpfs.cjs')
const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-plans-'))
const env = { ...process.env, CPFS_HOME: join(base, 'home') }
const sh = (cmd, cwd = base) => {
  const r = spawnSync('bash', ['-c', cmd], { cwd, env, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr}`)
  return r.stdout
}
const timed = (cmd) => { const t0 = process.hrtime.bigint(); sh(cmd); return Number(process.hrtime.bigint() - t0) / 1e9 }
const rows = []
try {
  const a = join(base, 'thousand')
  fs.mkdirSync(a)
  sh('for i in $(seq 1 1000); do echo "original $i" > f$i; done', a)
  sh(`node ${CLI} mount ${a}`)
  sh('for i in $(seq 1 1000); do echo "changed $i" >> f$i; done', a)
  rows.push(['unmount: plan + capture + apply + verify, 1,000 changed files', timed(`node ${CLI} unmount ${a}`)])
  rows.push(['offline rewind of those 1,000 files', timed(`node ${CLI} rewind 1 ${a}`)])
  const b = join(base, 'gig')
  fs.mkdirSync(b)
  sh(`node ${CLI} mount ${b}`)
  sh(`head -c 1073741824 /dev/urandom > ${b}/big.bin`)
  rows.push(['unmount: plan + apply + verify, a 1 GiB file written in the mount', timed(`node ${CLI} unmount ${b}`)])
  rows.push(['offline rewind removing that 1 GiB file (captured first)', timed(`node ${CLI} rewind 1 ${b}`)])
  rows.push(['offline redo writing it back (1 GiB from the store, verified)', timed(`node ${CLI} redo ${b}`)])
} finally {
  spawnSync('bash', ['-c', `grep ' ${base}' /proc/mounts | awk '{print $2}' | xargs -r -n1 umount -l; rm -rf ${base}`])
}
console.log('| plan | seconds |\n|---|---:|')
for (const [what, s] of rows) console.log(`| ${what} | ${s.toFixed(2)} |`)
