// Who changed what (issue 22, part 1): every change made in a mount is recorded with the
// process that made it — its pid, its command line and the commands it ran under — in the same
// batch as the change, and `cpfs blame PATH` shows it per turn. Real tools in a real mount; the
// daemon in its own process.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { ClassicLevel } from 'classic-level'
import { HANG_GUARD_MS, daemonPid, exited, fuseAvailable, workspace, type Env } from './helpers.js'

interface Line {
  turn: number
  change: string | null
  by: 'mount' | 'underneath' | 'unrecorded'
  at: number | null
  process: { pid: number, command: string, parents: Array<{ pid: number, command: string }> } | null
}

const blame = (w: Env, path: string, ...more: string[]): Line[] => JSON.parse(w.ok('blame', join(w.ws, path), ...more, '--json')).lines

/** The process records (`p`) of the workspace's store (not mounted). */
async function processKeys (w: Env): Promise<string[]> {
  const store = fs.readdirSync(w.home).map(n => join(w.home, n, 'store')).find(p => fs.existsSync(p))!
  const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
  await db.open()
  try {
    const out: string[] = []
    for await (const k of db.keys({ gte: 'p', lt: 'p\uffff' })) out.push(k)
    return out
  } finally {
    await db.close()
  }
}

if (fuseAvailable(t)) {
  t.test('each tool\'s change is blamed on its own process, with the shell it ran under', async t => {
    const w = workspace(t, 'echo a=1 > notes.txt && echo SECRET=x > .env && mkdir src && echo keep > src/keep.ts')
    w.ok('mount', w.ws)
    // Each command in its own marked shell, so the test can tell the parents apart.
    w.run(`bash -c ': sed-shell; sed -i s/a=1/a=2/ notes.txt; true'
bash -c ': env-shell; echo SECRET=leaked > .env; true'
python3 -c "open('gen.py', 'w').write('print(1)\\\\n')"
node -e "require('fs').writeFileSync('src/made.js', '1')"
bash -c ': rm-shell; rm src/keep.ts; true'`)
    w.ok('turn', w.ws)
    w.run('bash -c ": second-shell; sed -i s/a=2/a=3/ notes.txt; true"')
    const notes = blame(w, 'notes.txt')
    t.same(notes.map(l => [l.turn, l.change, l.by]), [[1, 'modified', 'mount'], [2, 'modified', 'mount']], 'notes.txt: modified in turns 1 and 2, both by a process in the mount')
    t.match(notes[0].process?.command, /^sed -i s\/a=1\/a=2\/ notes\.txt$/, 'turn 1: sed, with its arguments')
    t.match(notes[0].process?.parents[0]?.command, /sed-shell/, 'run by the shell that started it')
    t.match(notes[1].process?.command, /s\/a=2\/a=3\//, 'turn 2: the second sed')
    t.ok(notes.every(l => typeof l.at === 'number' && Math.abs(l.at - Date.now()) < HANG_GUARD_MS * 10), 'each with the time of the path\'s last change in its turn')
    const env = blame(w, '.env')
    t.equal(env.length, 1, '.env changed once')
    t.match(env[0].process?.command, /env-shell/, '.env: by the shell that redirected into it (the process that wrote)')
    t.match(blame(w, 'gen.py')[0], { change: 'added', process: { command: /python3? -c open\('gen\.py'/ } }, 'gen.py: added by python')
    t.match(blame(w, 'src/made.js')[0], { change: 'added', process: { command: /node -e/ } }, 'src/made.js: added by node')
    t.match(blame(w, 'src/keep.ts')[0], { change: 'deleted', process: { command: /^rm src\/keep\.ts$/, parents: [{ command: /rm-shell/ }] } }, 'src/keep.ts: deleted by rm')
    t.same(blame(w, 'src/keep.ts')[0].process?.parents.length, 4, 'four ancestors shown (up to the test itself)')
    // The text form: one line per change, and what it ran under.
    const text = w.ok('blame', join(w.ws, 'notes.txt'))
    t.match(text, /^turn 1 {2}modified \+1 -1 {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d {2}pid \d+ {2}sed -i s\/a=1\/a=2\/ notes\.txt\n {4}under bash -c : sed-shell/m, 'text: turn, change, time, pid, command, then its shell')
    t.match(blame(w, 'src').map(l => l.process?.command).sort(), [/^node -e/, /^rm src\/keep\.ts$/], 'a directory: the processes that made and removed its entries')
    w.ok('unmount', w.ws)
    // Offline, from the store alone: the same answer.
    t.same(blame(w, 'notes.txt'), notes, 'blame reads the same history with the workspace not mounted')
  })

  t.test('concurrent writers are told apart, a hard link is blamed through either name, and a killed daemon keeps the attribution of what it answered', async t => {
    const w = workspace(t, 'echo one > linked.txt && ln linked.txt other-name.txt')
    w.ok('mount', w.ws)
    const writers = [0, 1, 2, 3].map(i => spawn('bash', ['-c', `: writer-${i}; for n in $(seq 1 200); do echo $n >> w${i}.log; done`], { cwd: w.ws, stdio: 'ignore' }))
    await Promise.all(writers.map(p => new Promise(resolve => p.on('close', resolve))))
    // echo is the shell's own: each writer is its bash, whose command line carries its tag.
    for (let i = 0; i < 4; i++) {
      const commands = blame(w, `w${i}.log`).map(l => l.process?.command ?? '')
      t.ok(commands.length === 1 && commands[0].includes(`writer-${i}`), `w${i}.log: writer ${i} alone (${commands.join(' | ')})`)
    }
    w.run('bash -c ": link-shell; echo two >> other-name.txt; true"')
    t.match(blame(w, 'linked.txt').at(-1)?.process?.command, /link-shell/, 'written through the other name, blamed through this one')
    w.run('bash -c ": before-kill; echo kept > kept.txt; true"')
    const pid = daemonPid(w.home)
    process.kill(pid, 'SIGKILL')
    t.ok(await exited(pid), 'the daemon is gone')
    spawnSync('umount', ['-l', w.ws])
    t.match(blame(w, 'kept.txt')[0]?.process?.command, /before-kill/, 'after kill -9: the change answered before it is blamed on its process')
    // The next daemon goes on in the same head turn: the earlier process stays, first.
    w.ok('mount', w.ws)
    w.run('bash -c ": after-restart; echo again >> kept.txt; true"')
    t.match(blame(w, 'kept.txt').map(l => l.process?.command), [/before-kill/, /after-restart/], 'changed again after the restart: both processes, in order')
  })

  t.test('prune deletes the records of processes only rewound-away turns named', async t => {
    const w = workspace(t, 'echo base > f.txt')
    w.ok('mount', w.ws)
    w.run('echo 1 > f.txt')
    w.ok('turn', w.ws)
    w.run('bash -c ": dropped; echo 2 > f.txt; echo new > g.txt; true"')
    w.ok('turn', w.ws)
    w.ok('rewind', '2', w.ws)
    t.same(blame(w, 'f.txt').map(l => l.turn), [1], 'after the rewind, f.txt\'s changes are turn 1\'s')
    w.run('echo after > h.txt') // the rewound-away turn is kept as a branch after this write
    w.ok('unmount', w.ws)
    const before = await processKeys(w)
    w.ok('prune', w.ws, '--keep-branches', '0')
    const after = await processKeys(w)
    t.ok(after.length < before.length, `prune, dropping the branch, deletes the records of processes only its turn named (${before.length} → ${after.length})`)
    t.ok(after.length > 0, 'the kept turns\' processes stay')
    t.same(blame(w, 'f.txt').map(l => [l.turn, l.by]), [[1, 'mount']], 'and still blame f.txt')
  })

  t.test('bad input: one line, non-zero, nothing changed', async t => {
    const w = workspace(t, 'echo a > a.txt')
    const outside = w.cpfs('blame', '/etc/hostname')
    t.not(outside.code, 0, 'a path in no workspace fails')
    t.match(outside.stderr, /^cpfs: .*\/etc\/hostname is not inside a workspace with cpfs history \(run it inside a mounted workspace, or name the workspace after the path\)\n$/, 'with one line naming the cause and the fix')
    w.ok('mount', w.ws)
    const away = w.cpfs('blame', '/etc/hostname', w.ws)
    t.not(away.code, 0, 'a path outside the named workspace fails')
    t.match(away.stderr, /outside the workspace/, away.stderr.trim())
    t.match(w.ok('blame', join(w.ws, 'never.txt')), /^no turn changed never\.txt$/, 'a path no turn changed says so')
  })
}
