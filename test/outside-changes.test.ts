// Changes made to the real directory by someone other than cpfs — while mounted, while a plan
// runs, after a plan was interrupted — are never overwritten or deleted silently, and never
// make cpfs report drift that is not there. Each sequence is typed as a user would.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { fuseAvailable, sleep, stopDaemon, workspace, type Env } from './helpers.js'

/** A shell whose cwd is inside the workspace from before the mount: it still reaches the real files. */
async function realShell (t: any, w: Env): Promise<(script: string) => Promise<void>> {
  const holder = spawn('bash', ['-c', 'while read -r line; do eval "$line"; echo done; done'], { cwd: w.ws, stdio: ['pipe', 'pipe', 'ignore'] })
  t.teardown(() => holder.kill('SIGKILL'))
  await sleep(200)
  return async (script: string) => {
    const done = new Promise<void>(resolve => holder.stdout.once('data', () => resolve()))
    holder.stdin.write(script + '\n')
    await done
  }
}

// The first two sequences run with the watch of the real directory off (CPFS_UNDERNEATH=off,
// as for a non-root mount, where fanotify is unavailable): they test the safety net behind it,
// the fingerprints. With the watch on, the same edits are recorded as they happen
// (test/underneath.test.ts).
const WATCH_OFF = { env: { CPFS_UNDERNEATH: 'off' } }

if (fuseAvailable(t)) {
  t.test('a real file edited outside after the mount showed it: writes in the mount fail, nothing is merged or overwritten', async t => {
    const w = workspace(t, 'echo orig > f && echo orig > g', WATCH_OFF)
    const outside = await realShell(t, w)
    w.ok('mount', w.ws)
    w.run('ls -l >/dev/null && cat f g >/dev/null') // the mount has shown f and g
    await outside('echo "OUTSIDE EDIT LONGER" > f && echo "OUTSIDE EDIT" > g')
    const r = w.sh('echo mine >> f')
    t.not(r.code, 0, 'the append fails')
    t.match(r.stderr, /Input\/output error/, 'with EIO')
    t.match(fs.readFileSync(w.home + '/' + fs.readdirSync(w.home).find(n => fs.existsSync(join(w.home, n, 'daemon.log')))! + '/daemon.log', 'utf8'),
      /f changed outside the mount after the mount showed it/, 'and the daemon log says why')
    // A change that keeps the content (chmod) is recorded, and the session's end refuses to
    // overwrite the outside edit with it.
    w.run('chmod 600 g')
    const u = w.cpfs('unmount', w.ws)
    t.equal(u.code, 1, 'unmount refuses')
    t.match(u.stderr, /changed outside cpfs: g \(content changed\)/, 'naming the file the mount changed')
    t.notMatch(u.stderr, /\bf \(/, 'f is not in the plan: the mount never changed it')
    t.equal(fs.readFileSync(join(w.ws, 'f'), 'utf8'), 'OUTSIDE EDIT LONGER\n', 'both outside edits are intact')
    t.equal(fs.readFileSync(join(w.ws, 'g'), 'utf8'), 'OUTSIDE EDIT\n')
    t.equal(w.cpfs('unmount', w.ws, '--discard').code, 0, 'and the session can be set aside')
    t.equal(fs.readFileSync(join(w.ws, 'g'), 'utf8'), 'OUTSIDE EDIT\n')
  })

  t.test('a file made outside in a directory the mount replaced (rm -rf d; mkdir d) is not deleted', async t => {
    const w = workspace(t, 'mkdir d && echo old > d/old', WATCH_OFF)
    const outside = await realShell(t, w)
    w.ok('mount', w.ws)
    w.run('rm -rf d && mkdir d && echo new > d/new')
    await outside('echo precious > d/mine')
    const r = w.cpfs('unmount', w.ws)
    t.equal(r.code, 1, 'unmount refuses')
    t.match(r.stderr, /d\/mine \(changed outside cpfs after the session began\)/, 'naming the file')
    t.equal(fs.readFileSync(join(w.ws, 'd', 'mine'), 'utf8'), 'precious\n', 'it is still there')
    const f = w.cpfs('unmount', w.ws, '--force')
    t.equal(f.code, 0, f.stderr)
    t.same(fs.readdirSync(join(w.ws, 'd')).sort(), ['new'], '--force applies the mount\'s directory')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    const kept = log.find((x: any) => /outside cpfs/.test(x.prompt ?? ''))
    t.ok(kept, 'and keeps the outside file in the history')
    w.ok('rewind', String(kept.turn + 1), w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'd', 'mine'), 'utf8'), 'precious\n', 'from where a rewind brings it back')
  })

  t.test('a file made by another process below a directory a plan is removing stays, and is reported', async t => {
    const w = workspace(t, 'mkdir gone && echo a > gone/a && echo b > gone/b && echo keep > keep')
    w.ok('mount', w.ws)
    w.run('rm -rf gone && echo changed > keep')
    await stopDaemon(w.home, w.ws)
    // Another process writes gone/precious just before the plan's first operation.
    const r = w.cpfs('unmount', w.ws)
    t.equal(r.code, 0, 'sanity: without the other process the plan runs')
    t.notOk(fs.existsSync(join(w.ws, 'gone')))

    const v = workspace(t, 'mkdir gone && echo a > gone/a && echo b > gone/b && echo keep > keep', { env: { CPFS_TEST_EDIT_BEFORE_OP: '0:/gone/precious' } })
    v.ok('mount', v.ws)
    v.run('rm -rf gone && echo changed > keep')
    await stopDaemon(v.home, v.ws)
    const s = v.cpfs('unmount', v.ws)
    t.not(s.code, 0, 'the plan says it left something')
    t.match(s.stderr, /another process changed .*gone/, 'naming it')
    t.equal(fs.readFileSync(join(v.ws, 'gone', 'precious'), 'utf8'), 'made concurrently\n', 'the other process\'s file is still there')
    t.same(fs.readdirSync(join(v.ws, 'gone')), ['precious'], 'and only it: what the plan knew is removed')
    t.equal(fs.readFileSync(join(v.ws, 'keep'), 'utf8'), 'changed\n', 'the rest of the plan applied')
  })

  t.test('an edit made after a plan was interrupted is kept when the next command finishes the plan', async t => {
    const v = workspace(t, 'echo c0 > c && echo d0 > d')
    v.ok('mount', v.ws)
    v.run('echo c1 > c && echo d1 > d')
    v.ok('unmount', v.ws)
    // The offline rewind to turn 1 is killed after its first operation...
    const k = spawnCpfs(v, { CPFS_TEST_CRASH_AFTER_OP: '0' }, 'rewind', '1', v.ws)
    t.equal(k.code, 128, 'the plan was killed after its first operation')
    const done = ['c', 'd'].filter(n => fs.readFileSync(join(v.ws, n), 'utf8') === `${n}0\n`)
    t.equal(done.length, 1, 'one file was rewound before the crash')
    // ...then the user fixes both files by hand, before any cpfs command.
    fs.writeFileSync(join(v.ws, 'c'), 'USER FIX c\n')
    fs.writeFileSync(join(v.ws, 'd'), 'USER FIX d\n')
    const next = v.cpfs('mount', v.ws)
    t.equal(fs.readFileSync(join(v.ws, 'c'), 'utf8'), 'USER FIX c\n', 'the fix of the file the plan had done is kept')
    t.equal(fs.readFileSync(join(v.ws, 'd'), 'utf8'), 'USER FIX d\n', 'and of the file it had not reached')
    t.match(next.stderr, /another process changed (c, d|d, c) after an interrupted plan stopped/, 'the next command says so')
    t.not(next.code, 0, 'and exits non-zero')
    t.equal(v.run('cat c d'), 'USER FIX c\nUSER FIX d\n', 'the user\'s versions stay visible')
  })

  t.test('redo after the next mount recorded outside edits does not drop them', async t => {
    const w = workspace(t, 'echo v0 > f')
    w.ok('mount', w.ws)
    w.run('echo v1 > f')
    w.ok('turn', w.ws)
    w.ok('rewind', '1', w.ws)
    w.ok('unmount', w.ws)
    fs.writeFileSync(join(w.ws, 'f'), 'USER OUTSIDE EDIT\n')
    w.ok('mount', w.ws)
    t.equal(w.run('cat f'), 'USER OUTSIDE EDIT\n')
    const r = w.cpfs('redo', w.ws)
    t.equal(r.code, 1, 'redo refuses: the outside edits are new writes')
    t.match(r.stderr, /nothing to redo/)
    w.ok('unmount', w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'f'), 'utf8'), 'USER OUTSIDE EDIT\n', 'the outside edit is what the real directory holds')
  })

  t.test('after a plan is rolled back, the next unmount finds no drift', async t => {
    const w = workspace(t, 'mkdir -p d/s && echo 1 > d/s/1 && echo 2 > d/s/2 && echo 3 > d/s/3 && echo x > x')
    w.ok('mount', w.ws)
    w.run('rm -rf d/s && echo y > x && echo n > n')
    await stopDaemon(w.home, w.ws)
    const failed = spawnCpfs(w, { CPFS_TEST_FAIL_AT_OP: '1' }, 'unmount', w.ws)
    t.not(failed.code, 0)
    t.match(failed.stderr, /rolled back, the real directory is as it was/)
    t.equal(fs.readFileSync(join(w.ws, 'd', 's', '1'), 'utf8'), '1\n', 'the roll-back restored the removed directory')
    const r = w.cpfs('unmount', w.ws)
    t.equal(r.code, 0, `the next unmount applies, with no drift: ${r.stderr}`)
    t.notOk(fs.existsSync(join(w.ws, 'd', 's')))
    t.equal(fs.readFileSync(join(w.ws, 'x'), 'utf8'), 'y\n')
  })
}

function spawnCpfs (w: Env, env: NodeJS.ProcessEnv, ...args: string[]) {
  const saved = { ...w.env }
  Object.assign(w.env, env)
  try {
    return w.cpfs(...args)
  } finally {
    for (const k of Object.keys(env)) delete w.env[k]
    Object.assign(w.env, saved)
  }
}
