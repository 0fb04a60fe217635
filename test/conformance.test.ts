// The public POSIX conformance suites, run inside a cpfs mount: pjdfstest (every syscall's
// errors, modes, owners, times, link counts; as root switching uids, so --allow-other) and
// fsx (random reads, writes, mmap, truncates, fallocate and copy_file_range, every byte
// checked). They are third-party code built outside the repository (see docs/conformance.md);
// the test finds them through CPFS_PJDFSTEST (a pjdfstest checkout with the `pjdfstest` binary
// built) and CPFS_FSX (the fsx binary) and says loudly when they are not set.
//
// pjdfstest's result is compared with test/conformance-expected.json: every file that fails
// must be listed there with its count and the reason. A new failure fails the test, and so
// does a listed failure that is gone (the list must say what cpfs does today).
import t from 'tap'
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { fuseAvailable, workspace } from './helpers.js'

const PJD = process.env.CPFS_PJDFSTEST
const FSX = process.env.CPFS_FSX
/** Groups that run on Linux (chflags, granular and posix_fallocate are FreeBSD-only). */
const GROUPS = ['chmod', 'chown', 'ftruncate', 'link', 'mkdir', 'mkfifo', 'mknod', 'open', 'rename', 'rmdir', 'symlink', 'truncate', 'unlink', 'utimensat']
const EXPECTED: Record<string, { failed: number, why: string }> = JSON.parse(
  fs.readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'conformance-expected.json'), 'utf8')).pjdfstest

interface FileResult { passed: number, failed: number, lines: string[] }

/** One .t file of pjdfstest, run as prove would; TODO failures are expected by the suite itself. */
function runTapFile (file: string, cwd: string): FileResult {
  const r = spawnSync('timeout', ['-k', '10', '300', '/bin/sh', file], { cwd, encoding: 'utf8', maxBuffer: 1 << 26 })
  const out = (r.stdout ?? '') + (r.stderr ?? '')
  let passed = 0
  let failed = 0
  const lines: string[] = []
  let planned = -1
  for (const line of out.split('\n')) {
    const plan = /^1\.\.(\d+)/.exec(line)
    if (plan) planned = Number(plan[1])
    if (/^ok \d+/.test(line)) passed++
    else if (/^not ok \d+/.test(line)) {
      if (/#\s*TODO/i.test(line)) passed++
      else {
        failed++
        lines.push(line)
      }
    }
  }
  // Assertions planned but never run (a crash, a hang cut by the timeout) are failures too.
  if (planned >= 0 && passed + failed < planned) {
    lines.push(`${planned - passed - failed} planned assertions never ran (exit ${r.status ?? r.signal})`)
    failed += planned - passed - failed
  }
  if (planned < 0) {
    lines.push(`no TAP plan (exit ${r.status ?? r.signal}): ${out.trim().split('\n').slice(0, 2).join(' | ')}`)
    failed = Math.max(failed, 1)
  }
  return { passed, failed, lines }
}

/**
 * A suite that is not set up is skipped, loudly. Unlike a missing tool this stays a skip in CI
 * too: these suites are built outside the repository (docs/conformance.md), and .ci/run does
 * not build them.
 */
function notRun (what: string): void {
  process.stderr.write(`\n!!! SKIPPING ${what}\n\n`)
  t.skip(`SKIPPED LOUDLY: ${what}`)
}

if (fuseAvailable(t)) {
  if (!PJD) {
    notRun('pjdfstest not run: set CPFS_PJDFSTEST to a pjdfstest checkout with the binary built (docs/conformance.md)')
  } else {
    t.test('pjdfstest in a cpfs mount: only the listed, explained failures', async t => {
      t.ok(fs.existsSync(join(PJD, 'pjdfstest')), `the pjdfstest binary is built in ${PJD}`)
      const w = workspace(t)
      fs.chmodSync(join(w.ws, '..'), 0o755) // the suite switches to uid 65534
      fs.chmodSync(w.ws, 0o755)
      w.ok('mount', w.ws, '--allow-other')
      const dir = join(w.ws, 'pjd')
      fs.mkdirSync(dir, { mode: 0o755 })
      fs.chmodSync(dir, 0o755)
      const failing: Record<string, number> = {}
      let passed = 0
      let failed = 0
      for (const group of GROUPS) {
        const files = fs.readdirSync(join(PJD, 'tests', group)).filter(f => f.endsWith('.t')).sort()
        for (const f of files) {
          const r = runTapFile(join(PJD, 'tests', group, f), dir)
          passed += r.passed
          failed += r.failed
          const key = `${group}/${f}`
          if (r.failed > 0) {
            failing[key] = r.failed
            if (!EXPECTED[key]) t.comment(`${key}:\n  ${r.lines.slice(0, 6).join('\n  ')}`)
          }
        }
      }
      t.comment(`pjdfstest in cpfs: ${passed} passed, ${failed} failed`)
      const expected = Object.fromEntries(Object.entries(EXPECTED).map(([k, v]) => [k, v.failed]))
      t.same(failing, expected, 'the failing files and counts are exactly the ones test/conformance-expected.json explains')
      const st = w.cpfs('status', w.ws)
      t.match(st.stdout, /mounted\s+yes/, 'the daemon is still serving after the whole suite')
      w.ok('unmount', w.ws)
      t.notOk(fs.existsSync(dir) && fs.readdirSync(dir).length > 0, 'the suite cleaned up after itself and unmount applied that')
    })
  }
  if (!FSX) {
    notRun('fsx not run: set CPFS_FSX to an fsx binary built from xfstests ltp/fsx.c (docs/conformance.md)')
  } else {
    t.test('fsx in a cpfs mount: random I/O with every byte checked', async t => {
      const w = workspace(t)
      w.ok('mount', w.ws)
      for (const [name, args] of [['mmap', ['-N', '100000']], ['reopen', ['-N', '25000', '-c', '10', '-W', '-R']]] as const) {
        const r = spawnSync(FSX, [...args, '-P', w.home, join(w.ws, `fsx-${name}.dat`)], { encoding: 'utf8', maxBuffer: 1 << 26, timeout: 1_800_000 })
        const tail = (r.stdout + r.stderr).trim().split('\n').slice(-4).join(' | ')
        t.equal(r.status, 0, `fsx ${args.join(' ')} passed (${tail})`)
      }
      w.ok('unmount', w.ws)
      for (const name of ['mmap', 'reopen']) {
        t.ok(fs.existsSync(join(w.ws, `fsx-${name}.dat`)), `fsx-${name}.dat was applied to the real directory`)
      }
    })
  }
}
