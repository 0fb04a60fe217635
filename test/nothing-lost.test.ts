// Nothing the user did is lost or silently overwritten: second sessions, discard, writes that
// bypass the mount, long names and paths, extended attributes, real hard links — each as a
// user would type it, checking the real directory at the end.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { CLI, fuseAvailable, manifest, sleep, workspace } from './helpers.js'

function tool (t: any, name: string, pkg = 'attr acl'): boolean {
  if (spawnSync('sh', ['-c', `command -v ${name}`]).status === 0) return true
  if (process.env.CI) t.fail(`${name} is missing (.ci/run installs it: apt-get install ${pkg})`)
  else {
    process.stderr.write(`\n!!! SKIPPING: ${name} is not installed (apt-get install ${pkg})\n\n`)
    t.skip(`SKIPPED LOUDLY: ${name} is not installed (apt-get install ${pkg})`)
  }
  return false
}

if (fuseAvailable(t)) {
  t.test('a second session\'s writes are applied (mount, unmount, mount, write, unmount)', async t => {
    const w = workspace(t, 'echo a > a.txt')
    w.ok('mount', w.ws)
    w.run('echo b > b.txt')
    // The file, and the workspace root's new mtime (a directory's times move when entries are added).
    t.match(w.ok('unmount', w.ws), /applied 2 operations/)
    w.ok('mount', w.ws)
    w.run('echo c > c.txt')
    const st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(st.pending, 1, 'the second session\'s turn is pending')
    t.match(w.ok('unmount', w.ws), /applied 2 operations/, 'and unmount applies it')
    t.equal(fs.readFileSync(join(w.ws, 'c.txt'), 'utf8'), 'c\n', 'c.txt reached the real directory')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).pending, 0, 'nothing is pending after')
    // The history is consistent with the real directory: an offline rewind blames nobody.
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    const turnOfC = log.find((x: any) => x.changes.some((c: any) => c.path === '/c.txt')).turn
    w.ok('rewind', String(turnOfC), w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'c.txt')), 'rewind to the start of that turn removes c.txt')
    t.ok(fs.existsSync(join(w.ws, 'b.txt')), 'and keeps b.txt')
  })

  t.test('cpfs exec twice (npm ci, then npm test): both sessions reach the real directory', async t => {
    const w = workspace(t, 'echo a > a.txt')
    t.equal(w.cpfs('exec', w.ws, '--', 'sh', '-c', 'echo one > one.txt').code, 0)
    t.equal(w.cpfs('exec', w.ws, '--', 'sh', '-c', 'echo two > two.txt && cat one.txt > copy.txt').code, 0)
    t.equal(w.run('cat one.txt two.txt copy.txt'), 'one\ntwo\none\n', 'every session applied')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).pending, 0)
  })

  t.test('--discard throws away: the next session starts from the real directory; redo brings it back', async t => {
    const w = workspace(t, 'echo a > a.txt')
    const before = manifest(w.ws)
    const r = w.cpfs('exec', w.ws, '--discard', '--', 'sh', '-c', 'echo junk > junk.txt')
    t.equal(r.code, 0)
    t.match(r.stderr, /kept as a branch \(cpfs redo brings it back/, 'exec says how to get it back')
    w.ok('mount', w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'junk.txt')), 'the next mount does not show the discarded file')
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws), before, 'a plain unmount applies nothing discarded')
    const d = w.cpfs('unmount', w.ws, '--discard')
    t.equal(d.code, 0, 'discarding with nothing mounted and nothing pending is fine')
    // Discard in a mounted session, then bring it back.
    w.ok('mount', w.ws)
    w.run('echo work > work.txt')
    t.match(w.ok('unmount', w.ws, '--discard'), /1 turn set aside as a branch \(cpfs redo brings it back/)
    t.same(manifest(w.ws), before, 'discard leaves the real directory as it was')
    w.ok('redo', w.ws)
    t.equal(w.run('cat work.txt'), 'work\n', 'redo applies the discarded work to the real directory')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).pending, 0)
  })

  t.test('a write that bypasses the mount is never overwritten silently', async t => {
    const w = workspace(t, 'echo orig > f.txt && echo keep > g.txt')
    // A shell whose cwd was inside the directory before the mount still sees the real files.
    const holder = spawn('bash', ['-c', 'read line; eval "$line"'], { cwd: w.ws, stdio: ['pipe', 'ignore', 'ignore'] })
    t.teardown(() => holder.kill('SIGKILL'))
    await sleep(200)
    w.ok('mount', w.ws)
    w.run('echo mounted > f.txt && echo new-in-mount > n.txt')
    const done = new Promise(resolve => holder.on('exit', resolve))
    holder.stdin.write('echo outside > f.txt; echo outside-new > n.txt\n')
    await done
    const r = w.cpfs('unmount', w.ws)
    t.equal(r.code, 1, 'unmount refuses')
    t.match(r.stderr, /^cpfs: the real directory changed outside cpfs: .*f\.txt \(content changed\).*n\.txt \(was created \(file\)\)/, 'naming both paths and why')
    t.equal(fs.readFileSync(join(w.ws, 'f.txt'), 'utf8'), 'outside\n', 'the outside write is intact')
    t.equal(fs.readFileSync(join(w.ws, 'n.txt'), 'utf8'), 'outside-new\n')
    // --force: the mount's version wins, and the outside one is kept in the history.
    const f = w.cpfs('unmount', w.ws, '--force')
    t.equal(f.code, 0, f.stderr)
    t.equal(fs.readFileSync(join(w.ws, 'f.txt'), 'utf8'), 'mounted\n', '--force applies the mount\'s version')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    const kept = log.find((x: any) => /outside cpfs/.test(x.prompt ?? ''))
    t.ok(kept, 'the outside versions are a turn of their own')
    const diff = JSON.parse(w.ok('diff', String(kept.turn), w.ws, '--json'))
    t.same(diff.map((c: any) => c.path).sort(), ['/f.txt', '/n.txt'], 'with exactly the outside changes')
    t.match(w.ok('diff', String(kept.turn), w.ws), /-orig\n\+outside/, 'from the real original, not from a base that never existed')
    w.ok('rewind', String(kept.turn + 1), w.ws)
    t.equal(w.run('cat f.txt'), 'outside\n', 'rewinding to the end of that turn gives the outside version back')
  })

  t.test('edits made while nothing is mounted show in the next session, recorded as a turn', async t => {
    const w = workspace(t, 'echo one > a.txt && mkdir d && echo x > d/x')
    w.ok('mount', w.ws)
    w.run('echo agent > a.txt && mkdir d/new && echo y > d/new/y')
    w.ok('unmount', w.ws)
    // The user edits what the agent wrote, and adds and removes files, with no mount.
    w.run('echo user > a.txt && rm -r d/new && echo z > d/z && rm d/x')
    const r = w.cpfs('mount', w.ws)
    t.equal(r.code, 0)
    t.equal(w.run('cat a.txt'), 'user\n', 'the mount shows the user\'s edit, not cpfs\'s older version')
    t.equal(w.run('ls d'), 'z\n', 'and the files added and removed outside')
    w.run('echo more >> a.txt')
    w.ok('unmount', w.ws)
    t.equal(w.run('cat a.txt'), 'user\nmore\n', 'the session continued from the user\'s version')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.ok(log.some((x: any) => /changes made outside cpfs/.test(x.prompt ?? '')), 'the outside edits are a turn in the log')
  })

  t.test('names over 255 bytes are refused at the syscall; deep paths work end to end', async t => {
    const w = workspace(t, 'echo a > a.txt')
    w.ok('mount', w.ws)
    const long = 'n'.repeat(256)
    const r = w.sh(`mkdir sub && touch sub/${long}`)
    t.not(r.code, 0)
    t.match(r.stderr, /File name too long/, 'ENAMETOOLONG inside a directory made in the mount')
    t.match(w.sh(`touch ${long}`).stderr, /File name too long/, 'and at the root')
    t.equal(w.sh(`mv a.txt ${long}`).code, 1, 'and for a rename')
    // A path longer than PATH_MAX, made by walking down with relative paths.
    w.run(`python3 -c "
import os
for i in range(40):
    os.mkdir('d' * 120); os.chdir('d' * 120)
open('deep.txt', 'w').write('deep')
"`)
    t.equal(w.cpfs('log', w.ws).code, 0, 'log works')
    t.equal(w.cpfs('diff', w.ws, '--stat').code, 0, 'diff works')
    t.equal(w.cpfs('rewind', '1', w.ws, '--dry-run').code, 0, 'a dry run works')
    const u = w.cpfs('unmount', w.ws)
    t.equal(u.code, 0, u.stderr)
    t.equal(w.run(`python3 -c "
import os
for i in range(40): os.chdir('d' * 120)
print(open('deep.txt').read())
"`), 'deep\n', 'the deep file reached the real directory')
    t.equal(w.run('find . -name ".cpfs-tmp-*" | wc -l').trim(), '0', 'no temporary files')
  })

  t.test('a plan that fails is rolled back, and the workspace stays usable', async t => {
    const w = workspace(t, 'mkdir -p keep && echo a > keep/a && chmod 750 keep')
    const before = manifest(w.ws)
    w.ok('mount', w.ws)
    w.run('mkdir sub && echo 1 > sub/one && echo 2 > sub/two && chmod 700 keep && echo b > keep/a')
    t.equal(w.cpfs('unmount', w.ws, '--discard').code, 0)
    // Bring the work back with an offline redo whose plan the filesystem refuses halfway.
    const redo = spawnSync(process.execPath, [CLI, 'redo', w.ws], { env: { ...w.env, CPFS_TEST_FAIL_AT_OP: '2' }, encoding: 'utf8' })
    t.equal(redo.status, 1, 'the plan fails')
    t.match(redo.stderr, /^cpfs: cannot write the real directory: write sub\/one: EIO: injected failure; rolled back, the real directory is as it was \(/, 'one line: the operation, its path, the cause, and that it was rolled back')
    t.same(manifest(w.ws), before, 'the real directory is exactly as before: no half-applied files, modes as they were')
    t.equal(w.run('find . -name ".cpfs-tmp-*" | wc -l').trim(), '0', 'no temporary files')
    t.equal(w.cpfs('status', w.ws).code, 0, 'status works')
    t.equal(w.cpfs('log', w.ws).code, 0, 'log works')
    w.ok('redo', w.ws)
    t.equal(w.run('cat sub/one keep/a'), '1\nb\n', 'run again without the fault, it applies')
    t.equal(w.cpfs('forget', w.ws, '--yes', '--force').code, 0, 'forget works')
  })

  t.test('extended attributes: read from real files, set in the mount, rewound, applied, never stripped', async t => {
    if (!tool(t, 'setfattr') || !tool(t, 'setfacl') || !tool(t, 'setcap')) return
    const w = workspace(t, 'echo data > f && setfattr -n user.lower -v real f && cp /bin/true tool && setcap cap_net_raw+ep tool && echo acl > shared && setfacl -m u:65534:r shared')
    w.ok('mount', w.ws)
    t.equal(w.run('getfattr -n user.lower --only-values f'), 'real', 'a real file\'s xattr is readable in the mount')
    t.match(w.run('getcap tool'), /cap_net_raw[=+]ep/, 'and its capability')
    t.match(w.run('getfacl -pn shared'), /user:65534:r--/, 'and its ACL')
    w.run('setfattr -n user.x -v 1 f && echo more >> f')
    t.equal(w.run('getfattr -n user.x --only-values f'), '1', 'setfattr works in the mount')
    w.run('cp --preserve=xattr f g && setfacl -m u:65534:rw shared && echo touch >> shared')
    t.equal(w.run('getfattr -n user.x --only-values g'), '1', 'cp --preserve=xattr keeps them')
    w.ok('turn', w.ws)
    w.run('setfattr -x user.x f')
    t.equal(w.sh('getfattr -n user.x f').code, 1, 'removed')
    w.ok('rewind', '2', w.ws)
    t.equal(w.run('getfattr -n user.x --only-values f'), '1', 'a rewind brings it back')
    w.run('echo edit >> tool.txt && chmod 755 tool')
    w.ok('unmount', w.ws)
    t.equal(w.run('getfattr -n user.x --only-values f'), '1', 'applied to the real file')
    t.equal(w.run('getfattr -n user.lower --only-values f'), 'real', 'and the modified file kept its original xattr')
    t.equal(w.run('getfattr -n user.x --only-values g'), '1', 'the copy has it too')
    t.match(w.run('getcap tool'), /cap_net_raw[=+]ep/, 'the binary kept its capability')
    t.match(w.run('getfacl -pn shared'), /user:65534:rw-/, 'the ACL set in the mount is on the real file')
    t.equal(w.run('cat shared'), 'acl\ntouch\n')
  })

  t.test('unmount keeps the real directory\'s hard links', async t => {
    const w = workspace(t, 'echo one > a && ln a b && mkdir d && ln a d/c')
    const ino = fs.statSync(join(w.ws, 'a')).ino
    w.ok('mount', w.ws)
    w.run('echo two >> a')
    w.ok('unmount', w.ws)
    t.equal(w.run('cat a b d/c'), 'one\ntwo\n'.repeat(3), 'an edit through one name shows through every name')
    t.equal(fs.statSync(join(w.ws, 'b')).ino, ino, 'one inode, as before')
    t.equal(fs.statSync(join(w.ws, 'a')).nlink, 3, 'with its three links')
    t.same(JSON.parse(w.ok('status', w.ws, '--json')).pending, 0)
    // The other names changed with it: that is not an outside change.
    w.ok('mount', w.ws)
    w.run('echo three >> a')
    t.equal(w.cpfs('unmount', w.ws).code, 0, 'the next session applies without a drift complaint')
    t.equal(w.run('cat b'), 'one\ntwo\nthree\n')
  })

  t.test('a file written with the same bytes as one just removed keeps them (deduplicated chunks)', async t => {
    // b's new byte is the chunk a held; rm a frees that chunk while b's write is not in the
    // store yet. The close of b must store the chunk again, not count on the freed one.
    const w = workspace(t)
    w.ok('mount', w.ws)
    // One process, so that the unlink comes within microseconds of the write (before the
    // daemon's next full batch) and the close before the unlink's batch reaches LevelDB.
    // The fsync of a returns once a's batch is in LevelDB (a synced batch on the daemon's
    // ordered chain), which is what b's write must find; the fsync of the directory at the end
    // is a batch after every unlink's, so their frees are in LevelDB when it returns.
    w.run(`node -e '
      const fs = require("fs")
      for (let i = 0; i < 20; i++) {
        fs.writeFileSync("b" + i, "y")
        const fa = fs.openSync("a" + i, "w")
        fs.writeSync(fa, "x" + i)
        fs.fsyncSync(fa)
        fs.closeSync(fa)
        const fd = fs.openSync("b" + i, "r+")
        fs.writeSync(fd, "x" + i, 0)
        fs.unlinkSync("a" + i)
        fs.closeSync(fd)
      }
      const dir = fs.openSync(".", "r")
      fs.fsyncSync(dir)
      fs.closeSync(dir)'`)
    // Read from the store, not from the kernel's page cache, which still holds what was
    // written: these files' pages only are dropped (not the host's whole cache), and fincore
    // shows that none is left.
    const names = Array.from({ length: 20 }, (_, i) => `b${i}`)
    w.run(`python3 -c '
import os, sys
for name in sys.argv[1:]:
    fd = os.open(name, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' ${names.join(' ')}`)
    if (tool(t, 'fincore', 'util-linux')) {
      const cached = w.run(`fincore --bytes --noheadings --output RES,FILE ${names.join(' ')}`).split('\n').filter(l => l.trim() && !/^\s*0\s/.test(l))
      t.same(cached, [], 'none of the files is in the page cache')
    }
    const read = () => Array.from({ length: 20 }, (_, i) => w.sh(`cat b${i}`)).map((r, i) => r.code === 0 && r.stdout === `x${i}` ? '' : `b${i}: ${r.stdout} ${r.stderr.trim()}`).filter(Boolean)
    t.same(read(), [], 'every file reads back its bytes')
    const u = w.cpfs('unmount', w.ws)
    t.equal(u.code, 0, `unmount applies them: ${u.stderr.trim()}`)
    t.same(read(), [], 'and they reach the real directory')
  })
}
