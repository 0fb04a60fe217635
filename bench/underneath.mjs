#!/usr/bin/env node
// What the watch of writes made underneath the mount costs (daemon/underneath.ts, fanotify):
// the same steps with the watch on and off (CPFS_UNDERNEATH=off), side by side in one run.
// Every real file the daemon opens raises a permission event that its own thread answers, so
// the steps are those that open real files: the first read of each file present before the
// mount, and the unmount that applies new files; plus how long marking the tree takes, and
// what a process underneath pays per open while the daemon keeps each file's content first.
// Run as root with /dev/fuse, after `npm run build`:
//   node bench/underneath.mjs [--files 5000] [--dirs 250] [--runs 3] [--cli dist/cli/cpfs.cjs]
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    files: { type: 'string', default: '5000' },
    dirs: { type: 'string', default: '250' },
    runs: { type: 'string', default: '3' },
    cli: { type: 'string', default: join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli', 'cpfs.cjs') }
  }
})
const CLI = resolve(values.cli)
const FILES = Number(values.files)
const DIRS = Number(values.dirs)

function sh (cmd, cwd, env) {
  const r = spawnSync('bash', ['-c', cmd], { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (r.status !== 0) throw new Error(`${cmd.slice(0, 80)}: ${r.stderr}`)
  return r.stdout
}
function timed (cmd, cwd, env) {
  const t0 = process.hrtime.bigint()
  sh(cmd, cwd, env)
  return Number(process.hrtime.bigint() - t0) / 1e9
}
function rssOf (pid) {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024
  } catch {
    return 0
  }
}

/** One run: a fresh tree, mounted with the watch on or off. */
function run (watch) {
  const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-under-'))
  const ws = join(base, 'ws')
  const env = { ...process.env, CPFS_HOME: join(base, 'home'), ...(watch ? {} : { CPFS_UNDERNEATH: 'off' }) }
  sh(`python3 -c "
import os
for d in range(${DIRS}):
    os.makedirs('ws/d%d' % d)
for i in range(${FILES}):
    open('ws/d%d/f%d' % (i % ${DIRS}, i), 'w').write('x' * 100)
"`, base, env)
  // A process underneath: its cwd is the directory from before the mount.
  const out = {}
  try {
    const t0 = process.hrtime.bigint()
    sh(`node ${CLI} mount ${ws}`, base, env)
    out.mount = Number(process.hrtime.bigint() - t0) / 1e9
    const status = () => JSON.parse(sh(`node ${CLI} status ${ws} --json`, base, env))
    const pid = status().pid
    if (watch) {
      // Until every directory is marked.
      const m0 = process.hrtime.bigint()
      while (!status().underneath?.marked) spawnSync('sleep', ['0.02'])
      out.marked = Number(process.hrtime.bigint() - m0) / 1e9 + out.mount
    }
    out.readAll = timed('find . -type f -exec cat {} + > /dev/null', ws, env)
    out.readAgain = timed('find . -type f -exec cat {} + > /dev/null', ws, env)
    sh(`python3 -c "
import os
for i in range(${FILES}):
    open('d%d/new%d' % (i % ${DIRS}, i), 'w').write('y' * 100)
"`, ws, env)
    out.rss = rssOf(pid)
    out.unmount = timed(`node ${CLI} unmount ${ws}`, base, env)
    // Underneath: reads and writes by a process whose cwd is the real directory, while mounted.
    const holder = `cd ${ws} && python3 -c "
import time
open('${base}/go').read()
t0 = time.time()
for i in range(${FILES}):
    open('d%d/f%d' % (i % ${DIRS}, i), 'a').write('z')
open('${base}/under.out', 'w').write(str(time.time() - t0))
"`
    const waitMarked = watch ? `until node ${CLI} status ${ws} --json | grep -q '"marked": *true'; do sleep 0.05; done` : 'true'
    const child = spawnSync('bash', ['-c', `mkfifo ${base}/go; ( ${holder} ) & sleep 0.3; node ${CLI} mount ${ws} 2>/dev/null; ${waitMarked}; echo go > ${base}/go; wait`], { cwd: base, env, encoding: 'utf8' })
    if (child.status !== 0) throw new Error(child.stderr)
    out.underneath = Number(fs.readFileSync(join(base, 'under.out'), 'utf8'))
    sh(`node ${CLI} unmount ${ws} --force || node ${CLI} unmount ${ws} --discard`, base, env)
  } finally {
    spawnSync('umount', ['-l', ws])
    fs.rmSync(base, { recursive: true, force: true })
  }
  return out
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const results = { off: [], on: [] }
for (let i = 0; i < Number(values.runs); i++) {
  results.off.push(run(false))
  results.on.push(run(true))
}
const keys = ['mount', 'marked', 'readAll', 'readAgain', 'unmount', 'underneath', 'rss']
console.log(`${FILES} files in ${DIRS} directories, median of ${values.runs} runs (seconds; rss: daemon peak MiB)`)
console.log('step'.padEnd(12) + 'watch off'.padStart(12) + 'watch on'.padStart(12) + 'ratio'.padStart(8))
for (const k of keys) {
  const off = results.off.map(r => r[k]).filter(x => x !== undefined && !Number.isNaN(x))
  const on = results.on.map(r => r[k]).filter(x => x !== undefined && !Number.isNaN(x))
  const f = (xs) => xs.length ? (k === 'rss' ? (median(xs) / 1048576).toFixed(0) : median(xs).toFixed(3)) : '-'
  const ratio = off.length && on.length ? (median(on) / median(off)).toFixed(2) : ''
  console.log(k.padEnd(12) + f(off).padStart(12) + f(on).padStart(12) + ratio.padStart(8))
}
