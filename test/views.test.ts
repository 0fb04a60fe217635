// Views (issue 23, part 2): `cpfs view TURN` mounts the tree at the start of a turn read-only,
// outside the workspace, served by the workspace's daemon. Real tools read the old state
// (cat, ls, git, node) while the live tree keeps its own; every kind of write is refused;
// several views at once, listed and closed; unmount and kill -9 leave no view behind; any
// branch's turn; bad input refused in one line, changing nothing.
import t from 'tap'
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CLI, daemonPid, exited, fuseAvailable, manifest, until, workspace, type Env } from './helpers.js'

const PROJECT = `git init -q && git config user.email t@t && git config user.name t
  echo 'console.log(1)' > app.js && echo '# app' > README.md && git add -A && git commit -qm one`

/** The mounts (workspace and views) below this test's directories, from the mount table. */
function mountsOf (w: Env): string[] {
  const base = join(w.ws, '..')
  return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map(l => l.split(' ')[4]).filter(p => p !== undefined && p.startsWith(base + '/'))
}

function viewMounts (): string[] {
  return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(l => / - fuse\.cpfs cpfs-view:/.test(l)).map(l => l.split(' ')[4])
}

/**
 * Mounted, three turns: turn 2 starts with app.js printing 2 in a second commit; turn 3 starts
 * with app.js printing 3 (uncommitted) and new.txt; the head (3) then deletes README.md.
 */
async function threeTurns (t: Parameters<typeof workspace>[0]): Promise<Env> {
  const w = workspace(t, PROJECT)
  await w.okAsync('mount', w.ws)
  await w.runAsync("echo 'console.log(2)' > app.js && git commit -qam two")
  await w.okAsync('turn', w.ws, '-m', 'second version')
  await w.runAsync("echo 'console.log(3)' > app.js && echo new > new.txt")
  await w.okAsync('turn', w.ws, '-m', 'third version')
  await w.runAsync('rm README.md')
  return w
}

async function views (w: Env): Promise<Array<{ turn: number, ref: string, at: string, path: string, label: string }>> {
  return JSON.parse(await w.okAsync('view', '--list', '--json', w.ws))
}

// The cases share nothing (a workspace and daemon each) and mostly wait on daemons.
t.jobs = 3

if (fuseAvailable(t)) {
  t.test('a view shows the old tree to real tools; the live tree keeps its own; every write is refused', async t => {
    const w = await threeTurns(t)
    const live = manifest(w.ws)
    const liveGit = await w.runAsync('git status --porcelain')
    const v = (await w.okAsync('view', '2', w.ws))
    t.ok(v.startsWith(w.home + '/'), `the default place is under the workspace's cpfs directory (${v})`)
    t.equal(await w.runAsync('cat app.js', v), 'console.log(2)\n', 'cat: the file as turn 2 began')
    t.equal(await w.runAsync('node app.js', v), '2\n', 'node runs the old script')
    t.same((await w.runAsync('ls', v)).split('\n').filter(Boolean), ['README.md', 'app.js'], 'ls: README.md still there, new.txt not yet')
    t.equal((await w.runAsync('git log --format=%s', v)).trim(), 'two\none', 'git log: both commits')
    t.equal((await w.runAsync('git status --porcelain', v)).trim(), '', 'git status: the tree as committed then')
    const inView = JSON.parse(await w.runAsync(`node ${CLI} status --json`, v))
    t.match(inView, { workspace: w.ws, mounted: true }, 'a cpfs command inside a view works on the workspace serving it, never on the view')
    t.equal(await w.runAsync('cat app.js'), 'console.log(3)\n', 'the live tree keeps its state')
    t.notOk(fs.existsSync(join(w.ws, 'README.md')), 'and its deletion')
    const before = manifest(v)
    const writes: Array<[string, string]> = [
      ['echo >', 'echo x > app.js'], ['echo > new', 'echo x > other.txt'], ['touch', 'touch app.js'], ['rm', 'rm app.js'],
      ['mkdir', 'mkdir d'], ['mv', 'mv app.js b.js'], ['chmod', 'chmod 600 app.js'], ['ln -s', 'ln -s app.js l'],
      ['truncate', 'truncate -s 0 app.js'], ['node writeFileSync', "node -e \"require('fs').writeFileSync('app.js', 'x')\""]
    ]
    for (const [what, cmd] of writes) {
      const r = await w.shAsync(cmd, v)
      t.not(r.code, 0, `${what} fails`)
      t.match(r.stderr, /Read-only file system|EROFS/, `${what}: read-only file system`)
    }
    t.same(manifest(v), before, 'the view is unchanged')
    t.same(manifest(w.ws), live, 'the live tree is unchanged')
    t.equal(await w.runAsync('git status --porcelain'), liveGit, 'git status in the workspace: as before the view')
    t.match(await w.okAsync('diff', '--stat', w.ws), /README\.md/, 'the head turn records its own change only')
    t.notMatch(await w.okAsync('diff', '--stat', w.ws), /views/, 'nothing of the view in the workspace\'s history')
    await w.okAsync('unmount', w.ws)
    t.same(mountsOf(w), [], 'unmount took the view down with the workspace')
    t.notOk(fs.existsSync(v), 'and removed the directory it made')
  })

  t.test('several views, --list, --close PATH, --close, and unmount closing the rest', async t => {
    const w = await threeTurns(t)
    const base = join(w.ws, '..')
    const given = join(base, 'v2')
    const empty = join(base, 'empty')
    fs.mkdirSync(empty)
    const v1 = await w.okAsync('view', '1', w.ws)
    t.equal(await w.okAsync('view', '2', given, w.ws), given, 'a new directory named: made')
    t.equal(await w.okAsync('view', '3', empty, w.ws), empty, 'an empty directory named: used')
    t.equal(await w.runAsync('cat app.js', v1), 'console.log(1)\n')
    t.equal(await w.runAsync('cat app.js', given), 'console.log(2)\n')
    t.equal(await w.runAsync('cat app.js new.txt', empty), 'console.log(3)\nnew\n')
    let list = await views(w)
    t.same(list.map(v => [v.ref, v.at, v.path]), [['1', 'start', v1], ['2', 'start', given], ['3', 'start', empty]], '--list: turn, start, path')
    t.equal(list[1].label, 'third version', 'with the turn\'s label')
    t.match(await w.okAsync('view', '--list', w.ws), /^2\s+start\s+\S+v2\s+third version$/m, 'as text too')
    t.match(await w.okAsync('view', '--close', given), /closed .*v2/, '--close PATH (the workspace found from the view)')
    t.notOk(fs.existsSync(given), 'the directory it made is gone')
    list = await views(w)
    t.same(list.map(v => v.path), [v1, empty], 'the others stay open')
    const closed = JSON.parse(await w.okAsync('view', '--close', '--json', w.ws))
    t.same(closed.map((v: { path: string }) => v.path).sort(), [v1, empty].sort(), '--close alone closes every view')
    t.ok(fs.existsSync(empty) && fs.readdirSync(empty).length === 0, 'the directory it was given stays, empty')
    t.same(viewMounts().filter(p => p.startsWith(base)), [], 'no view in the mount table')
    await w.okAsync('view', '1', w.ws)
    await w.okAsync('view', '2', given, w.ws)
    // A shell inside a view keeps it busy: unmount detaches it anyway (the daemon must end).
    const busy = spawn('bash', ['-c', 'sleep 600'], { cwd: given, stdio: 'ignore' })
    t.teardown(() => { busy.kill('SIGKILL') })
    t.ok(await until(() => { try { return fs.readlinkSync(`/proc/${busy.pid}/cwd`) === given } catch { return false } }), 'a shell is inside a view')
    await w.okAsync('unmount', w.ws)
    busy.kill('SIGKILL')
    t.same(mountsOf(w), [], 'unmount closed every view')
    t.same(JSON.parse(fs.readFileSync(join(w.home, fs.readdirSync(w.home).find(d => fs.existsSync(join(w.home, d, 'views.json')))!, 'views.json'), 'utf8')), [], 'views.json lists none')
  })

  t.test('views of a branch\'s turns, and of the end of a turn; a view stays as it was opened; kill -9 leaves none behind', async t => {
    const w = await threeTurns(t)
    const base = join(w.ws, '..')
    await w.okAsync('rewind', '2', w.ws)
    await w.runAsync("echo 'console.log(20)' > app.js")
    const { branches } = JSON.parse(await w.okAsync('log', '--all', '--json', w.ws))
    const b = branches[0].branch as string
    const v = await w.okAsync('view', `${b}:3`, join(base, 'b3'), w.ws)
    t.equal(await w.runAsync('cat app.js new.txt', v), 'console.log(3)\nnew\n', `${b}:3: the start of the branch's turn 3`)
    const tip = await w.okAsync('view', b, join(base, 'tip'), w.ws)
    t.notOk(fs.existsSync(join(tip, 'README.md')), `${b}: its tip, the deletion included`)
    await w.runAsync('head -c 300000 /dev/urandom > blob.bin && sync blob.bin') // chunks of the head's open turn
    const sum = await w.runAsync('sha256sum < blob.bin')
    const now = await w.okAsync('view', '-1', '--end', join(base, 'now'), w.ws)
    t.equal(await w.runAsync('cat app.js', now), 'console.log(20)\n', '--end of the head turn: the tree now')
    await w.runAsync("echo 'console.log(21)' > app.js && rm blob.bin && sync .") // the head drops the blob's chunks
    t.equal(await w.runAsync('sha256sum < blob.bin', now), sum, 'the view of the head as it was still reads them')
    await w.okAsync('turn', w.ws)
    await w.okAsync('rewind', '1', w.ws)
    t.equal(await w.runAsync('cat app.js', now), 'console.log(20)\n', 'the view keeps what it showed, whatever the workspace does')
    t.equal(await w.runAsync('cat app.js', v), 'console.log(3)\n')
    t.same((await views(w)).map(x => [x.ref, x.at]), [[`${b}:3`, 'start'], [b, 'end'], ['2', 'end']], '--list names each')

    // kill -9 of the daemon with views open: the next mount clears them.
    const made = await w.okAsync('view', '1', w.ws)
    const pid = daemonPid(w.home)
    process.kill(pid, 'SIGKILL')
    t.ok(await exited(pid), 'the daemon is gone')
    t.ok([v, made].every(p => viewMounts().includes(p)), 'its views are still in the mount table (dead)')
    await w.okAsync('mount', w.ws)
    t.same(viewMounts().filter(p => p.startsWith(base)), [], 'the new daemon detached them')
    t.notOk(fs.existsSync(made), 'and removed the directory it had made')
    t.same(await views(w), [], 'no view open')
    const again = await w.okAsync('view', `${b}:3`, v, w.ws)
    t.equal(await w.runAsync('cat app.js', again), 'console.log(3)\n', 'the same path serves a new view')
    // Killed again, then unmounted with no mount in between: its views go with the stale mount.
    const pid2 = daemonPid(w.home)
    process.kill(pid2, 'SIGKILL')
    t.ok(await exited(pid2), 'the daemon is gone again')
    t.ok(viewMounts().includes(again), 'its view is a dead mount now')
    await w.okAsync('unmount', w.ws)
    t.same(mountsOf(w), [], 'cpfs unmount of the stale workspace removed its view too')
    t.notOk(fs.existsSync(again), 'and the directory the view had made')
  })

  t.test('bad input: one line each, non-zero, nothing changed', async t => {
    const w = await threeTurns(t)
    const base = join(w.ws, '..')
    fs.mkdirSync(join(base, 'full'))
    fs.writeFileSync(join(base, 'full', 'x'), 'x')
    fs.writeFileSync(join(base, 'file'), 'x')
    const other = await w.okAsync('view', '1', join(base, 'other'), w.ws)
    const live = manifest(w.ws)
    const cases: Array<[string[], RegExp, RegExp]> = [
      [['view', '2', join(w.ws, 'sub'), w.ws], /is inside the workspace/, /outside the workspace/],
      [['view', '2', w.ws + '/', w.ws], /is inside the workspace/, /outside the workspace/],
      [['view', '2', base, w.ws], /is above the workspace/, /outside the workspace/],
      [['view', '2', join(other, 'x'), w.ws], /inside the cpfs mount/, /outside the workspace/],
      [['view', '2', join(base, 'full'), w.ws], /not empty/, /new or empty directory/],
      [['view', '2', join(base, 'file'), w.ws], /is a file/, /new or empty directory/],
      [['view', '2', join(base, 'no', 'such'), w.ws], /does not exist/, /parent directory/],
      [['view', '99', join(base, 'v99'), w.ws], /turn 99 does not exist/, /cpfs log --all/],
      [['view', 'b7:1', join(base, 'v99'), w.ws], /no branch b7/, /cpfs log --all/],
      [['view', '--close', join(base, 'full'), w.ws], /is not an open view/, /cpfs view --list/],
      [['mount', other], /a read-only view of an old turn; it cannot be a workspace/, /mount the workspace itself/]
    ]
    for (const [args, why, hint] of cases) {
      const r = await w.cpfsAsync(...args)
      t.equal(r.code, 1, `cpfs ${args.join(' ')}: exit 1`)
      t.match(r.stderr, why, 'names the cause')
      t.match(r.stderr, hint, 'and the fix')
      t.equal(r.stderr.trim().split('\n').length, 1, 'in one line')
      t.equal(r.stdout, '', 'prints nothing else')
    }
    t.same((await views(w)).map(v => v.path), [other], 'no view was added')
    t.same(viewMounts().filter(p => p.startsWith(base)), [other], 'nor mounted')
    t.same(fs.readdirSync(join(base, 'full')), ['x'], 'the directories named are untouched')
    t.notOk(fs.existsSync(join(base, 'v99')), 'nothing made for an unknown turn')
    t.same(manifest(w.ws), live, 'the workspace is unchanged')
    await w.okAsync('unmount', w.ws)
    const r = await w.cpfsAsync('view', '1', w.ws)
    t.equal(r.code, 1, 'not mounted: refused')
    t.match(r.stderr, new RegExp(`is not mounted.*\\(cpfs mount ${w.ws}\\)`), 'one line: the cause, and cpfs mount DIR as the fix')
    t.equal(r.stderr.trim().split('\n').length, 1)
    t.same(mountsOf(w), [], 'no mount left')
  })
}
