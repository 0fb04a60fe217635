// Crashes: kill -9 of the daemon never loses what fsync or cpfs turn returned, never
// corrupts the store, and a remount brings the head view back. A plan killed between any
// two operations is finished by the next command: the real directory ends byte-exact at the
// new view, never a mix.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { spawn, spawnSync } from 'node:child_process'
import { CLI, HANG_GUARD_MS, daemonPid, exited, fuseAvailable, inParallel, isMountedAt, manifest, stopDaemon, until, workspace } from './helpers.js'

const TREE = 'mkdir -p a/b && echo 1 > a/b/one && echo 2 > a/two && echo top > top && ln -s top link'

async function kill9 (home: string): Promise<void> {
  const pid = daemonPid(home)
  process.kill(pid, 'SIGKILL')
  if (!await exited(pid)) throw new Error(`the daemon ${pid} is still there ${HANG_GUARD_MS / 1000} s after SIGKILL`)
}

// The writer keeps synced.txt open until the daemon is gone (fstat fails once it is killed),
// so that only its fsync, never its close, can have made the data durable, however long the
// test takes to get there. The shell waits for the flag, or fails if the writer died first.
const FSYNC_WRITER = `python3 - >/dev/null 2>&1 <<'EOF' &
import os, time
fd = os.open('synced.txt', os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b'durable\\n')
os.fsync(fd)
open('fsynced.flag', 'w').close()
while True:
    time.sleep(0.1)
    try:
        os.fstat(fd)
    except OSError:
        break
EOF
while [ ! -e fsynced.flag ]; do kill -0 $! || exit 1; sleep 0.05; done`

// Dozens of kill -9s, remounts and plans: 420 s on a loaded 2-core VM, near tap's 600 s per
// file. A hang guard, not a deadline.
t.setTimeout(1_800_000)
// The cases share nothing (each has its own workspaces, stores and daemons) and spend most of
// their time waiting for commands and daemons: every command runs without blocking (okAsync,
// runAsync, cpfsAsync), so that two cases, and two crash points of a plan, run side by side
// (2 cores: more only waits its turn for them). CPFS_CRASH_JOBS=1 runs it all one at a time.
t.jobs = Number(process.env.CPFS_CRASH_JOBS ?? 2)
const CRASH_POINTS_AT_ONCE = Number(process.env.CPFS_CRASH_JOBS ?? 2)

if (fuseAvailable(t)) {
  t.test('fsync and turn survive kill -9; remount recovers the head view', async t => {
    const w = workspace(t, TREE)
    await w.okAsync('mount', w.ws)
    await w.runAsync('echo sealed > sealed.txt && rm a/two')
    await w.okAsync('turn', w.ws, '-m', 'first')
    // Data that returned from fsync, in a file that is still open when the daemon dies.
    await w.runAsync(FSYNC_WRITER)
    const view = manifest(w.ws, { skip: p => p === 'fsynced.flag' })
    await kill9(w.home)
    const st = JSON.parse(await w.okAsync('status', w.ws, '--json'))
    t.equal(st.mounted, false, 'status: not mounted')
    t.equal(st.stale, true, 'status: a stale mount is reported')
    const r = await w.cpfsAsync('turn', w.ws)
    t.equal(r.code, 1)
    t.match(r.stderr, /^cpfs: the cpfs daemon for .* is not running but its mount is still there \(run cpfs mount/, 'commands on a stale mount explain how to recover')
    t.equal(await w.okAsync('mount', w.ws), '2', 'remount resumes at the head turn')
    t.ok(isMountedAt(w.ws))
    t.equal(await w.runAsync('cat synced.txt'), 'durable\n', 'fsync-ed data survived kill -9')
    t.same(manifest(w.ws, { skip: p => p === 'fsynced.flag' }), view, 'the head view is back')
    const log = JSON.parse(await w.okAsync('log', w.ws, '--json'))
    t.equal(log.length, 2)
    t.equal(log[0].message, 'first', 'the history is intact')
    await w.okAsync('rewind', '1', w.ws)
    t.equal(await w.runAsync('cat a/two'), '2\n', 'rewind to 1 after the crash')
    t.notOk(fs.existsSync(join(w.ws, 'sealed.txt')))
  })

  t.test('a live rewind and a redo survive kill -9 as soon as they return', async t => {
    const w = workspace(t, TREE)
    const start = manifest(w.ws)
    await w.okAsync('mount', w.ws)
    await w.runAsync('echo changed > top && rm -rf a')
    await w.okAsync('turn', w.ws)
    await w.runAsync('echo more > more')
    const head = manifest(w.ws)
    await w.okAsync('rewind', '1', w.ws)
    await kill9(w.home)
    await w.okAsync('mount', w.ws)
    t.same(manifest(w.ws), start, 'the rewound view is what comes back after kill -9')
    await w.okAsync('redo', w.ws)
    await kill9(w.home)
    await w.okAsync('mount', w.ws)
    t.same(manifest(w.ws), head, 'and so is a redo')
  })

  t.test('closed files survive kill -9 without fsync', async t => {
    const w = workspace(t, TREE)
    await w.okAsync('mount', w.ws)
    await w.runAsync('for i in $(seq 1 50); do echo "file $i" > f$i; done && sed -i s/top/TOP/ top')
    const view = manifest(w.ws)
    await kill9(w.home)
    await w.okAsync('mount', w.ws)
    t.same(manifest(w.ws), view, 'every closed file is back after kill -9')
  })

  t.test('writes to files that existed (opened without an OPEN request) survive kill -9 once closed', async t => {
    const w = workspace(t, TREE + '\nfor i in $(seq 1 20); do echo "old $i" > e$i; done')
    await w.okAsync('mount', w.ws)
    // The kernel opens existing files itself (FUSE_NO_OPEN_SUPPORT): appends, O_TRUNC
    // rewrites, in-place writes and ftruncate all reach cpfs with handle 0.
    await w.runAsync('for i in $(seq 1 10); do echo "more $i" >> e$i; done && for i in $(seq 11 15); do echo "new $i" > e$i; done')
    await w.runAsync(`python3 -c "
import os
fd = os.open('e16', os.O_RDWR); os.pwrite(fd, b'XYZ', 1); os.close(fd)
fd = os.open('e17', os.O_RDWR); os.ftruncate(fd, 2); os.close(fd)
fd = os.open('e18', os.O_WRONLY | os.O_APPEND); os.write(fd, b'tail' * 30000); os.close(fd)
"`)
    const view = manifest(w.ws)
    t.match(fs.readFileSync(join(w.ws, 'e16'), 'utf8'), /^oXYZ/, 'the in-place write is in the view')
    await kill9(w.home)
    await w.okAsync('mount', w.ws)
    t.same(manifest(w.ws), view, 'every closed write to an existing file is back after kill -9')
  })

  t.test('what was answered before LevelDB had it comes back from the write-ahead log after kill -9', async t => {
    // The logged batches would go on to LevelDB only after a minute: the kill comes first.
    const w = workspace(t, TREE, { env: { CPFS_WAL_SUBMIT_MS: '60000' } })
    await w.okAsync('mount', w.ws)
    await w.runAsync('for i in $(seq 1 30); do echo "file $i" > f$i; done && mkdir -p new/dir && mv f1 new/dir/moved && chmod 600 f2 && ln -s f3 sym && rm f4 && ln f5 f5-link && sed -i s/top/TOP/ top && rm -r a/b')
    const view = manifest(w.ws)
    const store = fs.readdirSync(w.home).map(n => join(w.home, n, 'store')).find(p => fs.existsSync(p))!
    t.ok(fs.statSync(join(store, 'wal')).size > 0, 'the changes are in the log')
    await kill9(w.home)
    await w.okAsync('mount', w.ws)
    t.same(manifest(w.ws), view, 'every answered change is back after kill -9')
    t.equal(fs.statSync(join(store, 'wal')).size, 0, 'replayed into LevelDB, the log starts over')
    await w.okAsync('unmount', w.ws)
    t.same(manifest(w.ws), view, 'and is applied')
  })

  // Chunk bytes go to pack files before the batch that refers to them (store/packs.ts): kill -9
  // in the middle of a big write leaves a torn pack end at most, never a reference to bytes that
  // are not there. Every block the writer had fsynced comes back byte-exact, and fsck is clean.
  t.test('kill -9 in the middle of a big write: every fsynced block is back byte-exact, fsck finds nothing wrong', async t => {
    const w = workspace(t, TREE)
    await w.okAsync('mount', w.ws)
    const progress = join(w.home, '..', 'fsynced-mib')
    // 1 MiB blocks of seeded random bytes, an fsync every 8 MiB, written down outside the mount.
    const block = 'random.Random(i).randbytes(1 << 20)'
    const writer = spawn('python3', ['-c', `import os, random
fd = os.open('big.bin', os.O_CREAT | os.O_WRONLY, 0o644)
for i in range(1024):
    os.write(fd, ${block})
    if i % 8 == 7:
        os.fsync(fd)
        open('${progress}.tmp', 'w').write(str(i + 1))
        os.rename('${progress}.tmp', '${progress}')`], { cwd: w.ws, stdio: 'ignore' })
    writer.on('error', () => {})
    t.teardown(() => { writer.kill('SIGKILL') })
    const fsynced = (): number => { try { return Number(fs.readFileSync(progress, 'utf8')) } catch { return 0 } }
    await until(() => fsynced() >= 40 || writer.exitCode !== null)
    t.ok(fsynced() >= 40, 'the writer has fsynced 40 MiB and goes on writing')
    await kill9(w.home)
    const durable = fsynced()
    spawnSync('umount', ['-l', w.ws])
    const f = await w.cpfsAsync('fsck', w.ws)
    t.equal(f.code, 0, `fsck finds nothing wrong after the kill: ${f.stdout.trim()}`)
    await w.okAsync('mount', w.ws)
    t.ok(fs.statSync(join(w.ws, 'big.bin')).size >= durable * (1 << 20), `big.bin holds at least the ${durable} fsynced MiB`)
    const bad = await w.runAsync(`python3 -c "
import random
f = open('big.bin', 'rb')
print(sum(f.read(1 << 20) != ${block} for i in range(${durable})))"`)
    t.equal(bad.trim(), '0', `every fsynced MiB reads byte-exact (${durable} checked)`)
    t.equal(await w.runAsync('cat top'), 'top\n', 'the rest of the tree is there')
    await w.okAsync('unmount', w.ws, '--discard')
    t.equal((await w.cpfsAsync('fsck', w.ws)).code, 0, 'and fsck is still clean')
  })

  // Repacking (store/repack.ts, from cpfs prune) copies a pack's live chunks forward, switches
  // their references in one synced batch, then deletes the old pack: killed after either step,
  // nothing is lost and the next prune finishes the job.
  t.test('kill -9 in the middle of a repack, after the copy and after the switch: nothing lost, fsck clean, the next prune finishes', async t => {
    const w = workspace(t, TREE)
    await w.okAsync('mount', w.ws)
    await w.runAsync('head -c 1048576 /dev/urandom > keep.bin')
    const keep = fs.readFileSync(join(w.ws, 'keep.bin'))
    await w.okAsync('turn', w.ws)
    await w.runAsync('head -c 8388608 /dev/urandom > drop.bin')
    await w.okAsync('turn', w.ws)
    await w.okAsync('rewind', '2', w.ws) // drop.bin's turn is rewound away, kept as a branch...
    await w.runAsync('echo after > after.txt') // ...which each prune below drops (--keep-branches 0): its chunks are dead
    await w.okAsync('unmount', w.ws)
    const store = JSON.parse(await w.okAsync('status', w.ws, '--json')).store
    const packs = (): string[] => fs.readdirSync(join(store, 'packs')).sort()
    const before = packs()
    t.equal(before.length, 1, 'keep.bin and drop.bin share one pack, mostly dead now')
    const check = async (what: string): Promise<void> => {
      const f = await w.cpfsAsync('fsck', w.ws)
      t.equal(f.code, 0, `${what}: fsck finds nothing wrong ${f.stdout.trim()}`)
      await w.okAsync('mount', w.ws)
      t.ok(fs.readFileSync(join(w.ws, 'keep.bin')).equals(keep), `${what}: keep.bin reads byte-exact`)
      await w.okAsync('rewind', '1', w.ws)
      t.notOk(fs.existsSync(join(w.ws, 'keep.bin')), `${what}: turn 1 still rewinds`)
      await w.okAsync('redo', w.ws)
      t.ok(fs.readFileSync(join(w.ws, 'keep.bin')).equals(keep), `${what}: and redo brings it back`)
      await w.okAsync('unmount', w.ws)
    }
    for (const at of ['copied', 'switched']) {
      w.env.CPFS_TEST_CRASH_IN_REPACK = at
      const r = await w.cpfsAsync('prune', w.ws, '--keep-branches', '0')
      delete w.env.CPFS_TEST_CRASH_IN_REPACK
      t.equal(r.code, 128, `prune killed after the repack ${at} the live chunks`)
      await check(`killed after the repack ${at} them`)
    }
    const done = await w.cpfsAsync('prune', w.ws, '--keep-branches', '0')
    t.equal(done.code, 0, `the next prune runs through: ${done.stderr}`)
    await check('after the last prune')
    const after = packs()
    t.notOk(after.includes(before[0]), 'the mostly dead pack is gone')
    const bytes = after.reduce((n, p) => n + fs.statSync(join(store, 'packs', p)).size, 0)
    t.ok(bytes < 4 * 1024 * 1024, `what is left is about the live bytes (${bytes})`)
  })

  t.test('a big real file changed in part, then kill -9 and an outside overwrite: the sealed turn keeps its bytes', async t => {
    // 2 MiB of 'A': bigger than the eager capture at the first write, so the turn first points
    // at the real file for the bytes it did not change; the daemon keeps them in the background.
    const w = workspace(t, "python3 -c \"open('big', 'wb').write(b'A' * 2097152)\"")
    await w.okAsync('mount', w.ws)
    await w.runAsync(`python3 -c "import os; fd = os.open('big', os.O_WRONLY); os.pwrite(fd, b'MOUNT', 0); os.close(fd)"`)
    await w.okAsync('turn', w.ws)
    t.ok(await until(async () => !JSON.parse(await w.okAsync('status', w.ws, '--json')).capturing), 'the background capture finished')
    await kill9(w.home)
    await w.runAsync(`umount -l ${w.ws}`)
    await w.runAsync(`python3 -c "open('big', 'wb').write(b'B' * 2097152)"`) // someone edits the real file
    const m = await w.cpfsAsync('mount', w.ws)
    t.equal(m.code, 0, m.stderr)
    await w.okAsync('rewind', '2', w.ws) // the start of turn 2 = the end of turn 1
    const got = fs.readFileSync(join(w.ws, 'big'))
    t.equal(got.subarray(0, 5).toString(), 'MOUNT', 'turn 1\'s change')
    t.ok(got.subarray(5).equals(Buffer.alloc(2097152 - 5, 'A')), 'and the original bytes around it, not the outside ones')
    await w.okAsync('rewind', '1', w.ws)
    t.ok(fs.readFileSync(join(w.ws, 'big')).equals(Buffer.alloc(2097152, 'A')), 'turn 1 began with the original file')
    await w.okAsync('unmount', w.ws, '--discard')
  })

  t.test('kill -9 between any two operations of a plan: the next command finishes it', async t => {
    const SCRIPT = 'rm -rf a/b && mkdir a/b && echo new > a/b/new && echo changed > top && rm link && mkdir link && echo f > link/f && chmod 600 a/two && ln -s a newlink && mkdir -p deep/er && echo x > deep/er/x'
    let crashes = 0
    // Each crash point has its own workspaces: two at a time, in order, none started past the
    // first that completes (the end of the plan).
    await inParallel(100, CRASH_POINTS_AT_ONCE, async i => {
      const w = workspace(t, TREE)
      await w.okAsync('mount', w.ws)
      await w.runAsync(SCRIPT)
      const target = manifest(w.ws)
      await stopDaemon(w.home, w.ws)
      await w.okAsync('unmount', w.ws) // not mounted: applies the pending turn offline
      t.same(manifest(w.ws), target, `no crash injected: the plan applies (sanity, run ${i})`)
      // Same again with a crash after operation i.
      const v = workspace(t, TREE, { env: { CPFS_TEST_CRASH_AFTER_OP: String(i) } })
      await v.okAsync('mount', v.ws)
      await v.runAsync(SCRIPT)
      await stopDaemon(v.home, v.ws)
      const crashed = await v.cpfsAsync('unmount', v.ws)
      if (crashed.code === 0) {
        t.same(manifest(v.ws), target, `operation ${i} is past the end of the plan: it completed`)
        return true
      }
      crashes++
      t.equal(crashed.code, 128, `the applier was killed after operation ${i}`)
      const st = await v.cpfsAsync('status', v.ws, '--json')
      t.equal(st.code, 0, 'status works after the crash')
      t.equal(JSON.parse(st.stdout).interrupted, true, 'and reports the interrupted plan without touching anything')
      const next = await v.cpfsAsync('unmount', v.ws)
      t.equal(next.code, 0, 'the next command that changes something runs')
      t.match(next.stderr, /finished a plan that was interrupted: the real directory now holds the new view/, 'and says which view the directory holds')
      t.same(manifest(v.ws), target, `after a crash at operation ${i} the real directory is byte-exact at the new view`)
      t.equal(JSON.parse(await v.okAsync('status', v.ws, '--json')).pending, 0, 'and nothing is pending')
      if (i === 0) {
        // The pre-session content stays restorable after a crash-and-recover.
        await v.runAsync(`env -u CPFS_TEST_CRASH_AFTER_OP node ${CLI} rewind 1 ${v.ws}`)
        t.equal(fs.readFileSync(join(v.ws, 'top'), 'utf8'), 'top\n', 'offline rewind to turn 1 restores the original')
      }
    })
    t.ok(crashes >= 8, `crashes were injected at every operation (${crashes})`)
  })

  t.test('kill -9 between any two operations of a plan that makes hard links: the next command finishes it, links intact', async t => {
    // A new linked file, a link of a real file that is rewritten too, a name moved off a link.
    const SCRIPT = 'echo n > new && ln new a/new2 && ln top top2 && echo more >> top2 && mkdir d && ln a/two d/two && mv a/two a/moved'
    const names = [['new', 'a/new2'], ['top', 'top2'], ['d/two', 'a/moved']]
    const linked = (ws: string) => names.every(([x, y]) => fs.statSync(join(ws, x)).ino === fs.statSync(join(ws, y)).ino && fs.statSync(join(ws, x)).nlink === 2)
    const anchors = (ws: string) => fs.readdirSync(ws).filter(n => n.startsWith('.cpfs-'))
    let crashes = 0
    await inParallel(100, CRASH_POINTS_AT_ONCE, async i => {
      const v = workspace(t, TREE, { env: { CPFS_TEST_CRASH_AFTER_OP: String(i) } })
      await v.okAsync('mount', v.ws)
      await v.runAsync(SCRIPT)
      const target = manifest(v.ws)
      await stopDaemon(v.home, v.ws)
      const crashed = await v.cpfsAsync('unmount', v.ws)
      if (crashed.code === 0) {
        t.same(manifest(v.ws), target, `operation ${i} is past the end of the plan: it completed`)
        t.ok(linked(v.ws), 'with its links')
        return true
      }
      crashes++
      t.equal(crashed.code, 128, `the applier was killed after operation ${i}`)
      const next = await v.cpfsAsync('unmount', v.ws)
      t.equal(next.code, 0, `the next command finishes it (${next.stderr.trim()})`)
      t.same(manifest(v.ws, { skip: p => p.startsWith('.cpfs-') }), target, `after a crash at operation ${i} the real directory is byte-exact at the new view`)
      t.ok(linked(v.ws), 'every pair of names is one real inode with nlink 2')
      t.same(anchors(v.ws), [], 'no anchor or temporary file is left')
      t.equal(JSON.parse(await v.okAsync('status', v.ws, '--json')).pending, 0, 'nothing is pending')
      await v.runAsync(`env -u CPFS_TEST_CRASH_AFTER_OP node ${CLI} rewind 1 ${v.ws}`)
      t.equal(fs.readFileSync(join(v.ws, 'top'), 'utf8'), 'top\n', 'and an offline rewind to turn 1 brings the original back, without a drift complaint')
      t.equal(fs.statSync(join(v.ws, 'top')).nlink, 1, 'with one name')
    })
    t.ok(crashes >= 6, `crashes were injected at every operation (${crashes})`)
  })
}
