// cpfs bisect (issue 23, part 3): the first bad turn, found by running a command in views of
// the trees turns left, as git bisect run finds a commit. Real mounts, real node and bash: a
// test that starts failing at turn 5 is pinned on turn 5 with its diff; untestable turns
// (exit 125) next to it give a range; --write lets the command build in a private copy;
// a branch's turns; ends that are not what they are said to be; bad input. The live tree,
// the history and the mount table are the same afterwards.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fuseAvailable, manifest, workspace, type Env } from './helpers.js'

const PROJECT = `git init -q && git config user.email t@t && git config user.name t
  echo 'module.exports = () => 42' > lib.js
  echo "process.exit(require('./lib.js')() === 42 ? 0 : 1)" > test.js
  git add -A && git commit -qm init`

const TEST = 'node test.js'

/**
 * Mounted, seven sealed turns (each adds fN.txt, labelled "turn N"); turn 5 also breaks
 * lib.js. The tree turn T left passes `node test.js` exactly when T < 5. The head is turn 8.
 */
async function sevenTurns (w: Env): Promise<void> {
  await w.okAsync('mount', w.ws)
  for (let i = 1; i <= 7; i++) {
    await w.runAsync(`echo ${i} > f${i}.txt${i === 5 ? " && echo 'module.exports = () => 41' > lib.js" : ''}`)
    await w.okAsync('turn', w.ws, '-m', `turn ${i}`)
  }
}

function viewMounts (): string[] {
  return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(l => / - fuse\.cpfs cpfs-view:/.test(l)).map(l => l.split(' ')[4])
}

/** What must not change: the live tree, git's view of it, the history, and no view left open. */
async function unchanged (t: Test, w: Env, before: { tree: unknown, git: string, log: string }): Promise<void> {
  t.same(manifest(w.ws), before.tree, 'the live tree is unchanged')
  t.equal(await w.runAsync('git status --porcelain'), before.git, 'git status in the workspace: unchanged')
  t.equal(await w.okAsync('log', '--all', '--json', w.ws), before.log, 'the history is unchanged')
  t.same(viewMounts().filter(p => p.startsWith(join(w.ws, '..'))), [], 'no view left mounted')
}

async function snapshot (w: Env): Promise<{ tree: unknown, git: string, log: string }> {
  return { tree: manifest(w.ws), git: await w.runAsync('git status --porcelain'), log: await w.okAsync('log', '--all', '--json', w.ws) }
}

// The cases share nothing (a workspace and daemon each) and mostly wait on daemons.
t.jobs = 3

if (fuseAvailable(t)) {
  t.test('a test that starts failing at turn 5: found with its diff; skips give a range; ends checked; bad input', async t => {
    const w = workspace(t, PROJECT)
    await sevenTurns(w)
    const before = await snapshot(w)

    const r = await w.cpfsAsync('bisect', '--good', '1', '--run', TEST, w.ws)
    t.equal(r.code, 0, 'found')
    t.match(r.stdout, /^the first bad turn is 5 \(turn 5\)\n/, 'the first bad turn and its label')
    t.match(r.stdout, /lib\.js/, 'its diff names the file it broke')
    t.match(r.stdout, /f5\.txt/, 'and the rest of what it changed')
    t.match(r.stderr, /turn 8 bad \(exit 1\)[\s\S]*turn 1 good \(exit 0\)/, 'both ends run first, the head as it is now')

    // --json, and a command that checks where it runs: the view's root, read-only, holding
    // the tree the turn left (fT.txt, added by turn T; the head's tree now has no f8.txt).
    const where = `test "$(cat f$CPFS_BISECT_TURN.txt 2>/dev/null || echo none)" = "$CPFS_BISECT_TURN" -o "$CPFS_BISECT_TURN" = 8 || exit 2; touch x 2>/dev/null && exit 3; ${TEST}`
    const j = JSON.parse(await w.okAsync('bisect', '--good', '1', '--json', w.ws, '--', 'bash', '-c', where))
    t.match(j.first, { turn: 5, ref: '5', label: 'turn 5' }, '--json: the first bad turn')
    t.same(j.changes.map((c: { path: string }) => c.path).sort(), ['/f5.txt', '/lib.js'], 'what it changed, as cpfs diff 5 has it')
    const tested = j.probes.map((p: { turn: number }) => p.turn)
    t.equal(new Set(tested).size, tested.length, `each turn tested once (${tested.join(' ')})`)
    t.ok(tested.length <= 5, 'a search, not a scan')
    t.ok(j.probes.every((p: { turn: number, verdict: string }) => p.verdict === (p.turn >= 5 ? 'bad' : 'good')), 'each turn judged by the tree it left, in its view, which it cannot write: bad from turn 5 on')

    const skip = await w.okAsync('bisect', '--good', '1', '--run', `case $CPFS_BISECT_TURN in 3|4) exit 125;; esac; ${TEST}`, w.ws)
    t.match(skip, /^the first bad turn is one of 3-5 \(3, 4 could not be tested: exit 125\)\n  3 \(turn 3\)\n  4 \(turn 4\)\n  5 \(turn 5\)$/, 'untestable turns 3 and 4 next to it: the range they leave')

    const ends: Array<[string[], RegExp]> = [
      [['--good', '6', '--run', TEST], /turn 6, given as good, is not: the command exited 1 there/],
      [['--good', '1', '--bad', '3', '--run', TEST], /turn 3, given as bad, is not: the command exited 0 there/],
      [['--good', '1', '--bad', '6', '--run', `[ $CPFS_BISECT_TURN = 6 ] && exit 125; ${TEST}`], /turn 6, given as bad, is not: the command cannot test it \(exit 125\)/],
      [['--good', '1', '--run', 'exit 130'], /the command exited 130 at turn 8: bisect stops/],
      [['--good', '1', '--run', 'kill -9 $$'], /was killed by SIGKILL at turn 8: bisect stops/],
      [['--good', '1', '--bad', '1', '--run', TEST], /the good turn \(1\) must come before the bad one \(1\)/],
      [['--good', '99', '--run', TEST], /turn 99 does not exist.*cpfs log --all/],
      [['--good', 'b9:1', '--run', TEST], /no branch b9.*cpfs log --all/]
    ]
    for (const [args, why] of ends) {
      const e = await w.cpfsAsync('bisect', ...args, w.ws)
      t.equal(e.code, 1, `bisect ${args.join(' ')}: exit 1`)
      t.match(e.stderr.trim().split('\n').at(-1), why, 'one line says why')
      t.equal(e.stdout, '', 'no result')
    }
    for (const [args, why] of [[['--run', TEST], /needs --good/], [['--good', '1'], /no command given/], [['--good', '1', '--run', TEST, '--', 'true'], /give the command once/]] as const) {
      const e = await w.cpfsAsync('bisect', ...args, w.ws)
      t.equal(e.code, 2, `bisect ${args.join(' ')}: usage error`)
      t.match(e.stderr, why)
      t.equal(e.stderr.trim().split('\n').length, 1, 'in one line')
    }
    await unchanged(t, w, before)
    await w.okAsync('unmount', w.ws)
    const off = await w.cpfsAsync('bisect', '--good', '1', '--run', TEST, w.ws)
    t.equal(off.code, 1, 'not mounted: refused')
    t.match(off.stderr, new RegExp(`is not mounted.*\\(cpfs mount ${w.ws}\\)`), 'the cause, and cpfs mount DIR')
  })

  t.test('--write: the command builds in a private copy of each view; nothing is left', async t => {
    const tmp = fs.mkdtempSync(join(tmpdir(), 'cpfs-bisect-test-'))
    t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }))
    const w = workspace(t, PROJECT, { env: { TMPDIR: tmp } })
    await sevenTurns(w)
    const before = await snapshot(w)
    // Each probe starts from the view as it is (exit 200, which stops the search, if an earlier
    // probe's output were still there), then writes its build output.
    const build = `test ! -e out || exit 200; mkdir out && cp lib.js test.js out/ && echo built > out/stamp && cd out && ${TEST}`
    const ro = await w.cpfsAsync('bisect', '--good', '1', '--run', build, w.ws)
    t.equal(ro.code, 1, 'without --write the build cannot write in a view')
    t.match(ro.stderr, /Read-only file system[\s\S]*turn 1, given as good, is not/, 'and says so')
    const r = JSON.parse(await w.okAsync('bisect', '--good', '1', '--write', '--json', '--run', build, w.ws))
    t.match(r.first, { turn: 5, label: 'turn 5' }, 'with --write: found')
    t.same(fs.readdirSync(tmp), [], 'the copies\' directories are gone')
    t.notOk(fs.readFileSync('/proc/self/mountinfo', 'utf8').includes('cpfs-bisect'), 'and so are their mounts')
    await unchanged(t, w, before)
    t.notOk(fs.existsSync(join(w.ws, 'out')), 'no build output in the workspace')
    await w.okAsync('unmount', w.ws)
  })

  t.test('the turns of a branch: --good b1:1 --bad b1', async t => {
    const w = workspace(t, PROJECT)
    await sevenTurns(w)
    await w.okAsync('rewind', '2', w.ws)
    const { branches } = JSON.parse(await w.okAsync('log', '--all', '--json', w.ws))
    const b = branches[0].branch as string
    const before = await snapshot(w)
    const r = await w.cpfsAsync('bisect', '--good', `${b}:1`, '--bad', b, '--run', TEST, w.ws)
    t.equal(r.code, 0)
    t.match(r.stdout, new RegExp(`^the first bad turn is ${b}:5 \\(turn 5\\)\\n[\\s\\S]*lib\\.js`), 'the branch\'s turn 5, with its diff')
    const j = JSON.parse(await w.okAsync('bisect', '--good', '1', '--bad', `${b}:7`, '--json', '--run', TEST, w.ws))
    t.match(j.first, { turn: 5, ref: `${b}:5` }, 'a good end on the head\'s line that the branch shares')
    t.match(await w.okAsync('diff', `${b}:5`, '--stat', w.ws), /lib\.js/, 'cpfs diff bN:T shows the same turn')
    const other = await w.cpfsAsync('bisect', '--good', '2', '--bad', `${b}`, '--run', TEST, w.ws)
    t.equal(other.code, 1, 'a good end the branch does not share is refused')
    t.match(other.stderr, /is not on the line of turn/)
    await unchanged(t, w, before)
    await w.okAsync('unmount', w.ws)
  })
}
