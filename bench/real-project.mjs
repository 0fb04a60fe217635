#!/usr/bin/env node
// The real-project phase: what an agent does in a real project, side by side on a plain
// directory (native), a cpfs mount, fuse-overlayfs and the kernel overlayfs. Each round runs
// every system once, in an order rotated per round (drift hits all alike); medians of --runs.
//   node bench/real-project.mjs [--runs 3] [--only native,cpfs,fuse-overlayfs,overlayfs] [--big-mib 256]
// (also the second phase of `npm run bench`; `npm run bench -- --phase real` runs it alone).
// The tree, on the real disk before the mount (the lower layer), fresh for each system:
//   app/   bench/projects/webapp (express and common dev tools: 410 packages in its lock),
//          with cpfs's own src/ and tsconfig.json copied in for tsc
//   repo/  a clone of the repository this bench runs from, with its history
//   big.bin  --big-mib MiB of random bytes
// The npm cache is filled once (`npm ci`, the only step that needs the network) and shared;
// each system then runs `npm ci --offline`. Prints seconds, the ratio to native, the issue's
// target for the step and whether it is met, the FUSE daemons' peak RSS per step, and the
// requests cpfs answered per step.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { ALL, ROOT, cleanup, fmt, makeBench, makeSystems, mb, median, MOUNTED, opt, printPeaks, printRequests, ratio, readPeak, timeStep } from './lib/systems.mjs'

const RUNS = Number(opt('--runs', 3))
const BIG_MIB = Number(opt('--big-mib', 256))
const ONLY = opt('--only', ALL.join(',')).split(',')
const PROJECT = join(ROOT, 'bench', 'projects', 'webapp')
const DROP = 'sync && echo 3 > /proc/sys/vm/drop_caches'
const RSS_TARGET = 100e6 // bytes: the daemon's peak RSS target

const { base, sh } = makeBench('cpfs-real-')
const cache = join(base, 'npm-cache')
const template = join(base, 'template')
const random = join(base, 'random.bin')
const NPM_CI = `npm ci --offline --cache ${cache} --no-audit --no-fund --loglevel=error`

// Each step: [name, command (in the tree's root), untimed command before it, target].
// A target: { ratio: max time / native } or { throughput: min native time / time }.
const STEPS = [
  [`read ${BIG_MIB} MiB (lower, cold)`, 'cat big.bin >/dev/null', DROP, { throughput: 0.9 }],
  ['npm ci --offline (410 packages)', `cd app && ${NPM_CI} >/dev/null`, null, { ratio: 1.2 }],
  ['test suite (mocha: express + load all packages)', 'cd app && node node_modules/mocha/bin/mocha.js --reporter dot >/dev/null', null, { ratio: 1.05 }],
  ['tsc --noEmit (cpfs src/)', 'cd app && node node_modules/typescript/bin/tsc -p tsconfig.json --noEmit', null, { ratio: 1.05 }],
  ['grep -r (cold)', 'grep -r "function" app repo >/dev/null || true', DROP, null],
  ['grep -r (warm)', 'grep -r "function" app repo >/dev/null || true', null, { ratio: 1.2 }],
  ['git status (cold)', 'cd repo && git status --porcelain >/dev/null', DROP, null],
  ['git status (warm)', 'cd repo && git status --porcelain >/dev/null', null, { ratio: 1.2 }],
  ['git checkout across commits and back', 'cd repo && for c in $(cat ../.commits); do git checkout -q $c; done && git checkout -q $(cat ../.tip)', null, { ratio: 1.5 }],
  [`write ${BIG_MIB} MiB (dd conv=fsync)`, `dd if=${random} of=out.bin bs=1M conv=fsync status=none`, null, { throughput: 2 / 3 }]
]

/** The tree before the mount: copied from the template into the system's real directory. */
const populate = (dir) => sh(`cp -a ${template}/. ${dir}/`)

const times = {} // system -> step -> [seconds]
const peaks = {} // system -> step -> [bytes]
const requests = {} // step -> cpfs's requests (last run)
let info = {}
const started = Date.now()
try {
  prepare()
  const systems = makeSystems(sh)
  const names = ONLY.filter(n => systems[n] && (!systems[n].available || systems[n].available()))
  for (const n of ONLY) if (!names.includes(n)) process.stderr.write(`skipping ${n}: not available\n`)
  for (let run = 0; run < RUNS; run++) {
    const order = names.map((_, i) => names[(i + run) % names.length])
    for (const name of order) {
      const tgt = systems[name]
      const dir = join(base, `${name}-${run}`)
      const work = tgt.setup(dir, populate)
      const p = tgt.pid ? readPeak(tgt.pid(dir)) : null
      if (p !== null) ((peaks[name] ??= {})[MOUNTED] ??= []).push(p)
      try {
        for (const [step, cmd, pre] of STEPS) {
          let r
          try {
            r = timeStep(sh, tgt, dir, work, cmd, pre)
          } catch (err) {
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
      process.stderr.write(`round ${run + 1}/${RUNS}: ${name} done (${((Date.now() - started) / 1000).toFixed(0)} s)\n`)
    }
  }
} finally {
  cleanup(base)
}
report()

/** Fill the npm cache (network), build the template tree and the random file. */
function prepare () {
  process.stderr.write('real project: filling the npm cache, cloning the repository...\n')
  const seed = join(base, 'seed')
  fs.mkdirSync(seed)
  sh(`cp ${PROJECT}/package.json ${PROJECT}/package-lock.json ${seed}/ && npm ci --cache ${cache} --no-audit --no-fund --loglevel=error >/dev/null`, seed)
  fs.rmSync(seed, { recursive: true, force: true })
  const app = join(template, 'app')
  fs.mkdirSync(app, { recursive: true })
  sh(`cp -a ${PROJECT}/. ${app}/ && rm -rf ${app}/node_modules && cp -a ${ROOT}/src ${ROOT}/tsconfig.json ${app}/`)
  sh(`git clone -q --no-hardlinks ${ROOT} ${template}/repo && git -C ${template}/repo config gc.auto 0`)
  // Twelve commits from the oldest-but-one to the tip's parent, evenly spaced.
  const commits = sh('git rev-list --reverse HEAD', join(template, 'repo')).trim().split('\n')
  const picks = Array.from({ length: 12 }, (_, i) => commits[1 + Math.floor(i * (commits.length - 2) / 12)])
  fs.writeFileSync(join(template, '.commits'), picks.join('\n') + '\n')
  fs.writeFileSync(join(template, '.tip'), sh('git rev-parse --abbrev-ref HEAD', join(template, 'repo')))
  sh(`head -c ${BIG_MIB * 1024 * 1024} /dev/urandom > ${random} && cp ${random} ${template}/big.bin`)
  const count = (cmd) => Number(sh(cmd, template).trim())
  info = {
    packages: JSON.parse(fs.readFileSync(join(PROJECT, 'package-lock.json'), 'utf8')).packages,
    commits: commits.length,
    repoFiles: count('git -C repo ls-files | wc -l'),
    srcFiles: count('find app/src -name "*.ts" | wc -l')
  }
}

function report () {
  const names = ONLY.filter(n => times[n])
  const packages = Object.keys(info.packages ?? {}).filter(p => p.startsWith('node_modules/')).length
  console.log(`Real project: ${packages} packages (bench/projects/webapp), tsc on cpfs's src/ (${info.srcFiles} files), ` +
    `a clone of this repository (${info.commits} commits, ${info.repoFiles} files; checkout of 12 commits from the oldest to the tip, and back). ` +
    `${RUNS} rounds, systems rotated per round; medians in seconds. Took ${((Date.now() - started) / 60000).toFixed(1)} min.\n`)
  const get = (n, step) => times[n] ? median(times[n][step]) : undefined
  const cmp = (n, step, target) => target?.throughput ? ratio(get('native', step), get(n, step)) : ratio(get(n, step), get('native', step))
  const others = names.filter(n => n !== 'native')
  console.log(`| step | ${names.join(' | ')} | ${others.map(n => `${n} / native`).join(' | ')} | target (cpfs) |`)
  console.log(`|---|${names.map(() => '---:').join('|')}|${others.map(() => '---:').join('|')}|---|`)
  for (const [step, , , target] of STEPS) {
    const thr = target?.throughput ? ' (throughput)' : ''
    console.log(`| ${step}${thr} | ${names.map(n => fmt(get(n, step))).join(' | ')} | ${others.map(n => cmp(n, step, target)).join(' | ')} | ${describe(target)} |`)
  }
  console.log('\nFor reads and writes of the big file the ratio is of throughput (native time / time): higher is better.')
  printPeaks([MOUNTED, ...STEPS.map(([s]) => s)], peaks, names)
  printRequests(STEPS.map(([s]) => s), requests)

  // Summary: each of the issue's targets for cpfs, met or not.
  console.log('\nTargets (issue 21), cpfs:\n')
  console.log('| target | measured | met |')
  console.log('|---|---:|---|')
  for (const [step, , , target] of STEPS) {
    if (!target) continue
    const v = get('cpfs', step)
    const n = get('native', step)
    if (v === undefined || n === undefined || Number.isNaN(v) || Number.isNaN(n)) { console.log(`| ${step}: ${describe(target)} | — | — |`); continue }
    const x = target.throughput ? n / v : v / n
    const met = target.throughput ? x >= target.throughput : x <= target.ratio
    console.log(`| ${step}: ${describe(target)} | ${x.toFixed(2)}× | ${met ? 'met' : 'not met'} |`)
  }
  const cpfsPeaks = peaks.cpfs ? Object.values(peaks.cpfs).map(median).filter(x => x !== undefined && !Number.isNaN(x)) : []
  if (cpfsPeaks.length) {
    const top = Math.max(...cpfsPeaks)
    const fo = peaks['fuse-overlayfs'] ? Math.max(...Object.values(peaks['fuse-overlayfs']).map(median).filter(x => x !== undefined && !Number.isNaN(x))) : null
    console.log(`| daemon peak RSS, worst step: ≤ 100 MB | ${mb(top)} MB${fo ? ` (fuse-overlayfs ${mb(fo)} MB)` : ''} | ${top <= RSS_TARGET ? 'met' : 'not met'} |`)
  }
}

function describe (target) {
  if (!target) return '—'
  if (target.ratio) return `≤ ${target.ratio}× native time`
  return `≥ ${target.throughput === 2 / 3 ? '2/3' : target.throughput}× native throughput`
}
