#!/usr/bin/env node
// The agent workload, side by side in one run on the same data: a plain directory (native),
// a cpfs mount, fuse-overlayfs, and the kernel overlayfs. Prints seconds per step (median of
// --runs) with ratios to native and to fuse-overlayfs, the FUSE daemons' peak RSS per step,
// and the requests cpfs answered per step. Run as root with /dev/fuse:
//   npm run bench -- [--runs 3] [--only native,cpfs,fuse-overlayfs,overlayfs] [--big-mib 256]
//                    [--phase agent,real]
// --phase agent: this workload; real: the real-project phase (bench/real-project.mjs, run
// after it with the same options); both by default.
// The source tree is this project's own node_modules (a real npm tree), tarred once. Two
// phases: a fresh project written in the mount, and an existing one on the disk below it.
// git's automatic gc is off in both (gc.auto 0): started in the background by one step, it
// would run into the next ones and measure itself there.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { ALL, ROOT, cleanup, fmt, makeBench, makeSystems, median, MOUNTED, opt, printPeaks, printRequests, ratio, readPeak, timeStep } from './lib/systems.mjs'

const RUNS = Number(opt('--runs', 3))
const BIG_MIB = Number(opt('--big-mib', 256))
const ONLY = opt('--only', ALL.join(',')).split(',')
const PHASES = opt('--phase', 'agent,real').split(',')

// A. A fresh project: everything is written in the mount (untar, git, builds...).
const FRESH = [
  ['untar', 'tar -xf TARBALL'],
  ['git init+add+commit', 'git init -q && git config gc.auto 0 && git add -A && git -c user.email=b@b -c user.name=b commit -qm tree'],
  ['git status x2', 'git status --porcelain >/dev/null && git status --porcelain >/dev/null'],
  ['grep -r', 'grep -r "function" node_modules >/dev/null || true'],
  ['find + stat', 'find . -print0 | xargs -0 stat >/dev/null'],
  ['2,000 small files, delete half', 'mkdir storm && cd storm && for i in $(seq 1 2000); do echo $i > f$i; done && rm f1* f2* f3* f4* f5* 2>/dev/null; true'],
  [`write ${BIG_MIB} MiB (fsync)`, `dd if=RANDOM of=big.bin bs=1M conv=fsync status=none`],
  [`read ${BIG_MIB} MiB (cold)`, 'sync && echo 3 > /proc/sys/vm/drop_caches && cat big.bin >/dev/null'],
  ['sed -i on 300 files', `find node_modules -type f -name '*.js' -size -64k | head -300 | xargs sed -i 's/function/FUNCTION/'`],
  ['rename dir of 1,000 files', 'mkdir thousand && for i in $(seq 1 1000); do echo $i > thousand/f$i; done && git add -A >/dev/null 2>&1; mv thousand thousand-moved'],
  ['cp -a + tar -c', 'cp -a node_modules copy && tar -cf /dev/null node_modules'],
  ['rm -rf all', 'rm -rf node_modules copy storm thousand-moved big.bin .git']
]

// B. An existing project: the tree (a git repository) and a big file are on the real disk
// before the mount (the lower layer); the agent reads, searches and edits them.
const EXISTING = [
  ['git status x2 (existing)', 'git status --porcelain >/dev/null && git status --porcelain >/dev/null'],
  ['grep -r (existing, cold)', 'sync && echo 3 > /proc/sys/vm/drop_caches && (grep -r "function" node_modules >/dev/null || true)'],
  ['grep -r (existing, warm)', 'grep -r "function" node_modules >/dev/null || true'],
  ['find + stat (existing)', 'find . -print0 | xargs -0 stat >/dev/null'],
  [`read ${BIG_MIB} MiB (existing, cold)`, 'sync && echo 3 > /proc/sys/vm/drop_caches && cat big.bin >/dev/null'],
  ['sed -i on 300 files (existing)', `find node_modules -type f -name '*.js' -size -64k | head -300 | xargs sed -i 's/function/FUNCTION/'`],
  ['git add+commit (existing)', 'git add -A && git -c user.email=b@b -c user.name=b commit -qm edit'],
  ['rm -rf node_modules (existing)', 'rm -rf node_modules']
]
const STEPS = [...FRESH, ...EXISTING].map(([step]) => step)

if (PHASES.includes('agent')) agentWorkload()
if (PHASES.includes('real')) {
  if (PHASES.includes('agent')) console.log('')
  const r = spawnSync(process.execPath, [join(ROOT, 'bench', 'real-project.mjs'), ...process.argv.slice(2)], { stdio: 'inherit' })
  if (r.status !== 0) process.exitCode = r.status ?? 1
}

function agentWorkload () {
  const { base, sh } = makeBench('cpfs-bench-')
  const tarball = join(base, 'tree.tar')
  const random = join(base, 'random.bin')
  const systems = makeSystems(sh)
  const times = {} // system -> step -> [seconds]
  const peaks = {} // system -> step -> [bytes] (FUSE daemons)
  const requests = {} // step -> { total, median µs, top ops } (cpfs, last run)
  let files
  /** Fill dir with the existing project (before any mount). */
  const populate = (dir) => sh(`tar -xf ${tarball} && git init -q && git config gc.auto 0 && git add -A && git -c user.email=b@b -c user.name=b commit -qm tree && cp ${random} big.bin`, dir)
  try {
    sh(`tar -C ${ROOT} -cf ${tarball} node_modules`)
    sh(`head -c ${BIG_MIB * 1024 * 1024} /dev/urandom > ${random}`)
    files = Number(sh(`tar -tf ${tarball} | grep -v '/$' | wc -l`).trim())
    for (let run = 0; run < RUNS; run++) {
      for (const name of ONLY) {
        const tgt = systems[name]
        if (!tgt || (tgt.available && !tgt.available())) { process.stderr.write(`skipping ${name}: not available\n`); continue }
        for (const [phase, steps] of [['fresh', FRESH], ['existing', EXISTING]]) {
          const dir = join(base, `${name}-${phase}-${run}`)
          const work = tgt.setup(dir, phase === 'existing' ? populate : null)
          const p = tgt.pid ? readPeak(tgt.pid(dir)) : null
          if (p !== null) ((peaks[name] ??= {})[`${MOUNTED} (${phase})`] ??= []).push(p)
          try {
            for (const [step, cmd] of steps) {
              let r
              try {
                r = timeStep(sh, tgt, dir, work, cmd.replace('TARBALL', tarball).replace('RANDOM', random))
              } catch (err) {
                // A peer that fails a step is reported as failing it; cpfs and native must not.
                if (name === 'cpfs' || name === 'native' || /^interrupted/.test(err.message)) throw err
                process.stderr.write(`${name} failed "${step}": ${String(err.message).split('\n').slice(0, 2).join(' ')}\n`)
                ;((times[name] ??= {})[step] ??= []).push(NaN)
                continue
              }
              ;((times[name] ??= {})[step] ??= []).push(r.s)
              if (r.peak !== null) ((peaks[name] ??= {})[step] ??= []).push(r.peak)
              if (r.req) requests[step] = r.req
            }
          } finally {
            tgt.teardown(dir)
            fs.rmSync(dir, { recursive: true, force: true })
          }
        }
        process.stderr.write(`run ${run + 1}/${RUNS}: ${name} done\n`)
      }
    }
  } finally {
    cleanup(base)
  }

  const names = ONLY.filter(n => times[n])
  console.log(`Source tree: this project's node_modules (${files} files); ${RUNS} runs, medians in seconds.\n`)
  console.log(`| step | ${names.join(' | ')} | cpfs / native | cpfs / fuse-overlayfs |`)
  console.log(`|---|${names.map(() => '---:').join('|')}|---:|---:|`)
  const total = {}
  for (const step of STEPS) {
    const row = names.map(n => { const m = median(times[n][step]); total[n] = (total[n] ?? 0) + (Number.isNaN(m) ? 0 : m ?? 0); return m })
    const get = (n) => times[n] ? median(times[n][step]) : undefined
    console.log(`| ${step} | ${row.map(x => fmt(x)).join(' | ')} | ${ratio(get('cpfs'), get('native'), 1)} | ${ratio(get('cpfs'), get('fuse-overlayfs'), 1)} |`)
  }
  console.log(`| **total** | ${names.map(n => fmt(total[n])).join(' | ')} | ${ratio(total.cpfs, total.native, 1)} | ${ratio(total.cpfs, total['fuse-overlayfs'], 1)} |`)
  printPeaks([`${MOUNTED} (fresh)`, ...FRESH.map(([s]) => s), `${MOUNTED} (existing)`, ...EXISTING.map(([s]) => s)], peaks, names)
  printRequests(STEPS, requests)
}
