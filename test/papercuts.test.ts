// The walk-through's papercuts (issue 19, "Why" item 4), each as the user typed it: bash in
// the workspace (or next to it) with `cpfs` on the PATH, the real CLI, a real mount.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CLI, fuseAvailable, stopDaemon, workspace, type Env } from './helpers.js'

/** A workspace whose shell has `cpfs` on its PATH, as after npm install -g. */
function typed (t: Test, setup: string): Env {
  const w = workspace(t, setup)
  const bin = join(w.ws, '..', 'bin')
  fs.mkdirSync(bin)
  fs.writeFileSync(join(bin, 'cpfs'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 })
  w.env.PATH = `${bin}:${process.env.PATH}`
  return w
}
const log = (w: Env) => JSON.parse(w.ok('log', w.ws, '--json')) as Array<{ turn: number, openedAt: number, id: string | null, files: number, bytes: number }>
/** cpfs status, less the store's size on disk (LevelDB moves it as it merges its files). */
const status = (w: Env) => {
  const s = JSON.parse(w.ok('status', w.ws, '--json'))
  delete s.storeBytes
  return s
}

if (fuseAvailable(t)) {
  t.test('offline `cpfs restore 1 a.txt` with nothing to restore changes nothing and says so', async t => {
    const w = typed(t, 'echo orig > a.txt')
    w.run('cpfs mount . >/dev/null && cd . && echo changed > a.txt && cpfs turn --id second >/dev/null && echo b > b.txt && cd .. && cpfs unmount ws >/dev/null')
    w.run('cpfs rewind second >/dev/null') // offline: b.txt goes, one redo step
    const before = { log: log(w), status: status(w) }
    t.equal(before.status.redo, 1, 'one redo step to keep')
    const r = w.sh('cpfs restore 2 a.txt')
    t.equal(r.code, 0, 'exit 0: nothing was wrong')
    t.match(r.stdout, /^nothing restored: a\.txt is already as at the start of turn 2 \(nothing changed\)$/m, 'it says nothing was restored')
    t.notMatch(r.stdout, /applied 0 operations/, 'not "applied 0 operations"')
    t.same(log(w), before.log, 'the head is not sealed: the history is as it was')
    t.same(status(w), before.status, 'redo is kept')
    w.run('cpfs redo >/dev/null')
    t.equal(w.run('cat b.txt'), 'b\n', 'and redo still brings b.txt back')
    // The history says a.txt is as at turn 2, but the real file was edited outside cpfs since.
    w.run('echo edited > a.txt')
    const drift = w.sh('cpfs restore 2 a.txt')
    t.equal(drift.code, 1, 'a path changed outside cpfs is not "already as at turn 2"')
    t.match(drift.stderr, /^cpfs: the real directory changed outside cpfs: a\.txt .*--force/m, 'it refuses as a plan would')
    t.equal(w.run('cat a.txt'), 'edited\n', 'changing nothing')
    w.run('cpfs restore 2 a.txt --force >/dev/null')
    t.equal(w.run('cat a.txt'), 'changed\n', '--force restores it (the edit is kept in the history)')
  })

  t.test('a turn never shows "openedAt 0" / "20792d ago": an offline restore keeps the head\'s time and labels', async t => {
    const w = typed(t, 'echo orig > a.txt')
    w.run('cpfs mount . >/dev/null && cd . && echo changed > a.txt && cpfs turn --id second --prompt "fix a" >/dev/null && cd .. && cpfs unmount ws >/dev/null')
    w.run('cpfs rewind second >/dev/null')
    const r = w.sh('cpfs restore 1 a.txt')
    t.equal(r.code, 0, r.stderr)
    t.match(r.stdout, /^restored a\.txt to the start of turn 1; applied 1 operation/)
    t.equal(w.run('cat a.txt'), 'orig\n')
    const turns = log(w)
    for (const x of turns) t.ok(x.openedAt > 0, `turn ${x.turn} has the time it was opened (openedAt ${x.openedAt})`)
    t.equal(turns[1].id, 'second', 'the restored turn keeps its id')
    t.notMatch(w.run('cpfs log'), /\d{4,}d ago/, 'cpfs log shows no turn opened decades ago')
  })

  t.test('a repeated rewind to the same turn stores no extra redo step (mounted and not)', async t => {
    const w = typed(t, 'echo 1 > a.txt')
    w.run('cpfs mount . >/dev/null && cd . && echo 2 > a.txt && cpfs turn >/dev/null && echo 3 > a.txt')
    t.equal(w.run('cpfs rewind 1'), 'rewound to the start of turn 1\n')
    t.equal(w.run('cpfs rewind 1'), 'already at the start of turn 1: nothing to rewind\n', 'the second says there was nothing to do')
    t.equal(status(w).redo, 1, 'one redo step, not two')
    w.run('cpfs redo >/dev/null')
    t.equal(w.run('cat a.txt'), '3\n', 'one redo brings everything back')
    w.run('cd .. && cpfs unmount ws >/dev/null')
    w.run('cpfs rewind 1 >/dev/null && cpfs rewind 1 >/dev/null')
    t.equal(status(w).redo, 1, 'offline too: one redo step')
    w.run('cpfs redo >/dev/null')
    t.equal(w.run('cat a.txt'), '3\n')
  })

  t.test('`cpfs unmount` of a directory that is not mounted says so, unless it had turns to apply', async t => {
    const w = typed(t, 'echo 1 > a.txt')
    const plain = join(w.ws, '..', 'plain')
    fs.mkdirSync(plain)
    let r = w.sh(`cpfs unmount ${plain}`)
    t.equal(r.code, 1, 'a directory cpfs never saw: exit 1')
    t.match(r.stderr, /^cpfs: .*\/plain is not mounted, and has no cpfs history \(cpfs mount .* mounts it\)$/m)
    w.run('cpfs mount . >/dev/null && cd .. && cpfs unmount ws >/dev/null')
    const before = { log: log(w), status: status(w) }
    r = w.sh('cd .. && cpfs unmount ws')
    t.equal(r.code, 1, 'not mounted, nothing to apply: exit 1')
    t.match(r.stderr, /^cpfs: .*\/ws is not mounted, and the real directory already holds every turn: nothing to apply \(cpfs mount /m)
    t.equal(r.stdout, '', 'not "unmounted; applied 0 operations"')
    t.same({ log: log(w), status: status(w) }, before, 'nothing changed')
    // A daemon stopped without applying (SIGTERM): unmount applies what it left, and says so.
    w.run('cpfs mount . >/dev/null && cd . && echo 2 > a.txt')
    await stopDaemon(w.home, w.ws)
    r = w.sh('cd .. && cpfs unmount ws')
    t.equal(r.code, 0, r.stderr)
    t.match(r.stdout, /^.*\/ws was not mounted; applied the 1 turn it still had to apply: applied 1 operation, verified 1 path/m)
    t.equal(w.run('cat a.txt'), '2\n', 'the pending turn reached the real directory')
  })

  t.test('`cpfs turn` on a workspace that is not mounted adds no empty turn and names the fix', async t => {
    const w = typed(t, 'echo 1 > a.txt')
    w.run('cpfs mount . >/dev/null && cd .. && cpfs unmount ws >/dev/null')
    const before = log(w)
    const r = w.sh('cpfs turn -m "more"')
    t.equal(r.code, 1)
    t.match(r.stderr, /^cpfs: .*\/ws is not mounted: .*no turn was added \(run cpfs mount .*\/ws first\)$/m)
    t.same(log(w), before, 'no turn added')
  })

  t.test('`cpfs rewind -1` counts back from the head', async t => {
    const w = typed(t, 'echo 1 > a.txt')
    w.run('cpfs mount . >/dev/null && cd . && echo 2 > a.txt && cpfs turn >/dev/null && echo 3 > a.txt && cpfs turn >/dev/null && echo 4 > a.txt')
    let r = w.sh('cpfs rewind -1')
    t.equal(r.code, 0, r.stderr)
    t.equal(r.stdout, 'rewound to the start of turn 3\n', '-1 is the head turn: back to the last checkpoint')
    t.equal(w.run('cat a.txt'), '3\n')
    t.equal(w.run('cpfs rewind -2'), 'rewound to the start of turn 2\n', '-2 is the turn before')
    t.equal(w.run('cat a.txt'), '2\n')
    t.match(w.run('cpfs diff -1 --stat'), /no changes/, 'diff takes it too')
    r = w.sh('cpfs rewind -9')
    t.equal(r.code, 1)
    t.match(r.stderr, /^cpfs: turn -9 does not exist: there are 2 turns \(-1 is the head turn, 2; -2 is turn 1\) \(see cpfs log\)$/m)
    r = w.sh('cpfs turn -1')
    t.equal(r.code, 2, 'a command that takes no TURN still refuses it')
    t.match(r.stderr, /Unknown option '-1' \(a turn counted back from the head \(-1, -2\) is a TURN argument of rewind, diff, restore and fork\)/)
    w.run('cd .. && cpfs unmount ws >/dev/null')
  })

  t.test('`cpfs --help` lists completion', async t => {
    const w = typed(t, '')
    const help = w.run('cpfs --help')
    t.match(help, /^ {2}completion bash\|zsh\|fish /m, 'among the commands')
    t.match(help, /-N counted back from the head/, 'and says how to write a relative turn')
  })

  t.test('directories in the mount report the size and blocks ext4 gives a directory', async t => {
    const w = typed(t, 'mkdir old')
    const outside = join(w.ws, '..', 'outside-dir')
    fs.mkdirSync(outside)
    const ext4 = w.run(`stat -c '%s %b' ${outside}`)
    w.run('cpfs mount . >/dev/null')
    t.equal(w.run('mkdir new && stat -c "%s %b" new'), ext4, `a directory made in the mount: ${ext4.trim()}, as one made beside it`)
    t.equal(w.run('touch old/f && stat -c "%s %b" old'), ext4, 'one the mount changed too')
    t.equal(w.run('mkfifo p && stat -c "%s" p'), '0\n', 'a FIFO has size 0')
    w.run('cd .. && cpfs unmount ws >/dev/null')
  })

  t.test('a `log` line never reads "0 paths ... 21 KiB": a file written again with its own bytes changed nothing', async t => {
    const w = typed(t, 'head -c 21000 /dev/zero | tr "\\0" x > big.txt')
    w.run('cpfs mount . >/dev/null && cd . && cat big.txt > ../copy && cat ../copy > big.txt')
    const [turn] = log(w)
    t.equal(turn.files, 0, 'no path changed')
    t.equal(turn.bytes, 0, 'so no bytes changed either')
    t.match(w.run('cpfs log'), /^\*1 .* 0 paths +\+0 -0 +0 B/m)
    w.run('echo y >> big.txt')
    t.match(w.run('cpfs log'), /^\*1 .* 1 path +\+1 -1 +21 KiB/m, 'a real change counts its bytes')
    w.run('cd .. && cpfs unmount ws >/dev/null')
  })
}
