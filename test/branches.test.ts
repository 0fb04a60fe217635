// History is a tree (issue 23, part 1): a rewind, undo or discard never makes turns
// unreachable. The flows as a user types them, with real tools in a real mount: git status
// after a rewind (it rewrites .git/index) no longer ends the way back; writes after a rewind
// become a branch of their own when redo goes back; any turn of any branch is named bN:T;
// offline too; prune drops branches only when told (or by age, or for size).
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { daemonPid, fuseAvailable, manifest, until, workspace, type Env } from './helpers.js'

const PROJECT = `git init -q && git config user.email t@t && git config user.name t
  echo 'console.log(1)' > app.js && echo '# app' > README.md && git add -A && git commit -qm init`

/** The project's files, not git's own (git status rewrites its index). */
const NO_GIT = { skip: (rel: string) => rel === '.git' || rel.startsWith('.git/') }

interface Branch { branch: string, by: string, shared: number, length: number, redo: boolean, turns: Array<{ ref: string, turn: number, changes: Array<{ path: string }> }> }

async function tree (w: Env): Promise<{ turns: Array<{ turn: number }>, branches: Branch[] }> {
  return JSON.parse(await w.okAsync('log', '--all', '--json', w.ws))
}

/** Eight turns: turn N (N ≥ 2) starts with app.js at version N-1 and fN.txt for each earlier turn. */
async function eightTurns (w: Env): Promise<Array<Record<string, unknown>>> {
  const starts = [manifest(w.ws, NO_GIT)]
  for (let i = 1; i <= 7; i++) {
    await w.runAsync(`echo 'console.log(${i + 1})' > app.js && echo ${i} > f${i}.txt`)
    await w.okAsync('turn', w.ws, '-m', `step ${i}`)
    starts.push(manifest(w.ws, NO_GIT))
  }
  return starts // starts[T-1]: the view at the start of turn T
}

/** The project, mounted, with eight turns (see eightTurns). */
async function mountedProject (t: Parameters<typeof workspace>[0]): Promise<{ w: Env, starts: Array<Record<string, unknown>> }> {
  const w = workspace(t, PROJECT)
  await w.okAsync('mount', w.ws)
  return { w, starts: await eightTurns(w) }
}

// The cases share nothing (a workspace and daemon each) and mostly wait on daemons: three at a time.
t.jobs = 3

if (fuseAvailable(t)) {
  t.test('the README flow: rewind 6, git status, redo — the turns come back', async t => {
    const { w, starts } = await mountedProject(t)
    await w.okAsync('rewind', '6', w.ws)
    t.same(manifest(w.ws, NO_GIT), starts[5], 'the start of turn 6')
    // git rewrites .git/index (a write) when a tracked file's stat no longer matches it: the
    // touch makes that certain (otherwise it hangs on racy-git timing, which a loaded machine changes).
    await w.runAsync('touch -d @0 README.md && git status --short >/dev/null && node app.js >/dev/null')
    t.match(await w.okAsync('redo', w.ws), /redone: head is turn 8/, 'redo still works after the write')
    t.same(manifest(w.ws, NO_GIT), starts[7], 'the turns the rewind left are back')
    const { branches } = await tree(w)
    t.equal(branches.length, 1, 'what git wrote after the rewind is kept as a branch')
    t.match(branches[0], { by: 'redo', shared: 5, length: 6 })
    t.ok(branches[0].turns[0].changes.some(c => c.path.startsWith('/.git/')), 'its turn holds git\'s index write')
    await w.okAsync('unmount', w.ws)
  })

  t.test('writes after a rewind and after a redo: both tips kept, any turn by bN:T, mounted and offline', async t => {
    const { w, starts } = await mountedProject(t)
    await w.okAsync('rewind', '4', w.ws)
    await w.runAsync('echo experiment > exp.txt')
    await w.okAsync('turn', w.ws, '-m', 'experiment')
    const experiment = manifest(w.ws, NO_GIT)
    await w.okAsync('redo', w.ws)
    t.same(manifest(w.ws, NO_GIT), starts[7], 'redo: back to the tip the rewind left')
    let { turns, branches } = await tree(w)
    t.equal(turns.length, 8)
    const exp = branches.find(b => b.turns.some(x => x.changes.some(c => c.path === '/exp.txt')))!
    t.ok(exp, 'the experiment is a branch')
    t.match(exp, { by: 'redo', shared: 3, length: 5 }, 'it shares turns 1-3; its turns 4 and 5 are its own')
    t.match(await w.okAsync('log', '--graph', w.ws), new RegExp(`\\| o +${exp.branch}:5[\\s\\S]*\\|/ +branch ${exp.branch}`), 'the graph draws it beside the head\'s line')
    const dry = JSON.parse(await w.okAsync('rewind', exp.branch, '--dry-run', '--json', w.ws))
    t.match(dry, { canRewind: true }, 'rewind bN --dry-run says what would change')
    t.ok(dry.filesChanged.includes('exp.txt') && dry.filesChanged.includes('f7.txt'), `its files and the head's (${dry.filesChanged.join(' ')})`)
    await w.okAsync('rewind', exp.branch, w.ws)
    t.same(manifest(w.ws, NO_GIT), experiment, 'rewind bN: its tip, whole')
    ;({ branches } = await tree(w))
    t.notOk(branches.some(b => b.branch === exp.branch), 'its line is the head\'s now')
    const main = branches.find(b => b.length === 8)!
    t.ok(main, 'the line left is a branch, whole')
    await w.okAsync('rewind', `${main.branch}:4`, w.ws)
    t.same(manifest(w.ws, NO_GIT), starts[3], 'rewind bN:T: the start of that turn')
    await w.okAsync('unmount', w.ws)
    t.same(manifest(w.ws, NO_GIT), starts[3], 'the real directory holds that start')
    await w.okAsync('rewind', `${main.branch}:7`, w.ws)
    t.same(manifest(w.ws, NO_GIT), starts[6], 'offline: a verified plan to turn 7 of another branch')
    await w.okAsync('rewind', main.branch, w.ws)
    t.same(manifest(w.ws, NO_GIT), starts[7], 'offline: to its tip')
    await w.okAsync('redo', w.ws)
    t.same(manifest(w.ws, NO_GIT), starts[6], 'offline redo goes back one rewind')
    t.equal((await w.cpfsAsync('fsck', w.ws)).code, 0, 'fsck: nothing wrong')
  })

  t.test('bad refs: one line naming the cause and the fix, non-zero, nothing changed', async t => {
    const { w } = await mountedProject(t)
    await w.okAsync('rewind', '3', w.ws)
    const before = manifest(w.ws)
    const log = await w.okAsync('log', '--all', '--json', w.ws)
    for (const [ref, why] of [['b99', /no branch b99 \(branches: b\d+\)/], ['b1:99', /branch b1 has no turn "99" \(its turns are 1\.\.8\)/], ['nope', /on the head's branch or any other/], ['b1:0', /no turn "0"/]] as const) {
      const r = (await w.cpfsAsync('rewind', ref, w.ws))
      t.equal(r.code, 1, `rewind ${ref} fails`)
      t.match(r.stderr, why)
      t.equal(r.stderr.trim().split('\n').length, 1, 'in one line')
      t.match(r.stderr, /cpfs log --all/, 'naming where to look')
    }
    t.same(manifest(w.ws), before, 'the workspace is unchanged')
    t.equal(await w.okAsync('log', '--all', '--json', w.ws), log, 'and so is the history')
    await w.okAsync('unmount', w.ws)
  })

  t.test('unmount --discard keeps the work as a branch; prune drops branches only by age, count or size', async t => {
    const w = workspace(t, PROJECT)
    await w.okAsync('mount', w.ws)
    await w.runAsync('echo draft > draft.txt && head -c 300000 /dev/urandom > blob.bin')
    await w.okAsync('turn', w.ws)
    await w.okAsync('unmount', w.ws, '--discard')
    t.notOk(manifest(w.ws)['draft.txt'], 'the real directory was left as it was')
    const { branches } = await tree(w)
    t.match(branches, [{ by: 'discard' }], 'the discarded work is a branch')
    await w.okAsync('prune', w.ws, '--keep-turns', '5')
    t.equal((await tree(w)).branches.length, 1, 'prune --keep-turns leaves branches alone')
    await w.okAsync('prune', w.ws, '--older-than', '1')
    t.equal((await tree(w)).branches.length, 1, 'a branch left today is younger than a day')
    const before = JSON.parse(await w.okAsync('status', w.ws, '--json')).storeBytes
    const out = JSON.parse(await w.okAsync('prune', w.ws, '--keep-branches', '0', '--json'))[0]
    t.equal(out.branchesDropped, 1, 'prune --keep-branches 0 drops it')
    t.equal((await tree(w)).branches.length, 0)
    const after = JSON.parse(await w.okAsync('status', w.ws, '--json')).storeBytes
    t.ok(after < before - 200000, `and its data goes (${before} → ${after} bytes)`)
    t.equal((await w.cpfsAsync('redo', w.ws)).code, 1, 'redo has nothing to go back to')
    t.equal((await w.cpfsAsync('fsck', w.ws)).code, 0, 'fsck: nothing wrong')
  })

  t.test('prune merges turns a branch shares with the head into it too: every branch turn still rewinds byte-exact', async t => {
    const { w, starts } = await mountedProject(t)
    await w.okAsync('rewind', '6', w.ws)
    await w.runAsync('echo other > other.txt')
    await w.okAsync('unmount', w.ws)
    const kept = (await tree(w)).branches[0]
    t.match(kept, { shared: 5, length: 8 })
    await w.okAsync('prune', w.ws, '--keep-turns', '3')
    const b = (await tree(w)).branches[0]
    t.equal(b.branch, kept.branch, 'the branch is kept')
    t.equal(b.length, 8 - 4 + 1, 'its turns 1-4 were merged with the head\'s')
    for (const [turn, was] of [[2, 5], [3, 6], [5, 8]]) {
      await w.okAsync('rewind', `${b.branch}:${turn}`, w.ws)
      t.same(manifest(w.ws, NO_GIT), starts[was - 1], `${b.branch}:${turn} (was turn ${was}) is byte-exact`)
    }
    t.equal((await w.cpfsAsync('fsck', w.ws)).code, 0, 'fsck: nothing wrong')
  })

  t.test('retention by default: status says what goes next; the daemon applies it after an unmount has answered, once per interval', async t => {
    const w = workspace(t, PROJECT)
    const config = (prune: Record<string, unknown>): void => fs.writeFileSync(join(w.home, 'config.json'), JSON.stringify({ prune }))
    await w.okAsync('mount', w.ws)
    for (const v of ['one', 'two', 'three']) {
      await w.runAsync(`echo ${v} > side.txt && head -c 200000 /dev/urandom > ${v}.bin`)
      await w.okAsync('turn', w.ws)
    }
    await w.okAsync('rewind', '2', w.ws)
    await w.runAsync('echo other > other.txt')
    await w.okAsync('turn', w.ws)
    await w.okAsync('rewind', '2', w.ws)
    let st = JSON.parse(await w.okAsync('status', w.ws, '--json'))
    t.equal(st.branches, 2)
    t.match(st.retention, { branches: [], turns: 0, maxBytes: 10 * 1024 ** 3, settings: { olderThanDays: 30, intervalHours: 24 } }, 'the defaults: a month, 10 GiB, once a day; nothing to drop yet')
    t.ok(st.retention.dueAt > Date.now() + 23 * 3600_000, 'the first run is a day after the store was made')
    config({ keepBranches: 1, intervalHours: 0 })
    st = JSON.parse(await w.okAsync('status', w.ws, '--json'))
    t.equal(st.retention.branches.length, 1, 'with keepBranches 1: the branch left first goes')
    t.match(await w.okAsync('status', w.ws), /retention +at the next unmount: drops branch b\d+ \(drops what is older than 30 days, beyond 10 GiB, past 1 branch\)/, 'and says so')
    const pid = daemonPid(w.home)
    const bytes = JSON.parse(await w.okAsync('status', w.ws, '--json')).storeBytes
    await w.okAsync('unmount', w.ws) // answers first; the daemon then applies retention and exits
    t.ok(await until(() => { try { process.kill(pid, 0); return false } catch { return true } }), 'the daemon exits after retention')
    const after = JSON.parse(await w.okAsync('log', '--all', '--json', w.ws)).branches
    t.equal(after.length, 1, 'it dropped one branch, as status said')
    t.ok(JSON.parse(await w.okAsync('status', w.ws, '--json')).storeBytes < bytes, 'and collected its data')
    config({ keepBranches: 0, intervalHours: 24 })
    await w.okAsync('mount', w.ws)
    await w.okAsync('unmount', w.ws)
    t.equal(JSON.parse(await w.okAsync('log', '--all', '--json', w.ws)).branches.length, 1, 'within the interval it does not run again')
    t.match(await w.okAsync('status', w.ws), /retention +at the first unmount after \d{4}-\d\d-\d\d \d\d:\d\d: drops branch b\d+/, 'status says when it will')
    config({ auto: false, intervalHours: 0, keepBranches: 0 })
    await w.okAsync('mount', w.ws)
    await w.okAsync('unmount', w.ws)
    t.equal(JSON.parse(await w.okAsync('log', '--all', '--json', w.ws)).branches.length, 1, '"auto": false: never by itself')
    t.match(await w.okAsync('status', w.ws), /retention +never by itself/)
    fs.writeFileSync(join(w.home, 'config.json'), '{"prune": 5}')
    const bad = (await w.cpfsAsync('prune', w.ws))
    t.equal(bad.code, 1, 'a bad "prune" setting: prune refuses')
    t.match(bad.stderr, /^cpfs: "prune" in config.json is not an object \(write it like/)
  })
}

