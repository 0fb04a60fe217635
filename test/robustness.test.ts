// Nothing a process does inside the mount can take the mount down, and a full store recovers
// by itself: sparse files of any size, a random multi-process stress checked against a model,
// a store on a small disk, and every way a mount can disappear under its daemon.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn, spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { HANG_GUARD_MS, daemonPid, exited, fuseAvailable, isMountedAt, workspace, type Env } from './helpers.js'

const STRESS = join(dirname(fileURLToPath(import.meta.url)), 'stress.py')
const STRESS_SECONDS = Number(process.env.CPFS_STRESS_SECONDS ?? 20)

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** A tmpfs of `mib` MiB beside the workspace, for a store on a small disk; unmounted when the test ends. */
function smallDisk (t: any, w: Env, name: string, mib: number): string {
  const disk = join(w.home, '..', name)
  fs.mkdirSync(disk)
  t.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${mib}m`, 'tmpfs', disk]).status, 0, `a ${mib} MiB disk for the store`)
  t.teardown(() => { spawnSync('umount', ['-l', disk]) })
  return disk
}

/** The daemon log of the workspace's one session directory (it grows across mounts). */
function daemonLog (w: Env): string {
  const dir = fs.readdirSync(w.home).find(d => d.startsWith('ws-'))
  return dir ? fs.readFileSync(join(w.home, dir, 'daemon.log'), 'utf8') : ''
}

/**
 * The daemon ended by itself, cleanly: the process is gone (however long that took; only a
 * hang of HANG_GUARD_MS fails), and what it wrote to its log since `from` says why it ended and
 * no failed shutdown. Timings of a stop belong in bench/, not here.
 */
async function endedCleanly (t: any, w: Env, pid: number, from: number, why: RegExp, what: string): Promise<void> {
  t.ok(await exited(pid), `${what}: the daemon exits by itself (${HANG_GUARD_MS / 1000} s would be a hang)`)
  const said = daemonLog(w).slice(from)
  t.match(said, why, `${what}: the daemon's log says why it ended`)
  t.notMatch(said, /cannot shut down cleanly|uncaught|unhandled/, `${what}: and that it shut down cleanly`)
}

/** Where a process's descriptor `fd` points ('' when it has none, or the process is gone). */
function fdTarget (pid: number, fd: number): string {
  try {
    return fs.readlinkSync(`/proc/${pid}/fd/${fd}`)
  } catch {
    return ''
  }
}

function cwdOf (pid: number): string {
  try {
    return fs.readlinkSync(`/proc/${pid}/cwd`)
  } catch {
    return ''
  }
}

/** Wait until `ok()` holds (a state observed, not a time waited); false only on a hang. */
async function until (ok: () => boolean): Promise<boolean> {
  for (const end = Date.now() + HANG_GUARD_MS; !ok();) {
    if (Date.now() > end) return false
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  return true
}

function rssKiB (pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) : 0
}

if (fuseAvailable(t)) {
  t.test('truncate -s 999999999999999 leaves a working mount; sparse files stay sparse', async t => {
    const w = workspace(t, 'echo keep > keep.txt')
    w.ok('mount', w.ws)
    const big = w.sh('truncate -s 999999999999999 f')
    t.not(big.code, 0, 'beyond the 16 TiB limit')
    t.match(big.stderr, /File too large/, 'EFBIG')
    t.equal(w.run('cat keep.txt'), 'keep\n', 'the mount still works')
    const pid = daemonPid(w.home)
    w.run('truncate -s 100G g && truncate -s 15T h')
    t.equal(w.run('stat -c %s g'), '107374182400\n', 'a 100 GiB file')
    t.equal(w.run('stat -c %b g'), '0\n', 'that stores nothing (st_blocks 0)')
    w.run('printf hello | dd of=g bs=1 seek=53687091200 conv=notrunc status=none')
    t.equal(w.run('dd if=g bs=1 skip=53687091200 count=5 status=none'), 'hello', 'data in the middle')
    t.equal(w.run('dd if=g bs=1 skip=1000 count=4 status=none | od -An -tx1').trim(), '00 00 00 00', 'holes read as zeros')
    t.equal(w.run(`python3 -c "
import os
fd = os.open('g', os.O_RDONLY)
d = os.lseek(fd, 0, os.SEEK_DATA)
print(d, os.lseek(fd, d, os.SEEK_HOLE))
"`), '53687091200 53687156736\n', 'SEEK_DATA finds the one data chunk, SEEK_HOLE its end')
    t.ok(Number(w.run('stat -c %b g')) <= 128, 'st_blocks counts only what is stored')
    t.ok(rssKiB(pid) < 400 * 1024, 'the daemon did not allocate for the holes')
    const u = w.cpfs('unmount', w.ws)
    t.equal(u.code, 0, u.stderr)
    t.equal(w.run('stat -c %s g'), '107374182400\n', 'applied with its size')
    t.ok(Number(w.run('stat -c %b g')) <= 256, `and as a sparse file on the real disk (${w.run('stat -c %b g').trim()} blocks)`)
    t.equal(w.run('dd if=g bs=1 skip=53687091200 count=5 status=none'), 'hello', 'with its data')
    t.equal(w.run('stat -c %s h'), '16492674416640\n', 'a 15 TiB hole applies too')
  })

  t.test('random create/write/truncate/rename/unlink/mkdir/rmdir/chmod/utimes/symlink from many processes: the daemon lives, the model matches', async t => {
    const w = workspace(t)
    const model = join(w.home, '..', 'model')
    fs.mkdirSync(model)
    w.ok('mount', w.ws)
    const pid = daemonPid(w.home)
    const workers = 4
    const results = await Promise.all(Array.from({ length: workers }, (_, i) => {
      fs.mkdirSync(join(w.ws, `w${i}`))
      fs.mkdirSync(join(model, `w${i}`))
      return new Promise<{ code: number | null, out: string }>(resolve => {
        const p = spawn('python3', [STRESS, 'work', join(w.ws, `w${i}`), join(model, `w${i}`), String(0xc0de + i), String(STRESS_SECONDS)], { stdio: ['ignore', 'pipe', 'pipe'] })
        let out = ''
        p.stdout.on('data', d => { out += d })
        p.stderr.on('data', d => { out += d })
        p.on('close', code => resolve({ code, out }))
      })
    }))
    results.forEach((r, i) => t.equal(r.code, 0, `worker ${i}: ${r.out.trim()}`))
    t.ok(alive(pid), 'the daemon is alive')
    t.ok(rssKiB(pid) < 1024 * 1024, `and its memory is bounded (${Math.round(rssKiB(pid) / 1024)} MiB resident)`)
    const check = spawnSync('python3', [STRESS, 'check', w.ws, model], { encoding: 'utf8' })
    t.equal(check.status, 0, `the mount equals the model: ${check.stdout.trim()}`)
    const log = fs.readFileSync(join(w.home, fs.readdirSync(w.home).find(d => d.startsWith('ws-'))!, 'daemon.log'), 'utf8')
    t.notMatch(log, /failed:|uncaught|unhandled/, `no request failed unexpectedly: ${log.split('\n').filter(l => /failed:|uncaught|unhandled/.test(l)).slice(0, 5).join('\n')}`)
    w.ok('unmount', w.ws)
    const after = spawnSync('python3', [STRESS, 'check', w.ws, model], { encoding: 'utf8' })
    t.equal(after.status, 0, `and so does the real directory after unmount: ${after.stdout.trim()}`)
  })

  t.test('a full store recovers by itself: rm the culprit and go on', async t => {
    const w = workspace(t, 'echo a > a.txt')
    const disk = smallDisk(t, w, 'small', 128)
    const store = join(disk, 'store')
    w.ok('mount', w.ws, '--store', store)
    const fill = w.sh('dd if=/dev/urandom of=big bs=1M count=192 status=none')
    t.not(fill.code, 0, 'a 192 MiB write fails')
    t.match(fill.stderr, /No space left on device/, 'with ENOSPC')
    t.match(w.ok('status', w.ws), /writes in the mount were refused for lack of space/, 'status says so')
    w.run('rm -f big')
    // At once: a write that needs the space being freed waits for it instead of failing.
    const small = w.sh('printf hello > small.txt')
    t.equal(small.code, 0, `after rm of the culprit, a small write works again (no unmount needed) ${small.stderr}`)
    t.equal(w.run('cat small.txt'), 'hello')
    const again = w.sh('dd if=/dev/urandom of=medium bs=1M count=40 status=none')
    t.equal(again.code, 0, 'and the space came back: 40 MiB fit again')
    w.ok('unmount', w.ws, '--discard')
    // Below the reserve, mount refuses with one line.
    spawnSync('dd', ['if=/dev/zero', `of=${join(disk, 'filler')}`, 'bs=1M', 'count=200'], { stdio: 'ignore' })
    const m = w.cpfs('mount', w.ws, '--store', store)
    t.equal(m.code, 1, 'mount refuses when the store\'s disk is below the reserve')
    t.match(m.stderr, /^cpfs: the store's disk has .* free, less than the 64\.0 MiB cpfs keeps in reserve .*\(free space there, move the store .*, or lower the reserve/)
    t.notOk(isMountedAt(w.ws), 'nothing mounted')
  })

  // A file written through one descriptor has its entry stored at its close, not at every
  // dirty budget (Persister.persistData); one rewritten in place still has its entry stored at
  // each budget, so what a pass replaced is freed while the file is open.
  t.test('a file rewritten in place while it stays open frees each replaced pass as it goes', async t => {
    const w = workspace(t, 'echo a > a.txt')
    const disk = smallDisk(t, w, 'small-rewrite', 160)
    w.ok('mount', w.ws, '--store', join(disk, 'store'))
    // Five passes of 32 MiB over one open descriptor: 160 MiB of chunks, which fit beside the
    // 64 MiB reserve only if the passes replaced are freed before the close.
    const block = 'random.Random(p * 100 + i).randbytes(1 << 20)'
    const r = w.sh(`python3 -c "
import os, random
fd = os.open('db.bin', os.O_CREAT | os.O_RDWR, 0o644)
for p in range(5):
    os.lseek(fd, 0, 0)
    for i in range(32):
        os.write(fd, ${block})
os.close(fd)"`)
    t.equal(r.code, 0, `five passes in place fit on the small disk: ${r.stderr.trim()}`)
    const bad = w.run(`python3 -c "
import random
p = 4
f = open('db.bin', 'rb')
print(sum(f.read(1 << 20) != ${block} for i in range(32)), len(f.read()))"`)
    t.equal(bad.trim(), '0 0', 'the file reads as its last pass, byte-exact')
    w.ok('unmount', w.ws)
    t.equal(w.cpfs('fsck', w.ws, '--store', join(disk, 'store')).code, 0, 'fsck finds nothing wrong')
  })

  t.test('stopping always works: umount -l, fusermount -u -z, an aborted connection, SIGTERM while busy', async t => {
    const w = workspace(t, 'echo a > a.txt')
    // A lazy unmount with nothing open: the daemon notices, saves the history and exits.
    w.ok('mount', w.ws)
    w.run('echo one > one.txt')
    let pid = daemonPid(w.home)
    let from = daemonLog(w).length
    t.equal(spawnSync('umount', ['-l', w.ws]).status, 0)
    await endedCleanly(t, w, pid, from, /; saving the history and exiting/, 'umount -l')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).pending, 1, 'the work is kept')
    w.ok('mount', w.ws)
    t.equal(w.run('cat one.txt'), 'one\n', 'and mount continues it')
    // A lazy unmount while a process holds a file open, then SIGTERM.
    pid = daemonPid(w.home)
    const held = join(w.ws, 'a.txt')
    const holder = spawn('bash', ['-c', `exec 3<${held}; sleep 600`], { stdio: 'ignore' })
    t.teardown(() => holder.kill('SIGKILL'))
    t.ok(await until(() => fdTarget(holder.pid!, 3) === held), 'a process holds a file of the mount open')
    const fm = spawnSync('fusermount3', ['-u', '-z', w.ws]).status === 0 || spawnSync('umount', ['-l', w.ws]).status === 0
    t.ok(fm, 'lazily detached while busy')
    from = daemonLog(w).length
    process.kill(pid, 'SIGTERM')
    await endedCleanly(t, w, pid, from, /SIGTERM, unmounting without applying/, 'SIGTERM after a lazy unmount while busy')
    holder.kill('SIGKILL')
    const st = w.cpfs('status', w.ws)
    t.equal(st.code, 0, 'status works')
    w.ok('mount', w.ws)
    t.equal(w.run('cat one.txt'), 'one\n', 'mount works again')
    // SIGTERM while a shell is inside the mount: detached, and the daemon exits.
    pid = daemonPid(w.home)
    const inside = spawn('bash', ['-c', 'sleep 600'], { cwd: w.ws, stdio: 'ignore' })
    t.teardown(() => inside.kill('SIGKILL'))
    t.ok(await until(() => cwdOf(inside.pid!) === w.ws), 'a process is inside the mount')
    from = daemonLog(w).length
    process.kill(pid, 'SIGTERM')
    await endedCleanly(t, w, pid, from, /is busy; detaching it/, 'SIGTERM with a busy mount')
    t.notOk(isMountedAt(w.ws), 'and the busy mount is detached, not left stale')
    inside.kill('SIGKILL')
    // An administrator aborts the connection.
    w.ok('mount', w.ws)
    pid = daemonPid(w.home)
    // The connection's directory in fusectl is named after the mount's device minor number.
    // fusectl is mounted in a mount namespace of the abort's own, so that no mount of it is
    // left on the host (it is one filesystem: every mount of it shows every connection).
    const dev = fs.statSync(w.ws).dev
    const minor = (dev & 0xff) | ((dev >> 12) & 0xfff00)
    const conn = '/sys/fs/fuse/connections'
    from = daemonLog(w).length
    const abort = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-euc',
      `[ -e ${conn}/${minor} ] || mount -t fusectl none ${conn}; echo 1 > ${conn}/${minor}/abort`], { encoding: 'utf8' })
    t.equal(abort.status, 0, `the connection is aborted through fusectl: ${abort.stderr.trim()}`)
    await endedCleanly(t, w, pid, from, /; saving the history and exiting/, 'an aborted connection')
    const again = w.cpfs('mount', w.ws)
    t.equal(again.code, 0, `cpfs mount recovers: ${again.stderr.trim()}`)
    t.equal(w.run('cat one.txt'), 'one\n')
    w.ok('unmount', w.ws)
    t.equal(w.run('cat one.txt'), 'one\n', 'and the work reaches the real directory')
  })
}
