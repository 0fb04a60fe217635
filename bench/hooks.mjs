#!/usr/bin/env node
// What Claude Code's tool hooks cost an agent (issue 22): the time a tool call takes with
// `cpfs hook claude-code` run for PreToolUse and PostToolUse, against the same call with a hook
// that does nothing (`true`, what any hook costs to start) and with no hook at all, in a
// mounted 10,000-file tree. Three kinds of call, interleaved so that a busy moment hits every
// row alike: one that reads (changes nothing: no part sealed), one that edits a file (two parts
// sealed, a report, feedback printed), one that rewrites 100 files. Medians, ms; also the
// daemon's peak RSS. Run as root with /dev/fuse, after building dist/:
//   node bench/hooks.mjs [--runs 15] [--files 10000]
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')
const arg = (name, def) => { const i = process.argv.indexOf(name); return i > 0 ? Number(process.argv[i + 1]) : def }
const RUNS = arg('--runs', 15)
const FILES = arg('--files', 10000)

const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-hooks-'))
const env = { ...process.env, CPFS_HOME: join(base, 'home') }
const ws = join(base, 'ws')
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }

function run (cmd, args, input) {
  const r = spawnSync(cmd, args, { cwd: ws, env, encoding: 'utf8', input, maxBuffer: 1 << 24 })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`)
  return r.stdout
}

/** One tool call as Claude Code makes it: PreToolUse hook, the command, PostToolUse hook. */
function call (hook, id, command) {
  const input = (event) => JSON.stringify({ session_id: 'bench', cwd: ws, hook_event_name: event, tool_name: 'Bash', tool_input: { command }, tool_use_id: id })
  const t0 = process.hrtime.bigint()
  if (hook) run('sh', ['-c', hook], input('PreToolUse'))
  run('bash', ['-c', command])
  if (hook) run('sh', ['-c', hook], input('PostToolUse'))
  return Number(process.hrtime.bigint() - t0) / 1e6
}

const HOOKS = {
  'no hook': null,
  'a hook that does nothing (true)': 'true',
  'cpfs hook claude-code': `'${process.execPath}' '${CLI}' hook claude-code`
}
const CALLS = {
  'reads (cat, grep)': () => 'cat d0/f1.txt >/dev/null && grep -rl "file 1" d1 >/dev/null',
  'edits one file': (i) => `echo "edit ${i}" >> d2/f2001.txt`,
  'rewrites 100 files': (i) => `for f in d3/f30*.txt; do echo "pass ${i}" > "$f"; done`
}

let mounted = false
try {
  fs.mkdirSync(ws)
  for (let i = 0; i < FILES; i++) {
    const d = join(ws, `d${Math.floor(i / 1000)}`)
    if (i % 1000 === 0) fs.mkdirSync(d)
    fs.writeFileSync(join(d, `f${i}.txt`), `file ${i}\n`)
  }
  run(process.execPath, [CLI, 'mount', ws])
  mounted = true
  const pid = Number(fs.readFileSync(spawnSync('find', [join(base, 'home'), '-name', 'daemon.pid'], { encoding: 'utf8' }).stdout.trim(), 'utf8'))
  const samples = {}
  let n = 0
  for (let r = 0; r < RUNS; r++) {
    for (const [c, make] of Object.entries(CALLS)) {
      for (const [h, hook] of Object.entries(HOOKS)) {
        const key = `${c} | ${h}`
        ;(samples[key] ??= []).push(call(hook, `toolu_bench_${n++}`, make(n)))
      }
    }
  }
  const peak = Number(/^VmHWM:\s*(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024
  const steps = JSON.parse(run(process.execPath, [CLI, 'log', '--steps', '--json', ws])).length
  console.log(`tool calls on a mounted ${FILES.toLocaleString('en')}-file tree, median of ${RUNS} (ms):`)
  console.log('| call | no hook | hook `true` | `cpfs hook claude-code` | cpfs minus `true` |')
  console.log('|---|---|---|---|---|')
  for (const c of Object.keys(CALLS)) {
    const m = Object.keys(HOOKS).map(h => median(samples[`${c} | ${h}`]))
    console.log(`| ${c} | ${m[0].toFixed(0)} | ${m[1].toFixed(0)} | ${m[2].toFixed(0)} | +${(m[2] - m[1]).toFixed(0)} |`)
  }
  console.log(`steps recorded: ${steps}; daemon peak RSS ${peak.toFixed(0)} MB`)
} finally {
  if (mounted) spawnSync(process.execPath, [CLI, 'unmount', ws, '--discard'], { env, cwd: base })
  fs.rmSync(base, { recursive: true, force: true })
}
