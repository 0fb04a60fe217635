#!/usr/bin/env node
// What a history of many branches costs (issue 23): a workspace with --branches branches (each
// a rewind to turn 5, three 20 KB files, a turn), then the medians of `cpfs log` against
// `cpfs log --all`, mounted and not, a rewind to a branch's turn against one of the head's,
// and the unmount (it reads every branch's layers to keep the lower files they need). Peak
// RSS of each command (the CLI process) beside its time, and the daemon's. Run as root with /dev/fuse.
//   node bench/branches.mjs [--branches 60] [--runs 5]
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')
const arg = (name, def) => { const i = process.argv.indexOf(name); return i > 0 ? Number(process.argv[i + 1]) : def }
const BRANCHES = arg('--branches', 60)
const RUNS = arg('--runs', 5)

const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-'))
const ws = join(base, 'ws')
const env = { ...process.env, CPFS_HOME: join(base, 'home') }
/** A command's wall time (ms) and peak RSS (KiB), from GNU time. */
const run = (cmd) => {
  const r = spawnSync('/usr/bin/time', ['-f', '%e %M', 'bash', '-c', cmd], { cwd: base, env, encoding: 'utf8', maxBuffer: 1 << 26 })
  if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr}`)
  const [s, kb] = r.stderr.trim().split('\n').at(-1).split(' ').map(Number)
  return { ms: s * 1000, kb }
}
const cpfs = (...a) => run(`node ${CLI} ${a.join(' ')} >/dev/null`)
const sh = (cmd) => run(cmd)
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const measure = (what, fn, n = RUNS) => {
  const rs = Array.from({ length: n }, fn)
  rows.push([what, median(rs.map(r => r.ms)).toFixed(0), (Math.max(...rs.map(r => r.kb)) / 1024).toFixed(0)])
}
const rows = []

fs.mkdirSync(ws)
for (let i = 0; i < 200; i++) fs.writeFileSync(join(ws, `f${i}.txt`), `file ${i}\n`)
cpfs('mount', ws)
for (let i = 1; i <= 10; i++) { sh(`echo ${i} > ${ws}/t${i}.txt`); cpfs('turn', ws) }
for (let b = 1; b <= BRANCHES; b++) {
  cpfs('rewind', '5', ws)
  sh(`for j in 1 2 3; do head -c 20000 /dev/urandom > ${ws}/b${b}_$j.bin; done`)
  cpfs('turn', ws)
}
const listed = JSON.parse(spawnSync('node', [CLI, 'log', '--all', '--json', ws], { env, encoding: 'utf8' }).stdout).branches
measure('log (mounted)', () => cpfs('log', '--json', ws))
measure(`log --all (mounted, ${listed.length} branches)`, () => cpfs('log', '--all', '--json', ws))
measure('rewind 3 + redo (mounted)', () => { const a = cpfs('rewind', '3', ws); const b = cpfs('redo', ws); return { ms: a.ms + b.ms, kb: Math.max(a.kb, b.kb) } })
measure(`rewind ${listed.at(-1).branch}:3 + redo (mounted)`, () => { const a = cpfs('rewind', `${listed.at(-1).branch}:3`, ws); const b = cpfs('redo', ws); return { ms: a.ms + b.ms, kb: Math.max(a.kb, b.kb) } })
const pidFile = spawnSync('find', [env.CPFS_HOME, '-name', 'daemon.pid'], { encoding: 'utf8' }).stdout.trim()
const hwm = /VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${fs.readFileSync(pidFile, 'utf8').trim()}/status`, 'utf8'))[1]
rows.push(['the daemon, after all of the above (peak RSS)', '', (Number(hwm) / 1024).toFixed(0)])
measure('unmount (reads every branch\'s layers)', () => cpfs('unmount', ws), 1)
measure('log (not mounted)', () => cpfs('log', '--json', ws))
measure('log --all (not mounted)', () => cpfs('log', '--all', '--json', ws))
console.log(`| what (${BRANCHES} branches, medians of ${RUNS}) | ms | peak RSS MiB |\n|---|---|---|`)
for (const r of rows) console.log(`| ${r.join(' | ')} |`)
fs.rmSync(base, { recursive: true, force: true })
