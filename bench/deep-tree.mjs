#!/usr/bin/env node
// Applying a deep tree: for each depth, a tree d/d/.../d/leaf is made inside a fresh mount (by
// python, one mkdir + chdir per level), then `cpfs unmount` plans, captures, applies and
// verifies it in the daemon; the real directory is then walked to check the whole tree and
// the leaf, and an offline `cpfs rewind 1` removes it again (checked: nothing is left). Run as
// root with /dev/fuse, after `npm run build`:
//   node bench/deep-tree.mjs [--depths 2000,5000,10000] [--cli dist/cli/cpfs.cjs] [--prof DIR]
// --prof DIR: the daemon runs with --cpu-prof and writes its profile into DIR (the rewind runs
// in the CLI process, not profiled).
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    depths: { type: 'string', default: '2000,5000,10000' },
    cli: { type: 'string', default: join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli', 'cpfs.cjs') },
    prof: { type: 'string' }
  }
})
const CLI = resolve(values.cli)

const rows = []
for (const depth of values.depths.split(',').map(Number)) {
  const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-deep-'))
  const ws = join(base, 'ws')
  fs.mkdirSync(ws)
  const env = { ...process.env, CPFS_HOME: join(base, 'home') }
  if (values.prof) {
    fs.mkdirSync(values.prof, { recursive: true })
    env.CPFS_DAEMON_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${resolve(values.prof)} --cpu-prof-name=daemon-${depth}.cpuprofile`
  }
  const sh = (cmd, cwd = base) => {
    const r = spawnSync('bash', ['-c', cmd], { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
    if (r.status !== 0) throw new Error(`${cmd.slice(0, 80)}: ${r.stderr}`)
    return r.stdout
  }
  const timed = (cmd, cwd) => { const t0 = process.hrtime.bigint(); sh(cmd, cwd); return Number(process.hrtime.bigint() - t0) / 1e9 }
  try {
    sh(`node ${CLI} mount ${ws}`)
    const make = timed(`python3 -c "
import os
for i in range(${depth}):
    os.mkdir('d'); os.chdir('d')
open('leaf', 'w').write('at the bottom\\n')
"`, ws)
    const unmount = timed(`node ${CLI} unmount ${ws}`)
    const found = sh(`python3 -c "
import os
n = 0
while os.path.isdir('d'):
    os.chdir('d'); n += 1
print(n, open('leaf').read().strip())
"`, ws).trim()
    if (found !== `${depth} at the bottom`) throw new Error(`depth ${depth}: the real directory holds ${found}`)
    // Back to before the tree, offline: a plan that removes it, level by level from the bottom.
    const rewind = timed(`node ${CLI} rewind 1 ${ws}`)
    const left = fs.readdirSync(ws)
    if (left.length) throw new Error(`depth ${depth}: the rewind left ${left.join(' ')}`)
    rows.push([depth, make, unmount, rewind])
    console.error(`depth ${depth}: made in ${make.toFixed(1)} s, unmount (plan + capture + apply + verify) ${unmount.toFixed(1)} s, offline rewind ${rewind.toFixed(1)} s`)
  } finally {
    spawnSync('bash', ['-c', `grep ' ${base}' /proc/mounts | awk '{print $2}' | xargs -r -n1 umount -l; rm -rf ${base}`])
  }
}
console.log('| levels | made in the mount (s) | cpfs unmount (s) | cpfs rewind 1, offline (s) |\n|---:|---:|---:|---:|')
for (const [d, m, u, r] of rows) console.log(`| ${d.toLocaleString('en')} | ${m.toFixed(1)} | ${u.toFixed(1)} | ${r.toFixed(1)} |`)
