#!/usr/bin/env node
// What the commands on the tree cost (issue 23): `cpfs view`, `cpfs bisect`, `cpfs revert` and
// a sandboxed run + `cpfs merge`, side by side with what git does for the same job on the same
// history as commits (`git worktree add`/`remove`, `git bisect run`, `git revert`, a worktree +
// commit + `git merge --no-ff`). Per tree size: --files files of ~3 KB of text in nested
// directories, a git repo initialised and committed; then --turns turns (3 files each; the turn
// 2/3 of the way also adds broken.flag, which makes `sh check.sh` fail), made as cpfs turns in a
// mounted copy and as commits in the git repo. Medians of --runs; peak RSS of the commands
// (GNU time %M: the largest process of the step) and of the workspace's daemon (VmHWM, reset
// before each step). Runs alternate which side goes first. Run as root with /dev/fuse.
//   node bench/tree-ops.mjs [--files 2000,20000] [--turns 32] [--runs 3] [--json]
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { cpus, loadavg, release } from 'node:os'
import { join } from 'node:path'
import { CLI, cleanup, makeBench, median, opt, readPeak, resetPeak } from './lib/systems.mjs'

const SIZES = String(opt('--files', '2000,20000')).split(',').map(Number)
const TURNS = Number(opt('--turns', 32))
const RUNS = Number(opt('--runs', 3))
const JSON_OUT = process.argv.includes('--json')
if (TURNS < 6) throw new Error('--turns must be at least 6')

const { base } = makeBench('cpfs-tree-ops-')
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')))
Object.assign(env, {
  CPFS_HOME: join(base, 'cpfs-home'),
  GIT_AUTHOR_NAME: 'bench', GIT_AUTHOR_EMAIL: 'bench@example.com',
  GIT_COMMITTER_NAME: 'bench', GIT_COMMITTER_EMAIL: 'bench@example.com',
  GIT_CONFIG_NOSYSTEM: '1', HOME: base
})
const cpfs = `node ${CLI}`

/** Run a shell command untimed; its stdout (throws on failure unless allowFail). */
function sh (cmd, cwd = base, allowFail = false) {
  const r = spawnSync('bash', ['-c', cmd], { cwd, env, encoding: 'utf8', maxBuffer: 1 << 28 })
  if (r.signal === 'SIGINT' || r.signal === 'SIGTERM') throw new Error(`interrupted (${cmd})`)
  if (r.status !== 0 && !allowFail) throw new Error(`${cmd} (in ${cwd}): ${(r.stderr + r.stdout).slice(-2000)}`)
  return r.stdout
}

/**
 * Run a step timed: wall ms (hrtime around the whole `bash -c`), peak RSS in bytes of its
 * largest process (GNU time %M), the daemon's peak RSS over the step, and its output.
 */
function timed (cmd, cwd, daemonPid) {
  resetPeak(daemonPid)
  const t0 = process.hrtime.bigint()
  const r = spawnSync('/usr/bin/time', ['-f', '%M', 'bash', '-c', cmd], { cwd, env, encoding: 'utf8', maxBuffer: 1 << 28 })
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  if (r.status !== 0) throw new Error(`${cmd} (in ${cwd}): ${r.stderr.slice(-2000)}`)
  const lines = r.stderr.trim().split('\n')
  const kb = Number(lines.at(-1))
  return { ms, rss: kb * 1024, daemon: readPeak(daemonPid), out: r.stdout + lines.slice(0, -1).join('\n') }
}

function machine () {
  const node = []
  for (let i = 0; i < 3; i++) { const t0 = process.hrtime.bigint(); spawnSync(process.execPath, ['-e', '0']); node.push(Number(process.hrtime.bigint() - t0) / 1e6) }
  return { at: new Date().toISOString(), load: loadavg().map(x => x.toFixed(2)).join(' '), cores: cpus().length, kernel: release(), node: process.version, nodeStartMs: Math.round(median(node)) }
}
const showMachine = (m, when) => `${when}: ${m.at}; load average ${m.load}; ${m.cores} cores; kernel ${m.kernel}; Node ${m.node}; \`node -e 0\` ${m.nodeStartMs} ms`

const pathOf = (i) => `d${i % 20}/s${Math.floor(i / 20) % 10}/f${i}.txt`
function fileText (i) {
  let s = `// file ${i}\n`
  for (let l = 0; s.length < 3000; l++) s += `export const value_${i}_${l} = ${(i * 7919 + l * 104729) % 1000003} // some text to make the line longer\n`
  return s
}

/** Apply turn k (1-based) to dir: three files of its own get a line; the bad turn adds broken.flag. */
function applyTurn (dir, k, bad) {
  for (let j = 0; j < 3; j++) fs.appendFileSync(join(dir, pathOf((k - 1) * 3 + j)), `// turn ${k}\n`)
  if (k === bad) fs.writeFileSync(join(dir, 'broken.flag'), `broken by turn ${k}\n`)
}

const results = []
const m0 = machine()
console.error(showMachine(m0, 'start'))

try {
  for (const N of SIZES) {
    if (N < 3 * TURNS + 10) throw new Error(`--files ${N} is too few for --turns ${TURNS} (need ${3 * TURNS + 10})`)
    const dir = join(base, `n${N}`)
    const gitDir = join(dir, 'git')
    const ws = join(dir, 'ws')
    fs.mkdirSync(gitDir, { recursive: true })
    const t0 = Date.now()
    // The tree, committed.
    for (let i = 0; i < N; i++) {
      const p = join(gitDir, pathOf(i))
      if (i < 200) fs.mkdirSync(join(p, '..'), { recursive: true })
      fs.writeFileSync(p, fileText(i))
    }
    fs.writeFileSync(join(gitDir, 'check.sh'), 'test ! -e broken.flag\n')
    sh('git init -q -b main && git add -A && git commit -q -m init', gitDir)
    sh(`cp -a ${gitDir} ${ws}`)
    // The workspace: a copy of the committed repo, mounted; the same turns as cpfs turns.
    sh(`${cpfs} mount ${ws}`)
    const pid = JSON.parse(sh(`${cpfs} status ${ws} --json`)).pid
    const bad = Math.round(TURNS * 2 / 3)
    const commits = [sh('git rev-parse HEAD', gitDir).trim()]
    for (let k = 1; k <= TURNS; k++) {
      applyTurn(ws, k, bad)
      sh(`${cpfs} turn -m t${k}`, ws)
      applyTurn(gitDir, k, bad)
      sh(`git add -A && git commit -q -m t${k}`, gitDir)
      commits.push(sh('git rev-parse HEAD', gitDir).trim())
    }
    const head = JSON.parse(sh(`${cpfs} status ${ws} --json`)).head
    if (head !== TURNS + 1) throw new Error(`expected head ${TURNS + 1} after ${TURNS} turns, cpfs says ${head}`)
    console.error(`${N} files: tree, repo, mount and ${TURNS} turns set up in ${((Date.now() - t0) / 1000).toFixed(1)} s`)

    const mid = Math.floor(TURNS / 2)
    const readPath = pathOf((mid - 1) * 3)
    const wt = join(dir, 'wt')
    const sideEdits = Array.from({ length: 10 }, (_, j) => `echo '// sandboxed edit' >> ${pathOf(N - 1 - j)}`).join('; ')
    const rows = {}
    const add = (what, side, r) => { (rows[what] ??= { cpfs: [], git: [] })[side].push(r) }
    const resetCpfs = () => {
      sh(`${cpfs} rewind ${head} ${ws}`, ws)
      const h = JSON.parse(sh(`${cpfs} status ${ws} --json`)).head
      if (h !== head) throw new Error(`rewind left head ${h}, not ${head}`)
    }

    const steps = {
      view: {
        cpfs: () => add('view + read a file + close', 'cpfs', timed(`P=$(${cpfs} view ${mid}) && cat "$P/${readPath}" >/dev/null && ${cpfs} view --close >/dev/null`, ws, pid)),
        git: () => add('view + read a file + close', 'git', timed(`git worktree add -q --detach ${wt} ${commits[mid - 1]} && cat ${wt}/${readPath} >/dev/null && git worktree remove --force ${wt}`, gitDir))
      },
      bisect: {
        cpfs: () => {
          const r = timed(`${cpfs} bisect --good 1 --run "sh check.sh"`, ws, pid)
          if (!r.out.includes(`first bad turn is ${bad} `)) throw new Error(`cpfs bisect did not find turn ${bad}: ${r.out}`)
          add(`bisect (${TURNS} turns)`, 'cpfs', r)
        },
        git: () => {
          const r = timed(`git bisect start HEAD ${commits[1]} >/dev/null && git bisect run sh check.sh && git bisect reset >/dev/null`, gitDir)
          if (!r.out.includes(`${commits[bad]} is the first bad commit`)) throw new Error(`git bisect did not find commit ${bad}: ${r.out}`)
          add(`bisect (${TURNS} turns)`, 'git', r)
        }
      },
      revert: {
        cpfs: () => { add(`revert turn ${mid}`, 'cpfs', timed(`${cpfs} revert ${mid}`, ws, pid)); resetCpfs() },
        git: () => { add(`revert turn ${mid}`, 'git', timed(`git revert --no-edit ${commits[mid]} >/dev/null`, gitDir)); sh('git reset -q --hard HEAD~1', gitDir) }
      },
      sandbox: {
        cpfs: () => {
          const a = timed(`${cpfs} exec ${ws} --sandbox --discard -- bash -c "${sideEdits}"`, base, pid)
          const branch = /kept as branch (b\d+)/.exec(a.out)?.[1]
          if (!branch) throw new Error(`no branch named by the sandboxed run: ${a.out}`)
          const b = timed(`${cpfs} merge ${branch}`, ws, pid)
          add('sandboxed run: exec --sandbox / worktree add + edits + commit', 'cpfs', a)
          add('merge: cpfs merge bN / git merge --no-ff + worktree remove', 'cpfs', b)
          add('sandboxed run + merge, total', 'cpfs', { ms: a.ms + b.ms, rss: Math.max(a.rss, b.rss), daemon: Math.max(a.daemon ?? 0, b.daemon ?? 0) || null })
          resetCpfs()
        },
        git: () => {
          const a = timed(`git worktree add -q -b side ${wt} HEAD && cd ${wt} && ${sideEdits} && git commit -q -am side`, gitDir)
          const b = timed(`git merge -q --no-ff --no-edit side && git worktree remove ${wt}`, gitDir)
          add('sandboxed run: exec --sandbox / worktree add + edits + commit', 'git', a)
          add('merge: cpfs merge bN / git merge --no-ff + worktree remove', 'git', b)
          add('sandboxed run + merge, total', 'git', { ms: a.ms + b.ms, rss: Math.max(a.rss, b.rss) })
          sh('git reset -q --hard HEAD~1 && git branch -q -D side', gitDir)
        }
      }
    }
    for (let run = 0; run < RUNS; run++) {
      for (const [name, s] of Object.entries(steps)) {
        const order = run % 2 === 0 ? ['cpfs', 'git'] : ['git', 'cpfs']
        for (const side of order) s[side]()
        console.error(`${N} files, run ${run + 1}/${RUNS}: ${name} done`)
      }
    }
    const daemonMax = Math.max(...Object.values(rows).flatMap(r => r.cpfs.map(x => x.daemon ?? 0)))
    for (const [what, r] of Object.entries(rows)) {
      results.push({
        what, files: N,
        cpfsMs: median(r.cpfs.map(x => x.ms)), gitMs: median(r.git.map(x => x.ms)),
        cpfsRss: median(r.cpfs.map(x => x.rss)), gitRss: median(r.git.map(x => x.rss)),
        daemonRss: median(r.cpfs.map(x => x.daemon))
      })
    }
    results.push({ what: 'the daemon, highest of all the steps above', files: N, daemonRss: daemonMax })
    sh(`${cpfs} view --close ${ws}`, ws, true)
    sh(`${cpfs} unmount ${ws} --discard`, base, true)
    sh(`git worktree prune`, gitDir, true)
    fs.rmSync(dir, { recursive: true, force: true })
  }
} finally {
  // Whatever is left (an error midway): close views, unmount, stop daemons, remove the dir.
  for (const N of SIZES) {
    const ws = join(base, `n${N}`, 'ws')
    if (fs.existsSync(ws) && fs.readFileSync('/proc/mounts', 'utf8').includes(` ${ws} `)) {
      sh(`${cpfs} view --close ${ws}`, base, true)
      sh(`${cpfs} unmount ${ws} --discard`, base, true)
    }
  }
  for (const p of fs.readdirSync('/proc').filter(p => /^\d+$/.test(p))) {
    try { const c = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8'); if (c.includes('daemon/main.js') && c.includes(base + '/')) process.kill(Number(p), 'SIGKILL') } catch {}
  }
  cleanup(base)
}

const m1 = machine()
const ms = (x) => x === undefined || x === null || Number.isNaN(x) ? '' : x >= 1000 ? Math.round(x).toLocaleString('en-US') : x.toFixed(0)
const mb = (b) => b === undefined || b === null || Number.isNaN(b) ? '' : (b / 1e6).toFixed(0)
console.log(`\n\`node bench/tree-ops.mjs --files ${SIZES.join(',')} --turns ${TURNS} --runs ${RUNS}\` — medians of ${RUNS}; MB = 10⁶ bytes; peak RSS: GNU time %M (the step's largest process); daemon: the workspace daemon's VmHWM over the step\n`)
console.log('| what | files | cpfs ms | git ms | cpfs/git | cpfs peak RSS MB | git peak RSS MB | daemon peak RSS MB |')
console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
for (const r of results) {
  const q = r.cpfsMs && r.gitMs ? (r.cpfsMs / r.gitMs).toFixed(2) + '×' : ''
  console.log(`| ${r.what} | ${r.files.toLocaleString('en-US')} | ${ms(r.cpfsMs)} | ${ms(r.gitMs)} | ${q} | ${mb(r.cpfsRss)} | ${mb(r.gitRss)} | ${mb(r.daemonRss)} |`)
}
console.log(`\n${showMachine(m0, 'start')}\n${showMachine(m1, 'end')}`)
if (JSON_OUT) console.log(JSON.stringify({ files: SIZES, turns: TURNS, runs: RUNS, machine: { start: m0, end: m1 }, results }, null, 2))
