// Plans of any size (issue 18 item 4): a session of 200,000 new files, or a tree 10,000
// levels deep, is committed and checked like any other — nothing walks a tree by recursion
// (the call stack overflowed) or spreads a huge list into one call (push(...ops) overflowed it
// after the files were written, and the plan then failed at every retry) — and a plan that was
// interrupted and cannot be finished never blocks unmount --discard, status, log or forget.
// Real mounts, real tools (python, bash, find), real outcomes; no timing is asserted.
import t, { type Test } from 'tap'
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CLI, fuseAvailable, workspace, type Env, type Run } from './helpers.js'

const FILES = 200_000
const PER_DIR = 1000
const DEPTH = 10_000
/**
 * The tree applied to the real directory: the whole 10,000 levels, 20,000 bytes of path, five
 * times PATH_MAX (4096), which only works from directory handles. Each path now costs a
 * bounded number of map operations and system calls whatever its depth (no walk over its
 * ancestors, no hashing of it in full per lookup, a front-coded journal): README.md, "Large
 * and deep sessions", has the times; none is asserted here.
 */
const APPLY_DEPTH = DEPTH

/** The CLI with extra environment variables (test hooks) for this one command. */
function cpfsWith (w: Env, extra: NodeJS.ProcessEnv, ...args: string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], { env: { ...w.env, ...extra }, encoding: 'utf8', timeout: 600_000, maxBuffer: 512 * 1024 * 1024 })
  return { code: r.status ?? 1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' }
}

/** bash in the workspace that must succeed, with more time than w.run's 5 minutes (a 2-core VM under load). */
function runLong (t: Test, w: Env, script: string): string {
  const r = spawnSync('bash', ['-euo', 'pipefail', '-c', script], { env: w.env, cwd: w.ws, encoding: 'utf8', timeout: 1_200_000, maxBuffer: 64 * 1024 * 1024 })
  if (r.status !== 0) t.fail(`bash failed (${r.status ?? r.signal}): ${script.slice(0, 200)}\n${(r.stderr ?? '').trim()}`)
  return r.stdout ?? ''
}

/** Make `depth` nested directories `d` below the current one (mkdir -p of one long path cannot: PATH_MAX). */
const deepTree = (depth: number): string => `python3 - <<'EOF'
import os
for i in range(${depth}):
    os.mkdir('d')
    os.chdir('d')
with open('leaf', 'w') as f:
    f.write('at the bottom\\n')
EOF`

/** The depth of the chain of d's below the current directory and what its leaf holds (walked with relative paths). */
const MEASURE_DEEP = `python3 - <<'EOF'
import os
n = 0
while os.path.isdir('d'):
    os.chdir('d')
    n += 1
print(n, open('leaf').read().strip() if os.path.exists('leaf') else '-')
EOF`

// 200,000 creates through FUSE take minutes on a loaded 2-core VM: more than tap's 600 s per file.
t.setTimeout(2_400_000)

if (fuseAvailable(t)) {
  t.test(`${FILES} new files: unmount applies, verifies and commits them all`, { timeout: 1_200_000 }, async t => {
    const w = workspace(t, 'echo kept > old.txt')
    w.ok('mount', w.ws)
    runLong(t, w, `python3 - <<'EOF'
import os
for i in range(${FILES}):
    d = 'd%03d' % (i // ${PER_DIR})
    if i % ${PER_DIR} == 0:
        os.mkdir(d)
    with open(os.path.join(d, 'f%d' % i), 'w') as f:
        f.write('file %d\\n' % i)
EOF`)
    const before = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(before.pending, 1, 'one turn pending')
    const um = w.cpfs('unmount', w.ws)
    t.equal(um.code, 0, `unmount succeeds: ${um.stderr.trim().split('\n').at(-1)}`)
    t.notOk(fs.readFileSync('/proc/self/mountinfo', 'utf8').includes(` ${w.ws} `), 'not mounted any more')
    t.equal(w.run('find . -type f | wc -l').trim(), String(FILES + 1), 'the real directory has every file (and the old one)')
    t.equal(w.run(`find . -mindepth 1 -maxdepth 1 -type d | wc -l`).trim(), String(FILES / PER_DIR), 'in every directory')
    // A sample across the whole range, content checked byte for byte.
    const bad = w.run(`python3 - <<'EOF'
import os
bad = []
for i in list(range(0, ${FILES}, 997)) + [${FILES} - 1]:
    p = os.path.join('d%03d' % (i // ${PER_DIR}), 'f%d' % i)
    if open(p).read() != 'file %d\\n' % i:
        bad.append(p)
print(len(bad), ' '.join(bad[:5]))
EOF`).trim()
    t.equal(bad, '0', 'sampled files hold their content')
    t.equal(fs.readFileSync(join(w.ws, 'old.txt'), 'utf8'), 'kept\n', 'the file that was there is untouched')
    const after = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(after.pending, 0, 'nothing pending: the plan was committed')
    t.notOk(after.interrupted, 'no interrupted plan left behind')
    const log = cpfsWith(w, {}, 'log', w.ws, '--json') // lists every path: more than w.cpfs's 1 MiB of output
    t.equal(log.code, 0, `cpfs log works: ${log.stderr.trim()}`)
    const turns: Array<{ files: number }> = JSON.parse(log.stdout || '[]')
    t.ok(turns.some(turn => turn.files === FILES + FILES / PER_DIR), 'and its turn counts every file and directory')
    t.equal(w.cpfs('forget', w.ws, '--yes').code, 0, 'and forget')
  })

  t.test(`a tree ${DEPTH} levels deep: status, log, diff and unmount --discard work`, { timeout: 1_200_000 }, async t => {
    const w = workspace(t)
    w.ok('mount', w.ws)
    runLong(t, w, deepTree(DEPTH))
    t.equal(w.run(MEASURE_DEEP).trim(), `${DEPTH} at the bottom`, 'the mount shows the whole tree')
    const st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(st.pending, 1, 'status: one turn pending')
    // The log counts each turn's changes as cpfs diff does: a plan over the whole tree.
    const log = cpfsWith(w, {}, 'log', w.ws, '--json')
    t.equal(log.code, 0, `cpfs log works: ${log.stderr.trim()}`)
    if (log.code === 0) t.equal(JSON.parse(log.stdout).at(-1).files, DEPTH + 1, 'and counts every directory and the leaf')
    const diff = cpfsWith(w, {}, 'diff', '1', w.ws, '--stat')
    t.equal(diff.code, 0, `cpfs diff --stat works: ${diff.stderr.trim()}`)
    t.match(diff.stdout, new RegExp(` ${DEPTH + 1} paths changed, \\+1 -0\\n?$`), 'and lists every path and the leaf\'s line')
    const um = w.cpfs('unmount', w.ws, '--discard')
    t.equal(um.code, 0, `unmount --discard works: ${um.stderr.trim()}`)
    t.equal(fs.readdirSync(w.ws).length, 0, 'the real directory was left as it was')
    const after = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(after.pending, 0, 'nothing pending after the discard')
    t.equal(w.cpfs('log', w.ws).code, 0, 'cpfs log works offline')
  })

  // Applying a deep tree reaches real paths far longer than PATH_MAX (4096): the applier works
  // from kept directory handles (Lower.dirHandle), one new component per level.
  t.test(`a tree ${APPLY_DEPTH} levels deep is applied to the real directory`, {
    timeout: 1_800_000
  }, async t => {
    const w = workspace(t)
    w.ok('mount', w.ws)
    runLong(t, w, deepTree(APPLY_DEPTH))
    const um = w.cpfs('unmount', w.ws)
    t.equal(um.code, 0, `unmount succeeds: ${um.stderr.trim()}`)
    t.equal(w.run(MEASURE_DEEP).trim(), `${APPLY_DEPTH} at the bottom`, 'the real directory has the whole tree and the leaf')
    const st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(st.pending, 0, 'committed')
    t.equal(w.cpfs('log', w.ws).code, 0, 'cpfs log works')
  })

  t.test('an interrupted plan that cannot be finished does not block status, log, unmount --discard or forget', async t => {
    const w = workspace(t, 'mkdir a && echo one > a/one && echo top > top', { env: { CPFS_TEST_CRASH_AFTER_OP: '3' } })
    w.ok('mount', w.ws)
    w.run('for i in $(seq 20); do echo "n $i" > a/new$i; done && echo changed > top && mkdir -p b/c && echo x > b/c/x')
    const killed = w.cpfs('unmount', w.ws)
    t.not(killed.code, 0, 'the daemon died in the middle of the plan (test hook)')
    const fails = { CPFS_TEST_CRASH_AFTER_OP: '', CPFS_TEST_RECOVER_FAILS: '1' }
    const st = cpfsWith(w, fails, 'status', w.ws, '--json')
    t.equal(st.code, 0, `status works: ${st.stderr.trim()}`)
    t.equal(JSON.parse(st.stdout || '{}').interrupted, true, 'and says a plan was interrupted')
    t.equal(cpfsWith(w, fails, 'log', w.ws).code, 0, 'log works')
    const apply = cpfsWith(w, fails, 'unmount', w.ws)
    t.not(apply.code, 0, 'applying cannot finish the plan (test hook)')
    const discard = cpfsWith(w, fails, 'unmount', w.ws, '--discard')
    t.equal(discard.code, 0, `unmount --discard works: ${discard.stderr.trim()}`)
    t.match(discard.stderr, /gave up an interrupted plan/, 'and says that it gave the plan up')
    const after = JSON.parse(cpfsWith(w, fails, 'status', w.ws, '--json').stdout || '{}')
    t.notOk(after.interrupted, 'no interrupted plan any more')
    t.equal(after.pending, 0, 'nothing pending')
    t.equal(w.run('ls -A a | grep -c "\\.cpfs" || true').trim(), '0', 'no temporary files left in the real directory')
    const forget = cpfsWith(w, fails, 'forget', w.ws, '--yes')
    t.equal(forget.code, 0, `forget works without --force: ${forget.stderr.trim()}`)
  })

  t.test('an interrupted plan whose recovery fails and rolls back does not block unmount --discard', async t => {
    const w = workspace(t, 'mkdir a && echo one > a/one && echo top > top', { env: { CPFS_TEST_CRASH_AFTER_OP: '3' } })
    w.ok('mount', w.ws)
    w.run('for i in $(seq 20); do echo "n $i" > a/new$i; done && echo changed > top')
    t.not(w.cpfs('unmount', w.ws).code, 0, 'the daemon died in the middle of the plan (test hook)')
    // Finishing the plan fails at a later operation (as a full disk would): it is rolled back.
    const discard = cpfsWith(w, { CPFS_TEST_CRASH_AFTER_OP: '', CPFS_TEST_FAIL_AT_OP: '10' }, 'unmount', w.ws, '--discard')
    t.equal(discard.code, 0, `unmount --discard works: ${discard.stderr.trim()}`)
    t.equal(fs.readFileSync(join(w.ws, 'top'), 'utf8'), 'top\n', 'the real directory is as it was before the plan')
    t.same(fs.readdirSync(join(w.ws, 'a')).sort(), ['one'], 'no file of the plan is left')
    const st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.notOk(st.interrupted, 'no interrupted plan')
    t.equal(st.pending, 0, 'nothing pending')
    t.equal(w.cpfs('forget', w.ws, '--yes').code, 0, 'forget works')
  })
}
