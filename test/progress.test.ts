// Progress of long work on a terminal, driven through a real pseudo-terminal (test/pty-run.py):
// a 1 GiB unmount (the daemon streams the apply over the control socket) shows moving
// progress and ends with one summary line; offline rewind, restore, fork and prune show
// theirs; without a terminal or with --json nothing but the result is written.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { CLI, ROOT, fuseAvailable, workspace, type Env } from './helpers.js'
import { bytesText, progressLine, secondsText } from '../dist/cli/progress.js'

const PTY = join(ROOT, 'test', 'pty-run.py')

interface Screen {
  code: number
  /** What the terminal got, in pieces, with the seconds since the start. */
  pieces: Array<[number, string]>
  /** All of it. */
  text: string
}

/** Run cpfs on a pseudo-terminal (stdin, stdout, stderr); `env` adds to the workspace's. */
function onTerminal (w: Env, args: string[], env: Record<string, string> = {}): Screen {
  const r = spawnSync('python3', [PTY, process.execPath, CLI, ...args], { env: { ...w.env, ...env }, encoding: 'utf8', timeout: 600_000, maxBuffer: 256 * 1024 * 1024, cwd: join(w.ws, '..') })
  if (r.status !== 0) throw new Error(`pty-run.py failed (${r.status}): ${r.stderr}`)
  const out = JSON.parse(r.stdout) as { code: number, pieces: Array<[number, string]> }
  return { ...out, text: out.pieces.map(p => p[1]).join('') }
}

/** The progress frames drawn (each `\r...\x1b[K`), with the time the terminal got them. */
function frames (s: Screen): Array<{ at: number, text: string }> {
  const out: Array<{ at: number, text: string }> = []
  for (const [at, piece] of s.pieces) {
    for (const m of piece.matchAll(/\r(cpfs: [^\r\n\x1b]*)\x1b\[K/g)) out.push({ at, text: m[1] })
  }
  return out
}

/** The lines left on the screen once redrawn lines are overwritten. */
function finalLines (s: Screen): string[] {
  return s.text.split(/\r?\n/).map(l => l.split('\r').at(-1)!.replace(/\x1b\[K/g, '')).filter(l => l !== '')
}

const SIZE = Number(process.env.CPFS_PROGRESS_TEST_BYTES ?? 1024 ** 3)

t.test('the progress line: phase, done of total, bytes, rate, ETA', async t => {
  t.equal(progressLine({ phase: 'applying', unit: 'files', done: 3, total: 10, bytes: 512 * 1024 ** 2, totalBytes: 1024 ** 3 }, 2),
    'applying  3/10 files  512 MiB/1.00 GiB  256 MiB/s  ETA 2.0 s')
  t.equal(progressLine({ phase: 'deleting unreferenced chunks', unit: 'chunks', done: 1, bytes: 65536, fraction: 0.25 }, 1),
    'deleting unreferenced chunks  1 chunk  64.0 KiB  64.0 KiB/s  ETA 3.0 s', 'no total: the count, and the ETA from the share of the key space')
  t.equal(progressLine({ phase: 'checking', unit: 'paths', done: 0, total: 5, bytes: 0 }, 0), 'checking  0/5 paths', 'no rate or ETA before anything is known')
  t.equal(bytesText(1023), '1023 B')
  t.equal(bytesText(1536), '1.50 KiB')
  t.equal(secondsText(125), '2 min 5 s')
})

if (fuseAvailable(t)) {
  t.test(`unmount of ${bytesText(SIZE)} on a terminal: moving progress streamed from the daemon, one summary line`, async t => {
    const w = workspace(t, 'echo small > small')
    w.ok('mount', w.ws)
    const mib = Math.round(SIZE / 1024 ** 2)
    const sum = w.run(`head -c ${mib}M /dev/urandom > big && sha256sum big`)
    // Two operations: the new file, and the workspace directory's new mtime/ctime (its
    // parent times move with the create, as on ext4).
    const s = onTerminal(w, ['unmount', w.ws])
    t.equal(s.code, 0, `exit 0 (${finalLines(s).join(' | ')})`)
    const applying = frames(s).filter(f => f.text.startsWith('cpfs: applying '))
    const done = applying.map(f => /operations? {2}([\d.]+ \S+)\//.exec(f.text)?.[1])
    t.ok(applying.length >= 3, `the applying phase is redrawn while it runs (${applying.length} frames)`)
    t.ok(new Set(done).size >= 3, `with the bytes done moving: ${[...new Set(done)].slice(0, 5).join(', ')}...`)
    t.ok(new Set(applying.map(f => f.at)).size >= 3, 'the frames reach the terminal as the work runs, not all at the end')
    t.match(applying.at(-1)?.text, new RegExp(`2/2 operations {2}${bytesText(SIZE).replace('.', '\\.')}/${bytesText(SIZE).replace('.', '\\.')}`), 'the last frame: everything done')
    t.ok(applying.some(f => /\/s {2}ETA /.test(f.text)), 'rate and ETA shown')
    t.ok(frames(s).some(f => f.text.startsWith('cpfs: verifying ')), 'the verification shows too')
    const lines = finalLines(s)
    t.equal(lines.length, 2, `two lines stay on the screen: ${JSON.stringify(lines)}`)
    t.match(lines[0], /^cpfs: done in [\d.]+ (s|min)\b.*applying [^,]+ \(2 operations, [\d.]+ [KMG]iB, [\d.]+ \S+\/s\)/, 'one summary line')
    t.match(lines[1], /^unmounted; applied 2 operations, verified 2 paths, wrote /, 'then the result')
    t.match(s.text, /\x1b\[Kcpfs: done in [^\r]*\r?\nunmounted;[^\r]*\r?\n$/, 'nothing is redrawn after the summary')
    t.equal(w.run('sha256sum big'), sum, 'and the file is applied')
  })

  t.test('offline rewind, restore, fork and prune on a terminal: progress and a summary line', async t => {
    const w = workspace(t, 'mkdir src && for i in $(seq 1 40); do echo "v1 $i" > src/f$i; done')
    w.ok('mount', w.ws)
    w.run('for i in $(seq 1 40); do echo "v2 $i" > src/f$i; done; head -c 3M /dev/urandom > blob')
    w.ok('turn', w.ws)
    w.run('rm -rf src; echo v3 > new')
    w.ok('unmount', w.ws)
    const env = { CPFS_TEST_PROGRESS_AT_ONCE: '1' }
    const check = (t: Test, s: Screen, phase: RegExp, result: RegExp): void => {
      t.equal(s.code, 0, `exit 0 (${finalLines(s).join(' | ')})`)
      t.ok(frames(s).some(f => phase.test(f.text)), `progress drawn: ${frames(s).map(f => f.text).slice(-3).join(' / ')}`)
      const lines = finalLines(s)
      t.equal(lines.length, 2, `a summary line and the result: ${JSON.stringify(lines)}`)
      t.match(lines[0], /^cpfs: done in [\d.]+ s/)
      t.match(lines[1], result)
    }
    // Turn 1 made src v2 and the blob, turn 2 removed src: the real directory has no src.
    await t.test('restore', async t => {
      check(t, onTerminal(w, ['restore', '2', join(w.ws, 'src'), w.ws], env), /^cpfs: (applying|verifying)\s+\d+\/\d+ /, /^restored src to the start of turn 2/)
      t.equal(w.run('cat src/f7'), 'v2 7\n')
    })
    await t.test('fork', async t => {
      const dest = join(w.ws, '..', 'forked')
      check(t, onTerminal(w, ['fork', '2', dest, w.ws], env), /^cpfs: (writing|verifying)\s+\d+\/\d+ /, /^forked turn 2 into /)
      t.equal(fs.readFileSync(join(dest, 'src/f7'), 'utf8'), 'v2 7\n')
    })
    await t.test('rewind', async t => {
      check(t, onTerminal(w, ['rewind', '1', w.ws], env), /^cpfs: applying\s+\d+\/\d+ operations/, /^rewound to the start of turn 1; applied/)
      t.equal(w.run('cat src/f7'), 'v1 7\n')
    })
    await t.test('prune', async t => {
      check(t, onTerminal(w, ['prune', w.ws, '--keep-turns', '2'], env), /^cpfs: (merging turns|reading the history|deleting unreferenced chunks|compacting the store)/, /^\S+: /)
    })
  })

  t.test('quiet without a terminal and with --json', async t => {
    const w = workspace(t, 'echo v1 > a && head -c 2M /dev/urandom > blob')
    w.ok('mount', w.ws)
    w.run('echo v2 > a && head -c 2M /dev/urandom > blob')
    w.ok('turn', w.ws)
    const env = { CPFS_TEST_PROGRESS_AT_ONCE: '1' }
    const piped = spawnSync(process.execPath, [CLI, 'rewind', '1', w.ws], { env: { ...w.env, ...env }, encoding: 'utf8' })
    t.equal(piped.status, 0)
    t.equal(piped.stderr, '', 'stderr not a terminal: no progress')
    t.match(piped.stdout, /^rewound to the start of turn 1/)
    const s = onTerminal(w, ['unmount', w.ws, '--json'], env)
    t.equal(s.code, 0)
    t.notMatch(s.text, /\r(?!\n)|cpfs: /, 'a terminal but --json: nothing but the JSON')
    t.equal(JSON.parse(s.text).applied, true, 'which parses')
    t.equal(w.run('cat a'), 'v1\n')
  })
}
