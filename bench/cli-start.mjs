#!/usr/bin/env node
// How long the commands an agent host runs on every message take, against what node itself
// needs to start: `node -e 0`, `cpfs --help`, `cpfs turn` and `cpfs status` on a mounted
// 100,000-file tree (after a one-file change), and a warm shadow-git checkpoint
// (`git add -A && git commit` into a separate git dir) of the same tree on the disk. Medians, in one run,
// with ratios to `node -e 0` and the two targets (issue 14): turn ≤ 1.3 × node -e 0, and
// ≥ 5 × faster than the shadow-git checkpoint. Run as root with /dev/fuse, after building dist/:
//   node bench/cli-start.mjs [--files 100000] [--runs 15]
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')
const arg = (name, def) => { const i = process.argv.indexOf(name); return i > 0 ? Number(process.argv[i + 1]) : def }
const FILES = arg('--files', 100000)
const RUNS = arg('--runs', 15)

const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-start-'))
const env = { ...process.env, CPFS_HOME: join(base, 'home') }
const run = (cmd, args, cwd = base) => {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 1 << 26 })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`)
  return r.stdout
}
const time = (fn) => { const t0 = process.hrtime.bigint(); fn(); return Number(process.hrtime.bigint() - t0) / 1e6 }
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }

function makeTree (dir, files) {
  fs.mkdirSync(dir, { recursive: true })
  for (let i = 0; i < files; i++) {
    const d = join(dir, `d${Math.floor(i / 1000)}`)
    if (i % 1000 === 0) fs.mkdirSync(d)
    fs.writeFileSync(join(d, `f${i}.txt`), `file ${i}\n`.repeat(1 + (i % 20)))
  }
}

const ws = join(base, 'ws')
let mounted = false
try {
  makeTree(ws, FILES)
  // The peer works on the disk, as an agent without cpfs would: the same tree, not mounted
  // (git through the mount is another measurement: a warm cpfs mount caches every attribute).
  const plain = join(base, 'plain')
  makeTree(plain, FILES)
  const gitDir = join(base, 'shadow.git')
  run('git', ['init', '-q', '--bare', gitDir])
  const shadow = `git --git-dir=${gitDir} --work-tree=${plain} -c user.email=b@b -c user.name=b`
  run('bash', ['-c', `${shadow} add -A && ${shadow} commit -qm first`])
  // Nothing left to write back: 200,000 new files' dirty pages would otherwise be flushed by
  // the ext4 journal commit of the first synced batches (cpfs turn's), not by git's.
  run('sync', [])
  run(process.execPath, [CLI, 'mount', ws])
  mounted = true
  const samples = { 'node -e 0': [], 'cpfs --help': [], 'cpfs turn (mounted)': [], 'cpfs status (mounted)': [], 'shadow-git warm checkpoint': [] }
  // Interleaved, so that a busy moment of the machine hits every row alike.
  for (let i = 0; i < RUNS; i++) {
    samples['node -e 0'].push(time(() => run(process.execPath, ['-e', '0'])))
    samples['cpfs --help'].push(time(() => run(process.execPath, [CLI, '--help'])))
    fs.appendFileSync(join(ws, 'd0', 'f1.txt'), 'y\n')
    samples['cpfs turn (mounted)'].push(time(() => run(process.execPath, [CLI, 'turn', ws])))
    samples['cpfs status (mounted)'].push(time(() => run(process.execPath, [CLI, 'status', ws])))
    fs.appendFileSync(join(plain, 'd0', 'f0.txt'), 'x\n')
    samples['shadow-git warm checkpoint'].push(time(() => run('bash', ['-c', `${shadow} add -A && ${shadow} commit -qm warm`])))
  }
  const node = median(samples['node -e 0'])
  console.log(`CLI start on a ${FILES}-file tree, median of ${RUNS} (node ${process.version}):\n`)
  console.log('| command | ms | × node -e 0 |\n|---|---:|---:|')
  for (const [name, xs] of Object.entries(samples)) console.log(`| ${name} | ${median(xs).toFixed(1)} | ${(median(xs) / node).toFixed(2)} |`)
  const turn = median(samples['cpfs turn (mounted)'])
  console.log(`\ntarget: cpfs turn ≤ 1.3 × node -e 0 — ${turn / node <= 1.3 ? 'met' : `missed by ${((turn / node - 1.3) * node).toFixed(1)} ms`} (${(turn / node).toFixed(2)}×)`)
  const git = median(samples['shadow-git warm checkpoint'])
  console.log(`target: cpfs turn ≥ 5 × faster than a warm shadow-git checkpoint — ${git / turn >= 5 ? 'met' : 'missed'} (${(git / turn).toFixed(1)}×)`)
} finally {
  if (mounted) spawnSync(process.execPath, [CLI, 'unmount', ws, '--discard'], { env })
  spawnSync('rm', ['-rf', base])
}
