#!/usr/bin/env node
// The agent workload, side by side in one run on the same data: a plain directory (native),
// a cpfs mount, fuse-overlayfs, and the kernel overlayfs. Prints seconds per step (median of
// --runs) with ratios to native and to fuse-overlayfs. Run as root with /dev/fuse:
//   npm run bench -- [--runs 3] [--only native,cpfs,fuse-overlayfs,overlayfs] [--big-mib 256]
// The source tree is this project's own node_modules (a real npm tree), tarred once. Two
// phases: a fresh project written in the mount, and an existing one on the disk below it.
// git's automatic gc is off in both (gc.auto 0): started in the background by one step, it
// would run into the next ones and measure itself there.
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')
const argv = process.argv.slice(2)
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : def }
const RUNS = Number(opt('--runs', 3))
const BIG_MIB = Number(opt('--big-mib', 256))
const ONLY = opt('--only', 'native,cpfs,fuse-overlayfs,overlayfs').split(',')

function sh (cmd, cwd = '/', allowFail = false) {
  const r = spawnSync('bash', ['-c', cmd], { cwd, encoding: 'utf8', maxBuffer: 1 << 28, env: { ...process.env, CPFS_HOME: join(base, 'cpfs-home') } })
  if (r.status !== 0 && !allowFail) throw new Error(`${cmd} (in ${cwd}): ${r.stderr}`)
  return r.stdout
}

function ensureFuseOverlayfs () {
  if (spawnSync('bash', ['-c', 'command -v fuse-overlayfs']).status === 0) return true
  process.stderr.write('installing fuse-overlayfs (Debian package) for the comparison...\n')
  const r = spawnSync('bash', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse-overlayfs'], { stdio: 'inherit' })
  return r.status === 0
}

const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-bench-'))
const tarball = join(base, 'tree.tar')
const random = join(base, 'random.bin')
sh(`tar -C ${ROOT} -cf ${tarball} node_modules`)
sh(`head -c ${BIG_MIB * 1024 * 1024} /dev/urandom > ${random}`)
const files = Number(sh(`tar -tf ${tarball} | grep -v '/$' | wc -l`).trim())

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

/** Fill dir with the existing project (before any mount). */
function populate (dir) {
  sh(`tar -xf ${tarball} && git init -q && git config gc.auto 0 && git add -A && git -c user.email=b@b -c user.name=b commit -qm tree && cp ${random} big.bin`, dir)
}

const targets = {
  native: {
    setup (dir, existing) { fs.mkdirSync(dir); if (existing) populate(dir); return dir },
    teardown () {}
  },
  cpfs: {
    setup (dir, existing) { fs.mkdirSync(dir); if (existing) populate(dir); sh(`node ${CLI} mount ${dir}`); return dir },
    teardown (dir) { sh(`node ${CLI} unmount ${dir} --discard`, '/', true) },
    stats: true
  },
  'fuse-overlayfs': {
    available: ensureFuseOverlayfs,
    setup (dir, existing) {
      for (const d of ['lower', 'upper', 'work', 'merged']) fs.mkdirSync(join(dir, d), { recursive: true })
      if (existing) populate(join(dir, 'lower'))
      sh(`fuse-overlayfs -o lowerdir=${dir}/lower,upperdir=${dir}/upper,workdir=${dir}/work ${dir}/merged`)
      return join(dir, 'merged')
    },
    teardown (dir) { sh(`umount ${dir}/merged`, '/', true) }
  },
  overlayfs: {
    setup (dir, existing) {
      for (const d of ['lower', 'upper', 'work', 'merged']) fs.mkdirSync(join(dir, d), { recursive: true })
      if (existing) populate(join(dir, 'lower'))
      sh(`mount -t overlay overlay -o lowerdir=${dir}/lower,upperdir=${dir}/upper,workdir=${dir}/work ${dir}/merged`)
      return join(dir, 'merged')
    },
    teardown (dir) { sh(`umount ${dir}/merged`, '/', true) }
  }
}

const times = {} // target -> step -> [seconds]
const requests = {} // step -> { total, median µs, top ops } (cpfs, last run)
const peaks = {} // step -> { peak, rss (MiB), m: the daemon's memory after the step } (cpfs, last run)
const STEPS = [...FRESH, ...EXISTING]

function cpfsStats (dir, reset) {
  if (reset) return sh(`node ${CLI} status ${dir} --reset-stats`, '/', true)
  try {
    return JSON.parse(sh(`node ${CLI} status ${dir} --stats --json`, '/', true)).ops
  } catch { return null }
}

/** The daemon's pid (cpfs status), for its peak resident size per step. */
function cpfsPid (dir) {
  try { return JSON.parse(sh(`node ${CLI} status ${dir} --json`, '/', true)).pid } catch { return null }
}

/** CPU seconds pid has used (user + system, its GC threads included): less noisy than wall time on a shared machine. */
function cpuOf (pid) {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(f[11]) + Number(f[12])) / 100
  } catch { return NaN }
}

/** Reset the high-water mark of pid's resident size (VmHWM): the next read is the peak since. */
function resetPeak (pid) {
  try { fs.writeFileSync(`/proc/${pid}/clear_refs`, '5') } catch {}
}

/**
 * VmHWM and VmRSS of pid in MiB (RssFile: mapped file pages, mostly LevelDB's tables, which it
 * mmaps to read; page cache the kernel may take back, but counted in the resident size), and the daemon's own breakdown (status --json: memory). */
function peakOf (pid, dir) {
  try {
    const st = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
    const kib = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(st)[1])
    let m = null
    try { m = JSON.parse(sh(`node ${CLI} status ${dir} --json`, '/', true)).memory } catch {}
    return { peak: kib('VmHWM') / 1024, rss: kib('VmRSS') / 1024, anon: kib('RssAnon') / 1024, file: kib('RssFile') / 1024, m }
  } catch { return null }
}

function medianMicros (hist) {
  const total = hist.reduce((a, b) => a + b, 0)
  let seen = 0
  for (let i = 0; i < hist.length; i++) { seen += hist[i]; if (seen * 2 >= total) return 2 ** i }
  return 0
}

try {
  for (let run = 0; run < RUNS; run++) {
    for (const name of ONLY) {
      const tgt = targets[name]
      if (!tgt || (tgt.available && !tgt.available())) { process.stderr.write(`skipping ${name}: not available\n`); continue }
      for (const [phase, steps] of [['fresh', FRESH], ['existing', EXISTING]]) {
        const dir = join(base, `${name}-${phase}-${run}`)
        const work = tgt.setup(dir, phase === 'existing')
        try {
          const pid = tgt.stats ? cpfsPid(work) : null
          for (const [step, cmd] of steps) {
            if (tgt.stats) cpfsStats(work, true)
            if (pid) resetPeak(pid)
            const cpu0 = pid ? cpuOf(pid) : 0
            const t0 = process.hrtime.bigint()
            try {
              sh(cmd.replace('TARBALL', tarball).replace('RANDOM', random), work)
            } catch (err) {
              // A peer that fails a step is reported as failing it; cpfs and native must not.
              if (name === 'cpfs' || name === 'native') throw err
              process.stderr.write(`${name} failed "${step}": ${String(err.message).split('\n').slice(0, 2).join(' ')}\n`)
              ;((times[name] ??= {})[step] ??= []).push(NaN)
              continue
            }
            const s = Number(process.hrtime.bigint() - t0) / 1e9
            ;((times[name] ??= {})[step] ??= []).push(s)
            if (pid) peaks[step] = { ...peakOf(pid, work), cpu: cpuOf(pid) - cpu0 }
            if (tgt.stats) {
              const ops = cpfsStats(work, false)
              if (ops) {
                const total = Object.values(ops.counts).reduce((a, b) => a + b, 0)
                const top = Object.entries(ops.counts).sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => `${k} ${v}`).join(', ')
                requests[step] = { total, median: ops.hist ? medianMicros(ops.hist) : null, top }
              }
            }
          }
        } finally {
          tgt.teardown(dir)
          spawnSync('rm', ['-rf', dir])
        }
      }
      process.stderr.write(`run ${run + 1}/${RUNS}: ${name} done\n`)
    }
  }
} finally {
  spawnSync('bash', ['-c', `grep ' ${base}' /proc/mounts | awk '{print $2}' | xargs -r -n1 umount -l; rm -rf ${base}`])
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const names = ONLY.filter(n => times[n])
const fmt = (x) => x === undefined ? '—' : Number.isNaN(x) ? 'fails' : x.toFixed(2)
const ratio = (a, b) => (a === undefined || b === undefined || b === 0 || Number.isNaN(a) || Number.isNaN(b)) ? '—' : (a / b).toFixed(1) + '×'
console.log(`Source tree: this project's node_modules (${files} files); ${RUNS} runs, medians in seconds.\n`)
console.log(`| step | ${names.join(' | ')} | cpfs / native | cpfs / fuse-overlayfs |`)
console.log(`|---|${names.map(() => '---:').join('|')}|---:|---:|`)
const total = {}
for (const [step] of STEPS) {
  const row = names.map(n => { const m = median(times[n][step]); total[n] = (total[n] ?? 0) + (Number.isNaN(m) ? 0 : m); return m })
  const get = (n) => times[n] ? median(times[n][step]) : undefined
  console.log(`| ${step} | ${row.map(fmt).join(' | ')} | ${ratio(get('cpfs'), get('native'))} | ${ratio(get('cpfs'), get('fuse-overlayfs'))} |`)
}
console.log(`| **total** | ${names.map(n => fmt(total[n])).join(' | ')} | ${ratio(total.cpfs, total.native)} | ${ratio(total.cpfs, total['fuse-overlayfs'])} |`)
if (Object.keys(requests).length) {
  console.log('\nRequests cpfs answered per step (cpfs status --stats; last run):\n')
  console.log('| step | requests | median handler time | most frequent |')
  console.log('|---|---:|---:|---|')
  for (const [step] of STEPS) {
    const r = requests[step]
    if (r) console.log(`| ${step} | ${r.total} | ${r.median === null ? '—' : `≤ ${r.median} µs`} | ${r.top} |`)
  }
}

if (Object.keys(peaks).length) {
  const mib = (b) => b === undefined ? '—' : (b / 1024 / 1024).toFixed(0)
  console.log('\nThe cpfs daemon\'s memory per step (MiB; peak: VmHWM during the step, the rest after it; last run):\n')
  console.log('| step | peak RSS | RSS after | anon | file | heap used | heap total | external | arrayBuffers | chunk cache | daemon CPU s |')
  console.log('|---|---|---|---|---|---|---|---|---|---|---|')
  for (const [step] of STEPS) {
    const p = peaks[step]
    if (!p || p.peak === undefined) continue
    const u = p.m?.usage ?? {}
    const h = p.m?.held ?? {}
    console.log(`| ${step} | ${p.peak.toFixed(0)} | ${p.rss.toFixed(0)} | ${p.anon.toFixed(0)} | ${p.file.toFixed(0)} | ${mib(u.heapUsed)} | ${mib(u.heapTotal)} | ${mib(u.external)} | ${mib(u.arrayBuffers)} | ${mib(h.chunkCache)} | ${p.cpu.toFixed(1)} |`)
  }
}
