// What bench/run.mjs and bench/real-project.mjs share: the systems compared (a plain
// directory, a cpfs mount, fuse-overlayfs, the kernel overlayfs), shell steps, the daemons'
// peak RSS per step, cpfs's request counts, cleanup, and table helpers. Run as root.
import { spawn, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')
/** The peak-RSS row of mounting (from the daemon's start to the first step). */
export const MOUNTED = 'mount'
export const ALL = ['native', 'cpfs', 'fuse-overlayfs', 'overlayfs']

const argv = process.argv.slice(2)
export const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : def }

/** A temporary directory for one bench run, its cpfs home inside it, and a `sh` bound to it. */
export function makeBench (prefix) {
  const base = fs.mkdtempSync(join(tmpdir(), prefix))
  // Commands see no npm_* variables of an `npm run bench` around them (npm would read them as
  // its own configuration).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')))
  env.CPFS_HOME = join(base, 'cpfs-home')
  function sh (cmd, cwd = '/', allowFail = false) {
    const r = spawnSync('bash', ['-c', cmd], { cwd, encoding: 'utf8', maxBuffer: 1 << 28, env })
    if (r.signal === 'SIGINT' || r.signal === 'SIGTERM') throw new Error(`interrupted (${cmd})`)
    if (r.status !== 0 && !allowFail) throw new Error(`${cmd} (in ${cwd}): ${r.stderr.slice(-2000)}`)
    return r.stdout
  }
  watchdog(base, env)
  return { base, sh }
}

/**
 * A detached process that waits for this one to end and then, if `base` is still there (the
 * bench was interrupted: Ctrl-C, kill, a crash), unmounts what is mounted under it — cpfs
 * mounts with `cpfs unmount --discard`, then the rest lazily —, stops cpfs daemons of
 * workspaces under it, and removes it. A bench that ends normally has removed `base` itself.
 */
function watchdog (base, env) {
  const code = `
    const { execSync } = require('node:child_process'); const fs = require('node:fs')
    const [parent, base, cli] = process.argv.slice(1)
    const up = () => { try { process.kill(Number(parent), 0); return true } catch { return false } }
    const run = (c) => { try { execSync(c, { stdio: 'ignore', timeout: 60000 }) } catch {} }
    const mounts = () => fs.readFileSync('/proc/mounts', 'utf8').split('\\n').map(l => l.split(' ')).filter(f => f[1] && f[1].startsWith(base + '/'))
    setInterval(() => {
      if (up()) return
      if (fs.existsSync(base)) {
        for (const f of mounts()) if (f[2] === 'fuse.cpfs') run(process.execPath + ' ' + cli + ' unmount ' + f[1] + ' --discard')
        for (const f of mounts().reverse()) run('umount -l ' + f[1])
        for (const p of fs.readdirSync('/proc').filter(p => /^[0-9]+$/.test(p))) {
          try { const c = fs.readFileSync('/proc/' + p + '/cmdline', 'utf8'); if (c.includes('daemon/main.js') && c.includes(base + '/')) process.kill(Number(p), 'SIGKILL') } catch {}
        }
        fs.rmSync(base, { recursive: true, force: true })
      }
      process.exit(0)
    }, 1000)`
  spawn(process.execPath, ['-e', code, String(process.pid), base, CLI], { detached: true, stdio: 'ignore', env }).unref()
}

export function ensureFuseOverlayfs () {
  if (spawnSync('bash', ['-c', 'command -v fuse-overlayfs']).status === 0) return true
  process.stderr.write('installing fuse-overlayfs (Debian package) for the comparison...\n')
  const r = spawnSync('bash', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse-overlayfs'], { stdio: 'inherit' })
  return r.status === 0
}

/** The pid of the fuse-overlayfs process serving `merged` (it daemonizes). */
function fuseOverlayfsPid (merged) {
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue
    try {
      const args = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')
      if (args[0].endsWith('fuse-overlayfs') && args.includes(merged)) return Number(p)
    } catch {}
  }
  return null
}

function alive (pid, what) {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(what) } catch { return false }
}

/**
 * The systems, each: setup(dir, populate) → the directory to work in (populate(dir) fills the
 * real disk before the mount, the lower layer), teardown(dir), and for the FUSE daemons pid(dir).
 */
export function makeSystems (sh) {
  const daemons = new Map() // dir -> pid, to stop a daemon its unmount left running
  const overlay = (dir, populate) => {
    for (const d of ['lower', 'upper', 'work', 'merged']) fs.mkdirSync(join(dir, d), { recursive: true })
    if (populate) populate(join(dir, 'lower'))
    return `lowerdir=${dir}/lower,upperdir=${dir}/upper,workdir=${dir}/work ${dir}/merged`
  }
  /** A cpfs mount whose daemon starts with `env` ("NAME=value " prefixes) in its environment. */
  const cpfsSystem = (env) => ({
    setup (dir, populate) {
      fs.mkdirSync(dir)
      if (populate) populate(dir)
      sh(`${env}node ${CLI} mount ${dir}`)
      daemons.set(dir, this.pid(dir))
      return dir
    },
    pid (dir) {
      if (daemons.has(dir)) return daemons.get(dir)
      try { return JSON.parse(sh(`node ${CLI} status ${dir} --json`)).pid ?? null } catch { return null }
    },
    teardown (dir) {
      sh(`node ${CLI} unmount ${dir} --discard`, '/', true)
      const pid = daemons.get(dir)
      daemons.delete(dir)
      if (pid && alive(pid, 'daemon/main.js')) { sh(`umount -l ${dir}`, '/', true); try { process.kill(pid, 'SIGKILL') } catch {} }
    },
    stats: true
  })
  return {
    native: {
      setup (dir, populate) { fs.mkdirSync(dir); if (populate) populate(dir); return dir },
      teardown () {}
    },
    cpfs: cpfsSystem(''),
    // The same, recording no process: what attribution costs (--only cpfs,cpfs-unattributed).
    'cpfs-unattributed': cpfsSystem('CPFS_ATTRIBUTION=0 '),
    'fuse-overlayfs': {
      available: ensureFuseOverlayfs,
      setup (dir, populate) {
        sh(`fuse-overlayfs -o ${overlay(dir, populate)}`)
        daemons.set(dir, fuseOverlayfsPid(join(dir, 'merged')))
        return join(dir, 'merged')
      },
      pid (dir) { return daemons.get(dir) ?? null },
      teardown (dir) {
        sh(`umount ${dir}/merged`, '/', true)
        const pid = daemons.get(dir)
        daemons.delete(dir)
        if (pid && alive(pid, 'fuse-overlayfs')) { sh(`umount -l ${dir}/merged`, '/', true); try { process.kill(pid, 'SIGKILL') } catch {} }
      }
    },
    overlayfs: {
      setup (dir, populate) { sh(`mount -t overlay overlay -o ${overlay(dir, populate)}`); return join(dir, 'merged') },
      teardown (dir) { sh(`umount ${dir}/merged`, '/', true) }
    }
  }
}

/** Unmount whatever is still mounted under base (lazily), then remove it. */
export function cleanup (base) {
  spawnSync('bash', ['-c', `grep ' ${base}' /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l; rm -rf ${base}`])
}

/** Reset a process's peak RSS (VmHWM) to its current RSS. */
export function resetPeak (pid) {
  if (!pid) return
  try { fs.writeFileSync(`/proc/${pid}/clear_refs`, '5') } catch {}
}

/** A process's peak RSS since the last reset, in bytes (null when it is gone). */
export function readPeak (pid) {
  if (!pid) return null
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : null
  } catch { return null }
}

/** cpfs's request counters: reset, or read as { total, median, top }. */
export function cpfsStats (sh, dir, reset) {
  if (reset) { sh(`node ${CLI} status ${dir} --reset-stats`, '/', true); return null }
  try {
    const ops = JSON.parse(sh(`node ${CLI} status ${dir} --stats --json`, '/', true)).ops
    const total = Object.values(ops.counts).reduce((a, b) => a + b, 0)
    const top = Object.entries(ops.counts).sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => `${k} ${v}`).join(', ')
    return { total, median: ops.hist ? medianMicros(ops.hist) : null, top }
  } catch { return null }
}

function medianMicros (hist) {
  const total = hist.reduce((a, b) => a + b, 0)
  let seen = 0
  for (let i = 0; i < hist.length; i++) { seen += hist[i]; if (seen * 2 >= total) return 2 ** i }
  return 0
}

/**
 * Run one step's command in `work` (the mount of system `tgt`, set up in `dir`), timed; `pre`
 * runs first, untimed (dropping caches). Returns { s, peak (bytes, FUSE daemons), req (cpfs) }.
 */
export function timeStep (sh, tgt, dir, work, cmd, pre) {
  if (pre) sh(pre, work)
  const pid = tgt.pid ? tgt.pid(dir) : null
  if (tgt.stats) cpfsStats(sh, work, true)
  resetPeak(pid)
  const t0 = process.hrtime.bigint()
  sh(cmd, work)
  const s = Number(process.hrtime.bigint() - t0) / 1e9
  const peak = readPeak(pid)
  const req = tgt.stats ? cpfsStats(sh, work, false) : null
  return { s, peak, req }
}

/** Median of the numbers (NaN, a failed run, counts as missing); undefined when none. */
export const median = (xs) => {
  if (!xs || xs.length === 0) return undefined
  const s = xs.filter(x => x !== null && !Number.isNaN(x)).sort((a, b) => a - b)
  return s.length ? s[Math.floor(s.length / 2)] : NaN
}
export const fmt = (x, digits = 2) => x === undefined || x === null ? '—' : Number.isNaN(x) ? 'fails' : x.toFixed(digits)
export const ratio = (a, b, digits = 2) => (a === undefined || b === undefined || a === null || b === null || b === 0 || Number.isNaN(a) || Number.isNaN(b)) ? '—' : (a / b).toFixed(digits) + '×'
export const mb = (bytes) => bytes === undefined || bytes === null || Number.isNaN(bytes) ? '—' : (bytes / 1e6).toFixed(0)

/** Print the peak-RSS table: step → MB per FUSE daemon (median of the runs). */
export function printPeaks (steps, peaks, names) {
  const daemons = names.filter(n => peaks[n])
  if (!daemons.length) return
  console.log('\nPeak RSS of the FUSE daemon per step (VmHWM, reset before each step; MB = 10⁶ bytes, median of the runs):\n')
  console.log(`| step | ${daemons.join(' | ')} |`)
  console.log(`|---|${daemons.map(() => '---:').join('|')}|`)
  for (const step of steps) console.log(`| ${step} | ${daemons.map(n => mb(median(peaks[n][step]))).join(' | ')} |`)
}

/** Print the request table of cpfs (last run). */
export function printRequests (steps, requests) {
  if (!Object.keys(requests).length) return
  console.log('\nRequests cpfs answered per step (cpfs status --stats; last run):\n')
  console.log('| step | requests | median handler time | most frequent |')
  console.log('|---|---:|---:|---|')
  for (const step of steps) {
    const r = requests[step]
    if (r) console.log(`| ${step} | ${r.total} | ${r.median === null ? '—' : `≤ ${r.median} µs`} | ${r.top} |`)
  }
}
