// What other processes and users can do to a mount, and what cpfs does to them (issue 18,
// items 5, 6, 8): a disk that someone else fills for a moment, a daemon someone stops with
// SIGSTOP, a stale pid file whose pid now names an unrelated process, other users reading the
// store. Real mounts, the real CLI; outcomes only, no timing thresholds.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CLI, daemonPid, fuseAvailable, isMountedAt, sleep, until, workspace, type Env } from './helpers.js'

if (fuseAvailable(t)) {
  t.test('a disk filled by another process for a moment: writes, rm and turn work again once it is freed', async t => {
    const w = workspace(t, 'echo a > a.txt', { env: { CPFS_RESERVE_BYTES: '0' } })
    const disk = join(w.home, '..', 'small')
    fs.mkdirSync(disk)
    t.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', disk]).status, 0, 'a 64 MiB disk for the store')
    t.teardown(() => { spawnSync('umount', ['-l', disk]) })
    w.ok('mount', w.ws, '--store', join(disk, 'store'))
    const pid = daemonPid(w.home)
    // A writer in the mount keeps LevelDB busy while the disk fills up under it.
    const writer = spawn('bash', ['-c', 'while true; do for i in 0 1 2 3; do dd if=/dev/urandom of=f$i bs=1M count=4 status=none 2>/dev/null; done; done'], { cwd: w.ws, stdio: 'ignore' })
    t.teardown(() => { try { writer.kill('SIGKILL') } catch {} })
    await sleep(1000)
    // Someone else fills the disk, and holds it full for about 3 s.
    const fill = spawnSync('dd', ['if=/dev/zero', `of=${join(disk, 'filler')}`, 'bs=1M'], { encoding: 'utf8' })
    t.match(fill.stderr, /No space left on device/, 'the disk is full')
    // Turns while it is full make LevelDB write (a synced batch, a table of what the writer
    // wrote): they may fail, and the failure used to stay until a remount.
    for (let i = 0; i < 3; i++) {
      await cli(w, ['turn', w.ws])
      const during = await cli(w, ['status', w.ws])
      t.equal(during.code, 0, `the control socket answers while the disk is full: ${during.stderr.trim()}`)
      await sleep(500)
    }
    writer.kill('SIGKILL')
    await new Promise(resolve => writer.once('exit', resolve))
    fs.rmSync(join(disk, 'filler'))
    // Space is back: no remount, the mount works again.
    const write = w.sh('printf hello > after.txt')
    t.equal(write.code, 0, `a write works again: ${write.stderr.trim()}`)
    t.equal(w.run('cat after.txt'), 'hello')
    const rm = w.sh('rm a.txt f0')
    t.equal(rm.code, 0, `rm works again: ${rm.stderr.trim()}`)
    const turn = w.cpfs('turn', w.ws)
    t.equal(turn.code, 0, `cpfs turn works again: ${turn.stderr.trim()}`)
    t.equal(daemonPid(w.home), pid, 'the same daemon: nothing was remounted')
    const big = w.sh('dd if=/dev/urandom of=more bs=1M count=8 status=none')
    t.equal(big.code, 0, `and 8 MiB more fit: ${big.stderr.trim()}`)
    w.ok('unmount', w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'after.txt'), 'utf8'), 'hello', 'the work reaches the real directory')
    t.notOk(fs.existsSync(join(w.ws, 'a.txt')), 'and so does the rm')
  })

  t.test('a stale pid file naming an unrelated process: that process is left alone, mount proceeds', async t => {
    const w = workspace(t, 'echo a > a.txt')
    w.ok('mount', w.ws)
    const pid = daemonPid(w.home)
    const pidFile = join(w.home, fs.readdirSync(w.home).find(d => d.startsWith('ws-'))!, 'daemon.pid')
    // The daemon dies without cleaning up (kill -9), and its pid is reused by another process.
    process.kill(pid, 'SIGKILL')
    await gone(pid)
    const other = spawn('sleep', ['1000'], { stdio: 'ignore' })
    t.teardown(() => { try { other.kill('SIGKILL') } catch {} })
    fs.writeFileSync(pidFile, `${other.pid}\n`)
    const m = w.cpfs('mount', w.ws)
    t.equal(m.code, 0, `mount proceeds: ${m.stderr.trim()}`)
    t.ok(running(other.pid!), 'the unrelated process was not signalled: it still runs')
    t.not(daemonPid(w.home), other.pid, 'the pid file names the new daemon')
    t.equal(w.run('cat a.txt'), 'a\n', 'the mount works')
    w.ok('unmount', w.ws)
    t.ok(running(other.pid!), 'and still runs after unmount')
  })

  t.test('the store is private wherever --store points, whatever the umask; an older store is fixed on open', async t => {
    const before = process.umask(0o022)
    t.teardown(() => { process.umask(before) })
    const w = workspace(t, 'echo secret > s.txt && chmod 600 s.txt')
    const store = join(w.home, '..', 'shared', 'store')
    fs.mkdirSync(store, { recursive: true, mode: 0o755 })
    fs.chmodSync(store, 0o755)
    w.ok('mount', w.ws, '--store', store)
    w.run('echo more secret >> s.txt && dd if=/dev/urandom of=big bs=1M count=20 status=none')
    w.ok('turn', w.ws)
    t.same(notPrivate(store), [], 'while mounted: every file 0600, every directory 0700')
    w.ok('unmount', w.ws, '--discard')
    t.same(notPrivate(store), [], 'after unmount too')
    // A store written by an earlier version, with the umask's modes.
    chmodTree(store, 0o644, 0o755)
    t.not(notPrivate(store).length, 0, 'made readable, as an earlier version left it')
    t.equal(w.cpfs('log', w.ws).code, 0, 'opened offline')
    t.same(notPrivate(store), [], 'fixed by opening it')
    chmodTree(store, 0o644, 0o755)
    w.ok('mount', w.ws, '--store', store)
    t.same(notPrivate(store), [], 'and by mounting it')
    w.ok('unmount', w.ws)
  })

  t.test('status and turn against a stopped daemon end with one line, and SIGTERM ends them', async t => {
    const w = workspace(t, 'echo a > a.txt')
    w.ok('mount', w.ws)
    const pid = daemonPid(w.home)
    process.kill(pid, 'SIGSTOP')
    t.teardown(() => { try { process.kill(pid, 'SIGCONT') } catch {} })
    for (const args of [['status', w.ws], ['turn', w.ws], ['log', w.ws], ['unmount', w.ws]]) {
      const r = await cli(w, args)
      t.equal(r.code, 1, `cpfs ${args[0]} exits 1 (not killed by the test's guard)`)
      t.match(r.stderr, new RegExp(`^cpfs: the cpfs daemon of ${w.ws} \\(pid ${pid}\\) did not answer within [\\d.]+ s: it is stopped \\(resume it with kill -CONT ${pid};.*\\)\\n$`), `cpfs ${args[0]}: one line naming the cause and the fix`)
    }
    // SIGTERM ends a command that waits for the stopped daemon, at once (not by its own timeout).
    const waiting = spawn(process.execPath, [CLI, 'status', w.ws], { env: w.env, stdio: 'ignore' })
    // It waits once it is connected to the daemon's control socket (its one socket).
    const connected = (): boolean => { try { return fs.readdirSync(`/proc/${waiting.pid}/fd`).some(f => { try { return fs.readlinkSync(`/proc/${waiting.pid}/fd/${f}`).startsWith('socket:') } catch { return false } }) } catch { return false } }
    t.ok(await until(connected), 'the command is connected to the stopped daemon, waiting')
    waiting.kill('SIGTERM')
    const guard = setTimeout(() => waiting.kill('SIGKILL'), 120_000) // a hang shows as SIGKILL
    const [code, signal] = await new Promise<[number | null, string | null]>(resolve => waiting.once('exit', (c, s) => resolve([c, s])))
    clearTimeout(guard)
    t.same({ code, signal }, { code: null, signal: 'SIGTERM' }, 'ended by SIGTERM')
    process.kill(pid, 'SIGCONT')
    t.equal(w.cpfs('status', w.ws).code, 0, 'resumed: status works')
    t.equal(w.ok('turn', w.ws), '2', 'and turn')
    w.ok('unmount', w.ws)
    t.notOk(isMountedAt(w.ws))
  })
}

/** The CLI in its own process, guarded: killed after 120 s (a hang), reported as code 137. */
async function cli (w: Env, args: string[]): Promise<{ code: number, stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { env: w.env, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr += d })
  const guard = setTimeout(() => child.kill('SIGKILL'), 120_000)
  const code = await new Promise<number>(resolve => child.once('exit', (c, s) => resolve(c ?? (s ? 137 : 1))))
  clearTimeout(guard)
  return { code, stderr }
}

/** Is pid a live process (not a zombie: a killed child stays one until node reaps it)? */
function running (pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat[stat.lastIndexOf(')') + 2] !== 'Z'
  } catch {
    return false
  }
}

async function gone (pid: number): Promise<void> {
  for (;;) {
    try { process.kill(pid, 0) } catch { return }
    await sleep(50)
  }
}

/** Paths below dir (and dir) that are not 0700 directories or 0600 files, with their modes. */
function notPrivate (dir: string): string[] {
  const out: string[] = []
  const walk = (p: string): void => {
    const st = fs.lstatSync(p)
    const mode = st.mode & 0o7777
    if (st.isDirectory()) {
      if (mode !== 0o700) out.push(`${p} ${mode.toString(8)}`)
      for (const name of fs.readdirSync(p)) walk(join(p, name))
    } else if (!st.isSymbolicLink() && mode !== 0o600) out.push(`${p} ${mode.toString(8)}`)
  }
  walk(dir)
  return out
}

function chmodTree (dir: string, file: number, directory: number): void {
  const walk = (p: string): void => {
    const st = fs.lstatSync(p)
    if (st.isDirectory()) {
      fs.chmodSync(p, directory)
      for (const name of fs.readdirSync(p)) walk(join(p, name))
    } else if (!st.isSymbolicLink()) fs.chmodSync(p, file)
  }
  walk(dir)
}
