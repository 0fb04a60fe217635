// Bad input never costs data: each case gets one line `cpfs: <what> (<fix>)`, a non-zero
// exit, no stack trace, and leaves the workspace and its history unchanged.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { CLI, HANG_GUARD_MS, ROOT, fuseAvailable, isMountedAt, manifest, sleep, workspace, type Env, type Run } from './helpers.js'

function oneLineError (t: any, r: Run, pattern: RegExp, what: string): void {
  t.not(r.code, 0, `${what}: non-zero exit`)
  const lines = r.stderr.trim().split('\n')
  t.equal(lines.length, 1, `${what}: exactly one line on stderr (${JSON.stringify(r.stderr)})`)
  t.match(lines[0], /^cpfs: .+ \(.+\)$/, `${what}: "cpfs: <what> (<fix>)"`)
  t.match(lines[0], pattern, what)
  t.notMatch(r.stderr, /\n\s+at /, `${what}: no stack trace`)
}

const TREE = 'mkdir d && echo one > d/f && echo top > top.txt'

/**
 * Run `script` (bash in the mount) until `done` holds for its result, and return that result.
 * For what the daemon does at its next look at its store's disk (it looks at most every
 * 250 ms, src/session/session.ts): the test waits for what the look changes, not for a time.
 * Only a hang (HANG_GUARD_MS) ends the wait without it; the last result is returned then.
 */
async function untilRun (w: Env, script: string, done: (r: Run) => boolean): Promise<Run> {
  let r = w.sh(script)
  for (const end = Date.now() + HANG_GUARD_MS; !done(r) && Date.now() < end; r = w.sh(script)) await sleep(50)
  return r
}

if (fuseAvailable(t)) {
  t.test('unknown and garbage turns', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo two > d/f')
    w.ok('turn', w.ws, '--id', 'msg-1')
    const before = manifest(w.ws)
    oneLineError(t, w.cpfs('rewind', '99', w.ws), /turn 99 does not exist/, 'unknown turn number')
    oneLineError(t, w.cpfs('rewind', '0', w.ws), /turn 0 does not exist/, 'turn 0')
    oneLineError(t, w.cpfs('rewind', 'banana', w.ws), /no turn has the number or id "banana"/, 'garbage turn')
    oneLineError(t, w.cpfs('rewind', '1.5', w.ws), /no turn has/, 'fractional turn')
    oneLineError(t, w.cpfs('rewind', w.ws), /no cpfs history|no turn has/, 'directory given where the turn belongs')
    oneLineError(t, w.cpfs('rewind'), /missing TURN/, 'missing turn')
    oneLineError(t, w.cpfs('rewind', '1', w.ws, '--bogus'), /Unknown option/i, 'unknown flag')
    oneLineError(t, w.cpfs('frobnicate'), /unknown command/, 'unknown command')
    t.same(manifest(w.ws), before, 'nothing changed')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).head, 2, 'history unchanged')
    w.ok('rewind', 'msg-1', w.ws)
    t.equal(w.run('cat d/f'), 'two\n', 'an external id works as TURN')
  })

  t.test('second mount of the same workspace', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo changed > top.txt')
    oneLineError(t, w.cpfs('mount', w.ws), /already mounted by cpfs \(daemon pid \d+\)/, 'second mount')
    t.equal(w.run('cat top.txt'), 'changed\n', 'the first mount keeps working')
  })

  t.test('missing or non-directory DIR', async t => {
    const w = workspace(t, TREE)
    oneLineError(t, w.cpfs('mount', join(w.ws, 'nope')), /does not exist/, 'missing DIR')
    oneLineError(t, w.cpfs('mount', join(w.ws, 'top.txt')), /is not a directory/, 'file as DIR')
    oneLineError(t, w.cpfs('status', join(w.ws, 'nope')), /does not exist/, 'status of a missing DIR')
    oneLineError(t, w.cpfs('log', w.ws), /no cpfs history/, 'log without history')
    oneLineError(t, w.cpfs('rewind', '1', w.ws), /no cpfs history/, 'rewind without history')
  })

  t.test('store path that is not a directory, or inside the workspace', async t => {
    const w = workspace(t, TREE)
    const file = join(w.home, 'a-file')
    fs.writeFileSync(file, 'x')
    oneLineError(t, w.cpfs('mount', w.ws, '--store', file), /is not a directory/, 'store is a file')
    oneLineError(t, w.cpfs('mount', w.ws, '--store', join(w.ws, 'store')), /inside the workspace/, 'store inside the workspace')
    t.notOk(isMountedAt(w.ws), 'nothing was mounted')
    t.notOk(fs.existsSync(join(w.ws, 'store')))
  })

  t.test('locked store', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.ok('unmount', w.ws)
    const store = JSON.parse(w.ok('status', w.ws, '--json')).store
    // Another process holds the LevelDB lock (as a crashed or foreign cpfs would).
    const holder = spawn(process.execPath, ['--input-type=module', '-e', `
      import { ClassicLevel } from 'classic-level'
      const db = new ClassicLevel(${JSON.stringify(join(store, 'db'))})
      await db.open()
      console.log('locked')
      setInterval(() => {}, 1000)
    `], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    t.teardown(() => holder.kill('SIGKILL'))
    await new Promise<void>(resolve => holder.stdout!.once('data', () => resolve()))
    oneLineError(t, w.cpfs('mount', w.ws), /is locked by another cpfs process/, 'mount with a locked store')
    oneLineError(t, w.cpfs('log', w.ws), /is locked/, 'log with a locked store')
    t.notOk(isMountedAt(w.ws), 'nothing was mounted')
  })

  t.test('corrupt store', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.ok('unmount', w.ws)
    const before = manifest(w.ws)
    const store = JSON.parse(w.ok('status', w.ws, '--json')).store
    const db = join(store, 'db')
    for (const name of fs.readdirSync(db)) {
      if (name.startsWith('MANIFEST')) fs.writeFileSync(join(db, name), Buffer.alloc(4096, 0xab))
    }
    oneLineError(t, w.cpfs('mount', w.ws), /corrupt/, 'mount with a corrupt store')
    oneLineError(t, w.cpfs('log', w.ws), /corrupt/, 'log with a corrupt store')
    t.notOk(isMountedAt(w.ws))
    t.same(manifest(w.ws), before, 'the workspace is unchanged')
  })

  t.test('missing /dev/fuse and a missing native addon', async t => {
    const w = workspace(t, TREE)
    const lib = join(ROOT, 'build/Release/cpfs_native.node')
    // Private mount namespaces: hide /dev/fuse, or the built addon, from one command only.
    const noDev = w.sh(`unshare -m bash -euc '
      mount --make-rprivate /
      mount -t tmpfs none /dev
      exec node ${CLI} mount ${w.ws}'`)
    oneLineError(t, noDev, /\/dev\/fuse is missing/, 'missing /dev/fuse')
    const noLib = w.sh(`unshare -m bash -euc '
      mount --make-rprivate /
      mount --bind /dev/null ${lib}
      exec node ${CLI} mount ${w.ws}'`)
    oneLineError(t, noLib, /cannot load the cpfs native addon/, 'missing native addon')
    t.notOk(isMountedAt(w.ws), 'nothing was mounted')
    t.same(fs.readdirSync(w.ws).sort(), ['d', 'top.txt'], 'nothing written into the workspace')
  })

  t.test('busy mount at unmount', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo new > top.txt')
    const holder = spawn('bash', ['-c', 'sleep 600'], { cwd: join(w.ws, 'd'), stdio: 'ignore' })
    t.teardown(() => holder.kill('SIGKILL'))
    const cwd = (): string => { try { return fs.readlinkSync(`/proc/${holder.pid}/cwd`) } catch { return '' } }
    for (const end = Date.now() + HANG_GUARD_MS; cwd() !== join(w.ws, 'd') && Date.now() < end;) await sleep(20)
    t.equal(cwd(), join(w.ws, 'd'), 'a process is inside the mount')
    oneLineError(t, w.cpfs('unmount', w.ws), /is busy/, 'unmount while a process uses the mount')
    t.ok(isMountedAt(w.ws), 'still mounted')
    t.equal(w.run('cat top.txt'), 'new\n', 'and still working')
    holder.kill('SIGKILL')
    await new Promise(resolve => holder.once('exit', resolve))
    w.ok('unmount', w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'top.txt'), 'utf8'), 'new\n', 'unmount succeeds once the process is gone')
  })

  t.test('a store disk filled from outside: ENOSPC in the mount, and work goes on once space is back', async t => {
    const w = workspace(t, TREE, { env: { CPFS_RESERVE_BYTES: '0' } })
    const small = join(w.home, 'small')
    fs.mkdirSync(small)
    w.run(`mount -t tmpfs -o size=24m cpfs-test-tmpfs ${small}`)
    t.teardown(() => { w.sh(`umount -l ${small}`) })
    w.ok('mount', w.ws, '--store', join(small, 'store'))
    w.run('head -c 3000000 /dev/urandom > keep.bin && sha256sum keep.bin > keep.sum')
    w.ok('turn', w.ws)
    // Another program fills the disk (the store's own files included) to the last block.
    w.sh(`head -c 30000000 /dev/zero > ${small}/filler`)
    // A write may still get in before the daemon's next look at the disk (the write then fails
    // in the store, and the ones after it are refused): what matters is that writes do fail.
    const r = await untilRun(w, 'head -c 2000000 /dev/urandom > big.bin', r => r.code !== 0)
    t.not(r.code, 0, 'a write while the disk is full fails')
    t.match(r.stderr, /No space left on device/, 'with ENOSPC')
    t.equal(w.run('sha256sum -c keep.sum'), 'keep.bin: OK\n', 'older data is intact and readable')
    fs.rmSync(join(small, 'filler'))
    // Until the daemon's next look, it may still refuse a write: the claim is that work goes
    // on without a remount, so the user's retry succeeds.
    const after = await untilRun(w, 'rm -f big.bin && echo after > after.txt', r => r.code === 0)
    t.equal(after.code, 0, `once the space is back, a write works again: ${after.stderr.trim()}`)
    t.equal(w.run('cat after.txt'), 'after\n', 'once the space is back, writes work again without a remount')
    w.ok('unmount', w.ws)
    t.equal(w.run('sha256sum -c keep.sum && cat after.txt'), 'keep.bin: OK\nafter\n', 'and unmount applies everything')
  })

  // The default reserve (64 MiB) on a 96 MiB disk: LevelDB's merges must fit in the reserve
  // (docs/decisions.md, the memtable), and only the rest is for data.
  t.test('a full store disk: ENOSPC in the mount, the mount stays usable, nothing older lost', async t => {
    const w = workspace(t, TREE)
    const small = join(w.home, 'small')
    fs.mkdirSync(small)
    w.run(`mount -t tmpfs -o size=96m cpfs-test-tmpfs ${small}`)
    t.teardown(() => { w.sh(`umount -l ${small}`) })
    w.ok('mount', w.ws, '--store', join(small, 'store'))
    w.run('head -c 3000000 /dev/urandom > keep.bin && sha256sum keep.bin > keep.sum')
    w.ok('turn', w.ws)
    const r = w.sh('head -c 40000000 /dev/urandom > big.bin')
    t.not(r.code, 0, 'a write that does not fit fails')
    t.match(r.stderr, /No space left on device/, 'with ENOSPC')
    t.equal(w.run('sha256sum -c keep.sum'), 'keep.bin: OK\n', 'older data is intact and readable')
    t.equal(w.run('rm -f big.bin && ls'), 'd\nkeep.bin\nkeep.sum\ntop.txt\n', 'deleting still works')
    w.ok('rewind', '2', w.ws)
    t.equal(w.run('sha256sum -c keep.sum'), 'keep.bin: OK\n', 'rewind still works')
    w.ok('unmount', w.ws)
    t.equal(w.run('sha256sum -c keep.sum'), 'keep.bin: OK\n', 'and unmount applies the kept turn')
  })
}
