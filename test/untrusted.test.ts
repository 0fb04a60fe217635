// The agent is untrusted: tests written as an attacker would write them. The workspace belongs
// to an unprivileged user (nobody, uid 65534) whose processes try to make root-run cpfs act
// outside the workspace: swapping a directory for a symlink while a plan writes (unmount,
// offline rewind, redo, restore, undo, fork), replacing a directory by a symlink to a
// root-only directory between sessions, and putting a FIFO where a real file was. Nothing
// outside the workspace may change, ever: a decoy tree is compared by a manifest that
// includes owners, modes and inode numbers.
import t from 'tap'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { ROOT, fuseAvailable, sleep, stopDaemon, workspace, type Env } from './helpers.js'

const AGENT = 65534
const ATTACKER = join(ROOT, 'test', 'attacker.py')
/** The system's python (a python in root's home, such as pyenv's, is out of the agent's reach). */
const PYTHON = '/usr/bin/python3'
const FILES = 150

/** Run argv as the agent's user (no groups), with cwd. */
function asAgent (argv: string[], cwd: string): ChildProcess {
  return spawn('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', ...argv], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
}

function agentSh (script: string, cwd: string): { code: number, stdout: string, stderr: string } {
  const r = spawnSync('setpriv', [`--reuid=${AGENT}`, `--regid=${AGENT}`, '--clear-groups', 'bash', '-c', script], { cwd, encoding: 'utf8', timeout: 60_000 })
  return { code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr }
}

/** Every entry below dir with what an attack could change: type, owner, mode, inode, size, content. */
function strictManifest (dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(join(dir, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name
      const st = fs.lstatSync(join(dir, r))
      let what = `${st.mode.toString(8)} ${st.uid}:${st.gid} ino ${st.ino} size ${st.size}`
      if (st.isFile()) what += ' ' + createHash('sha256').update(fs.readFileSync(join(dir, r))).digest('hex')
      if (st.isSymbolicLink()) what += ' -> ' + fs.readlinkSync(join(dir, r))
      out[r] = what
      if (st.isDirectory()) walk(r)
    }
  }
  const top = fs.lstatSync(dir)
  out['.'] = `${top.mode.toString(8)} ${top.uid}:${top.gid} ino ${top.ino}`
  walk('')
  return out
}

/** Names of cpfs's temporary files anywhere below dir. */
function temps (dir: string): string[] {
  const r = spawnSync('find', [dir, '-name', '.cpfs-tmp-*'], { encoding: 'utf8' })
  return r.stdout.split('\n').filter(Boolean)
}

/** A root-only decoy directory outside the workspace with files named like the workspace's. */
function decoy (w: Env): string {
  const dir = join(w.ws, '..', 'decoy')
  fs.mkdirSync(dir, { mode: 0o700 })
  for (let i = 0; i < FILES; i++) fs.writeFileSync(join(dir, name(i)), 'ROOT SECRET\n', { mode: 0o600 })
  return dir
}

function name (i: number): string {
  return `f${String(i).padStart(3, '0')}`
}

/** The workspace and everything in it belong to the agent; the folder above is passable. */
function giveToAgent (w: Env): void {
  fs.chmodSync(join(w.ws, '..'), 0o755)
  spawnSync('chown', ['-R', `${AGENT}:${AGENT}`, w.ws])
}

/** Undo the attacker's last swap, if it left the symlink at dI (root does it: a clean start for the next command). */
function swapBack (ws: string): void {
  const at = (n: string) => fs.lstatSync(join(ws, n), { throwIfNoEntry: false })
  if (at('dI')?.isSymbolicLink() && at('.evil')?.isDirectory()) {
    spawnSync('python3', ['-c', 'import ctypes,sys; l=ctypes.CDLL(None); sys.exit(l.renameat2(-100, b"dI", -100, b".evil", 2))'], { cwd: ws })
  }
  if (at('.evil')?.isSymbolicLink()) fs.unlinkSync(join(ws, '.evil'))
}

/** Stop the attacker; returns how many swaps it made (it prints the count when it ends by itself or on SIGINT). */
async function stopped (p: ChildProcess): Promise<number> {
  let out = ''
  p.stdout!.on('data', (b: Buffer) => { out += b.toString() })
  if (p.exitCode === null) {
    const done = new Promise<void>(resolve => p.once('close', () => resolve()))
    p.kill('SIGINT')
    await done
  }
  return Number(out.trim() || 0)
}

if (fuseAvailable(t)) {
  t.test('an agent swapping a directory for a symlink while root runs plans never changes anything outside the workspace', async t => {
    const rounds = Number(process.env.CPFS_ATTACK_ROUNDS ?? 3)
    let swaps = 0
    for (let round = 0; round < rounds; round++) {
      const w = workspace(t, `mkdir dI && for i in $(seq -f %03g 0 ${FILES - 1}); do echo v1 > dI/f$i; done`)
      const outside = decoy(w)
      giveToAgent(w)
      const before = strictManifest(outside)
      const attack = async (what: string, run: () => void, root = w.ws): Promise<void> => {
        const attacker = asAgent([PYTHON, ATTACKER, root, 'dI', outside, 'dI', '20'], root)
        await sleep(100)
        run()
        swaps += await stopped(attacker)
        t.same(strictManifest(outside), before, `round ${round}, ${what}: nothing outside the workspace changed`)
        t.same(temps(w.ws), [], `round ${round}, ${what}: no temporary file left in the workspace`)
        t.same(temps(outside), [], `round ${round}, ${what}: none outside`)
        swapBack(root)
      }
      // The attacker starts before the mount, with its cwd in the real directory, as a process
      // started by the agent before cpfs mount would.
      const attacker = asAgent([PYTHON, ATTACKER, w.ws, 'dI', outside, 'dI', '30'], w.ws)
      await sleep(100)
      w.ok('mount', w.ws, '--allow-other')
      t.equal(agentSh('for f in dI/f*; do echo v2 > "$f"; done', w.ws).code, 0, 'the agent writes in the mount')
      w.ok('turn', w.ws)
      w.cpfs('unmount', w.ws) // may fail (the swaps are drift or refused): only what it never does matters
      swaps += await stopped(attacker)
      t.same(strictManifest(outside), before, `round ${round}, unmount: nothing outside the workspace changed`)
      t.same(temps(w.ws), [], `round ${round}, unmount: no temporary file left`)
      swapBack(w.ws)
      if (fs.readFileSync('/proc/self/mountinfo', 'utf8').includes(w.ws + ' ')) w.cpfs('unmount', w.ws, '--discard')
      await attack('offline rewind 1', () => w.cpfs('rewind', '1', w.ws, '--force'))
      await attack('redo', () => w.cpfs('redo', w.ws, '--force'))
      await attack('restore', () => w.cpfs('restore', '1', join(w.ws, 'dI'), w.ws, '--force'))
      await attack('undo', () => w.cpfs('undo', w.ws, '--force'))
      const dest = join(w.ws, '..', 'forked')
      fs.mkdirSync(dest)
      fs.chownSync(dest, AGENT, AGENT)
      await attack('fork', () => w.cpfs('fork', '1', dest, w.ws), dest)
      t.same(temps(dest), [], `round ${round}, fork: no temporary file left`)
      t.equal(w.cpfs('status', w.ws).code, 0, 'status works after all of it')
    }
    t.ok(swaps > 0, `the attacker really raced the plans (${swaps} swaps)`)
  })

  t.test('a directory replaced by a symlink to a root-only directory is never read through', async t => {
    const w = workspace(t, 'mkdir d && echo mine > d/note')
    const secret = join(w.ws, '..', 'root-only')
    fs.mkdirSync(secret, { mode: 0o700 })
    fs.writeFileSync(join(secret, 'note'), 'ROOT SECRET\n', { mode: 0o600 })
    // Readable by anyone, but in a directory only root may enter: out of the agent's reach.
    fs.writeFileSync(join(secret, 'secret.txt'), 'ROOT SECRET\n', { mode: 0o644 })
    giveToAgent(w)
    const before = strictManifest(secret)
    // Session 1: the agent replaces d by a symlink to the root-only directory; unmount applies it.
    w.ok('mount', w.ws, '--allow-other')
    t.equal(agentSh(`rm -rf d && ln -s ${secret} d`, w.ws).code, 0)
    w.ok('turn', w.ws)
    w.ok('unmount', w.ws)
    t.ok(fs.lstatSync(join(w.ws, 'd')).isSymbolicLink(), 'the real d is the agent\'s symlink now')
    // Session 2: root rewinds to turn 1, when d was a directory; the agent reads it.
    w.ok('mount', w.ws, '--allow-other')
    const rewind = w.cpfs('rewind', '1', w.ws)
    t.equal(rewind.code, 0, rewind.stderr)
    const read = agentSh('cat d/note', w.ws)
    t.equal(read.stdout, 'mine\n', 'the agent reads the workspace\'s own d/note, as it was at turn 1')
    const probe = agentSh('ls d; cat d/secret.txt', w.ws)
    t.notMatch(probe.stdout, /secret\.txt|SECRET/, 'nothing of the root-only directory behind the symlink is listed or read')
    w.ok('unmount', w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'd', 'note'), 'utf8'), 'mine\n')
    t.same(strictManifest(secret), before, 'the root-only directory is untouched')
    // The same, offline: the symlink planted again outside cpfs is refused as drift or replaced,
    // never followed.
    fs.rmSync(join(w.ws, 'd'), { recursive: true })
    fs.symlinkSync(secret, join(w.ws, 'd'))
    w.cpfs('rewind', '1', w.ws, '--force')
    t.same(strictManifest(secret), before, 'an offline rewind over the planted symlink leaves the root-only directory alone')
    t.equal(spawnSync('grep', ['-r', 'SECRET', w.ws]).status, 1, 'and copies nothing from it into the workspace')
  })

  t.test('a symlink planted in an intermediate directory of the real tree is never followed by the mount', async t => {
    // With the watch of the real directory off: with it on, the swap is recorded as it happens
    // and the mount shows `a` as the symlink it now is, which the kernel follows with the
    // reader's own rights, as anywhere (an agent can make that symlink in the mount itself).
    // What this checks is that the daemon's own reads never follow one.
    const w = workspace(t, 'mkdir -p a/b && echo mine > a/b/f', { env: { CPFS_UNDERNEATH: 'off' } })
    const secret = join(w.ws, '..', 'root-only')
    fs.mkdirSync(join(secret, 'b'), { recursive: true, mode: 0o700 })
    fs.writeFileSync(join(secret, 'b', 'f'), 'ROOT SECRET\n', { mode: 0o600 })
    const outside = await realShell(t, w)
    w.ok('mount', w.ws, '--allow-other')
    w.run('ls -d a a/b >/dev/null') // the mount has shown a and a/b as directories, not yet f
    // A process whose cwd was in the workspace before the mount swaps a for a symlink.
    await outside(`mv a a.real && ln -s ${secret} a`)
    const read = w.sh('cat a/b/f 2>&1 || true')
    t.notMatch(read.stdout, /SECRET/, 'the file behind the symlink is never shown, even to root')
    await stopDaemon(w.home, w.ws)
  })

  t.test('a real file swapped for a FIFO from outside never freezes the mount', async t => {
    // With the watch off: with it on, the FIFO is recorded as it appears and the mount shows f
    // as the FIFO it now is (test/underneath.test.ts); this checks the daemon's own opens.
    const w = workspace(t, 'echo data > f && echo other > g', { env: { CPFS_UNDERNEATH: 'off' } })
    const outside = await realShell(t, w)
    w.ok('mount', w.ws, '--allow-other')
    w.run('stat f >/dev/null') // the mount has shown f as a regular file
    await outside('rm f && mkfifo f')
    // Reading f opens the real file: a FIFO must neither block the daemon nor be read as f.
    const r = spawnSync('timeout', ['20', 'cat', join(w.ws, 'f')], { encoding: 'utf8' })
    t.not(r.status, 124, 'cat does not hang')
    t.not(r.status, 0, 'it fails')
    t.match(r.stderr, /Input\/output error/, 'with EIO: the real file was changed outside')
    // The mount still answers everything else, and the daemon still answers its socket.
    t.equal(fs.readFileSync(join(w.ws, 'g'), 'utf8'), 'other\n', 'other files are read')
    const s = spawnSync(process.execPath, [join(ROOT, 'dist', 'cli', 'cpfs.cjs'), 'status', w.ws], { env: w.env, encoding: 'utf8', timeout: 30_000 })
    t.equal(s.status, 0, 'status answers')
    await stopDaemon(w.home, w.ws)
  })
}

/** A shell whose cwd is inside the workspace from before the mount: it still reaches the real files. */
async function realShell (t: any, w: Env): Promise<(script: string) => Promise<void>> {
  const holder = spawn('bash', ['-c', 'while read -r line; do eval "$line"; echo done; done'], { cwd: w.ws, stdio: ['pipe', 'pipe', 'ignore'] })
  t.teardown(() => holder.kill('SIGKILL'))
  await sleep(200)
  return async (script: string) => {
    const done = new Promise<void>(resolve => holder.stdout!.once('data', () => resolve()))
    holder.stdin!.write(script + '\n')
    await done
  }
}
