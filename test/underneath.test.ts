// Writes made underneath the mount (issue 19, item 1): a shell whose cwd was in the directory
// before `cpfs mount` still reaches the real files. cpfs names such processes when it mounts,
// keeps a file's content before such a process opens it (fanotify permission events), and
// records what they change in the history, so `cpfs rewind` brings the original back.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn } from 'node:child_process'
import * as os from 'node:os'
import * as N from '../dist/native/index.js'
import { join } from 'node:path'
import { CLI, fuseAvailable, until, workspace, type Env } from './helpers.js'

/** A shell started in the workspace before the mount: it runs each script underneath the mount. */
async function shellUnderneath (t: any, w: Env): Promise<{ pid: number, run: (script: string) => Promise<void> }> {
  const holder = spawn('bash', ['-c', 'while read -r line; do eval "$line"; echo done; done'], { cwd: w.ws, stdio: ['pipe', 'pipe', 'ignore'] })
  t.teardown(() => holder.kill('SIGKILL'))
  const cwd = (): string => { try { return fs.readlinkSync(`/proc/${holder.pid}/cwd`) } catch { return '' } }
  if (!await until(() => cwd() === w.ws)) throw new Error(`the shell underneath never had its cwd in ${w.ws}`)
  return {
    pid: holder.pid!,
    run: async (script: string) => {
      const done = new Promise<void>(resolve => holder.stdout.once('data', () => resolve()))
      holder.stdin.write(script + '\n')
      await done
    }
  }
}

function daemonLog (w: Env): string {
  const dir = fs.readdirSync(w.home, { recursive: true }).map(String).find(n => n.endsWith('daemon.log'))
  return dir ? fs.readFileSync(join(w.home, dir), 'utf8') : ''
}

// The waits below are for a state (a record in the history, an event, a line in the log),
// however long it takes; only a hang ends them without it, and the assertions after them fail.

/** Who made a change is stored just after the change itself: wait for that record too. */
async function untilAttributed (w: Env, path: string): Promise<any[]> {
  let log: any[] = []
  await until(() => (log = JSON.parse(w.ok('log', w.ws, '--json'))).some((l: any) => l.underneath?.first.some((u: any) => u.path === path)), 100)
  return log
}

/** The watch records what it heard a moment after the change: wait until the history says so. */
async function untilLogged (w: Env, path: string): Promise<any[]> {
  let log: any[] = []
  await until(() => JSON.stringify(log = JSON.parse(w.ok('log', w.ws, '--json'))).includes(path), 100)
  return log
}

/** Events until `done` says they are all there (the thread signals; JavaScript drains). */
async function eventsUntil (done: () => boolean): Promise<void> {
  await until(done, 25)
}

if (process.getuid?.() === 0) {
  t.test('the native watch: an open is held until allowed, the old bytes readable meanwhile; changes come by directory handle and name', async t => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'cpfs-under-native-'))
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
    fs.mkdirSync(join(dir, 'sub'))
    fs.writeFileSync(join(dir, 'a.txt'), 'orig\n')
    const got: N.UnderneathEvent[] = []
    const seenAtOpen: string[] = []
    let h: N.UnderneathHandle | null = null
    h = N.native.underneathStart(() => {
      for (const ev of N.native.underneathDrain(h!)) {
        got.push(ev)
        if (ev.kind === 'open') {
          seenAtOpen.push(fs.readFileSync(ev.path!, 'utf8')) // this process's own open: answered by the thread
          N.native.underneathAllow(h!, ev.id)
        }
      }
    }, 5000)
    t.teardown(() => N.native.underneathStop(h!))
    const dirFd = fs.openSync(dir, 'r')
    t.teardown(() => fs.closeSync(dirFd))
    const root = N.native.underneathMark(h, dirFd, '')
    const sub = N.native.underneathMark(h, dirFd, 'sub')
    t.not(root, sub, 'each directory has its own handle')
    fs.readFileSync(join(dir, 'a.txt')) // our own open raises no event JavaScript sees
    const child = spawn('bash', ['-c', 'echo changed > a.txt && echo x > sub/b && rm sub/b'], { cwd: dir })
    const code = await new Promise(resolve => child.on('exit', resolve))
    t.equal(code, 0)
    await eventsUntil(() => got.some(e => e.kind === 'change' && e.name === 'b' && (e.mask & 0x200) !== 0))
    t.equal(seenAtOpen[0], 'orig\n', 'the truncating open waited: the old bytes were there while it was held')
    t.ok(got.filter(e => e.kind === 'open').every(e => e.pid === child.pid), 'only the other process\'s opens are held')
    t.ok(got.some(e => e.kind === 'change' && e.dir === root && e.name === 'a.txt' && (e.mask & 0x2)), 'a.txt modified, named by the root\'s handle')
    t.ok(got.some(e => e.kind === 'change' && e.dir === sub && e.name === 'b' && (e.mask & 0x100)), 'sub/b created, by sub\'s handle')
    t.ok(got.some(e => e.kind === 'change' && e.dir === sub && e.name === 'b' && (e.mask & 0x200)), 'sub/b deleted')
    t.equal(fs.readFileSync(join(dir, 'a.txt'), 'utf8'), 'changed\n')
  })

  t.test('the native watch lets a held open go after its timeout: a stalled daemon never hangs a process for ever', async t => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'cpfs-under-native-'))
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
    fs.writeFileSync(join(dir, 'f'), 'x')
    const got: N.UnderneathEvent[] = []
    let h: N.UnderneathHandle | null = null
    h = N.native.underneathStart(() => { for (const ev of N.native.underneathDrain(h!)) got.push(ev) }, 300) // never allowed
    t.teardown(() => N.native.underneathStop(h!))
    const dirFd = fs.openSync(dir, 'r')
    t.teardown(() => fs.closeSync(dirFd))
    N.native.underneathMark(h, dirFd, '')
    const child = spawn('cat', ['f'], { cwd: dir })
    const code = await new Promise(resolve => child.on('exit', resolve))
    t.equal(code, 0, 'cat finishes')
    await eventsUntil(() => got.some(e => e.kind === 'timeout'))
    const open = got.find(e => e.kind === 'open')
    t.ok(open, 'its open was held')
    t.ok(got.some(e => e.kind === 'timeout' && e.id === open?.id), 'and let go by the timeout, which JavaScript hears of')
    t.equal(N.native.underneathAllow(h, open!.id), false, 'allowing it later is a no-op')
  })
}

if (fuseAvailable(t)) {
  if (process.getuid?.() !== 0) {
    t.fail('these tests need root (fanotify permission events): run them as root, as CI does')
  } else {
    t.test('the issue\'s sequence: an edit underneath is in the history, and rewind brings "orig" back', async t => {
      const w = workspace(t, 'echo orig > a.txt && mkdir sub && echo keep > sub/k.txt')
      const under = await shellUnderneath(t, w)
      const m = w.cpfs('mount', w.ws)
      t.equal(m.code, 0, m.stderr)
      t.match(m.stderr, new RegExp(`process(es)? still reach(es)? the real files underneath the mount, past cpfs: .*pid ${under.pid} bash \\(cwd ${w.ws}\\)`), 'mount names the shell underneath')
      t.match(m.stderr, /restart them from inside the mount \(or cd into it again\)/, 'and says what to do')

      await under.run('echo changed > a.txt && echo new > b.txt && mkdir nd && echo inner > nd/x')
      await untilLogged(w, 'nd/x')
      const log = await untilAttributed(w, 'a.txt')
      t.equal(w.run('cat a.txt b.txt nd/x'), 'changed\nnew\ninner\n', 'the mount shows the changes')
      const turn = log.find((l: any) => /changes made underneath the mount by bash/.test(l.prompt ?? ''))
      t.ok(turn, 'cpfs log has a turn for them, naming the command')
      const a = turn.underneath?.first.find((u: any) => u.path === 'a.txt')
      t.same({ pid: a?.pid, what: a?.what, kept: a?.kept }, { pid: under.pid, what: 'changed', kept: true }, 'cpfs log --json says who changed a.txt, and that its content was kept')
      t.match(a?.command, /^bash/)
      const diff = w.ok('diff', String(turn.turn), w.ws)
      t.match(diff, /-orig\n\+changed/, 'the turn holds the content a.txt had')
      t.match(diff, /b\.txt/)
      t.match(diff, /nd\/x/)
      t.match(daemonLog(w), new RegExp(`a\\.txt changed underneath the mount by pid ${under.pid} \\(bash`), 'the daemon log says who')
      t.match(w.ok('status', w.ws), /underneath +watching \d+ director(y|ies); \d+ changes made there recorded/, 'cpfs status shows the watch')

      // Work in the mount goes on after it, in the session's own turn.
      w.run('echo mine > m.txt')
      t.equal(w.cpfs('rewind', String(turn.turn), w.ws).code, 0)
      t.equal(w.run('cat a.txt'), 'orig\n', 'rewind brings the original back in the mount')
      t.equal(w.run('ls'), 'a.txt\nsub\n', 'and removes what was made underneath')
      const u = w.cpfs('unmount', w.ws)
      t.equal(u.code, 0, u.stderr)
      t.equal(fs.readFileSync(join(w.ws, 'a.txt'), 'utf8'), 'orig\n', 'the real directory gets it back too')
      t.same(fs.readdirSync(w.ws).sort(), ['a.txt', 'sub'])
      t.equal(fs.readFileSync(join(w.ws, 'sub/k.txt'), 'utf8'), 'keep\n')
    })

    t.test('sed -i underneath keeps the original; unmount after it applies the session and keeps the edit', async t => {
      const w = workspace(t, 'printf "one\\ntwo\\n" > f.txt && echo same > g.txt')
      const under = await shellUnderneath(t, w)
      w.ok('mount', w.ws)
      w.run('echo mount > m.txt')
      await under.run('sed -i s/two/TWO/ f.txt')
      await untilLogged(w, 'f.txt')
      t.equal(w.run('cat f.txt'), 'one\nTWO\n', 'the mount shows the edit')
      const u = w.cpfs('unmount', w.ws)
      t.equal(u.code, 0, `unmount applies without --force: ${u.stderr}`)
      t.equal(fs.readFileSync(join(w.ws, 'f.txt'), 'utf8'), 'one\nTWO\n', 'the edit made underneath stays')
      t.equal(fs.readFileSync(join(w.ws, 'm.txt'), 'utf8'), 'mount\n', 'the session\'s own file is applied')
      // Offline, the original is one rewind away.
      const log = JSON.parse(w.ok('log', w.ws, '--json'))
      const turn = log.find((l: any) => /underneath/.test(l.prompt ?? ''))
      t.ok(turn, 'the turn is in the history after unmount')
      const r = w.cpfs('rewind', String(turn.turn), w.ws)
      t.equal(r.code, 0, r.stderr)
      t.equal(fs.readFileSync(join(w.ws, 'f.txt'), 'utf8'), 'one\ntwo\n', 'offline rewind restores the original')
      t.notOk(fs.existsSync(join(w.ws, 'm.txt')))
    })

    t.test('a directory an earlier, applied session emptied and made again is no conflict', async t => {
      const w = workspace(t, 'mkdir d && echo old > d/old')
      w.ok('mount', w.ws)
      w.run('rm -rf d && mkdir d && echo new > d/x')
      t.equal(w.cpfs('unmount', w.ws).code, 0, 'the first session is applied')
      const under = await shellUnderneath(t, w)
      w.ok('mount', w.ws)
      await under.run('echo edited > d/x')
      await untilLogged(w, 'd/x')
      t.equal(w.run('cat d/x'), 'edited\n', 'the edit underneath is recorded')
      const u = w.cpfs('unmount', w.ws)
      t.equal(u.code, 0, u.stderr)
      t.equal(fs.readFileSync(join(w.ws, 'd/x'), 'utf8'), 'edited\n')
    })

    t.test('a file the session changed too: the mount keeps its version and the outside one is not overwritten', async t => {
      const w = workspace(t, 'echo orig > f')
      const under = await shellUnderneath(t, w)
      w.ok('mount', w.ws)
      w.run('echo mine > f')
      await under.run('echo theirs > f')
      await until(() => /f changed underneath/.test(daemonLog(w)), 100)
      t.match(daemonLog(w), /f changed underneath the mount by pid \d+ \(bash[^)]*\): the session changed it too/, 'the daemon log names the conflict')
      t.equal(w.run('cat f'), 'mine\n', 'the mount keeps its own version')
      const u = w.cpfs('unmount', w.ws)
      t.equal(u.code, 1, 'unmount refuses')
      t.match(u.stderr, /changed outside cpfs: f/)
      t.equal(fs.readFileSync(join(w.ws, 'f'), 'utf8'), 'theirs\n', 'the outside version is intact')
      t.equal(w.cpfs('unmount', w.ws, '--force').code, 0)
      t.equal(fs.readFileSync(join(w.ws, 'f'), 'utf8'), 'mine\n')
      t.match(w.ok('diff', w.ws), /./, 'history still readable')
    })

    t.test('moved underneath without being read: a file is put back where it was, a directory and a rewritten file are never removed', async t => {
      const w = workspace(t, 'echo a > a.txt && mkdir d && echo f > d/f && echo g > g.txt')
      const under = await shellUnderneath(t, w)
      w.ok('mount', w.ws)
      w.run('echo mine > m.txt')
      // git checkout's way too: remove a file it never opened, write a new one in its place.
      await under.run('mv a.txt b.txt && mv d e && rm g.txt && echo new > g.txt')
      // Each change is logged when its batch is recorded, and under load they come in several
      // batches: wait for every line the test reads, not just the last one written in order.
      const logged = [/e changed underneath/, /a\.txt deleted underneath/, /b\.txt created underneath/, /g\.txt changed underneath.*not kept/]
      await until(() => { const l = daemonLog(w); return logged.every(re => re.test(l)) }, 100)
      const log = daemonLog(w)
      t.match(log, /a\.txt deleted underneath the mount by pid \d+ .*recorded in turn 1$/m, 'the move is recorded, its content kept')
      t.match(log, /b\.txt created underneath the mount by pid \d+ .*recorded in turn 1$/m)
      t.match(log, /g\.txt changed underneath the mount by pid \d+ .*not kept/, 'what could not be kept is said')
      t.equal(w.run('cat b.txt e/f g.txt'), 'a\nf\nnew\n', 'the mount shows the real files')
      t.equal(w.cpfs('rewind', '1', w.ws).code, 0)
      t.equal(w.run('cat a.txt e/f g.txt'), 'a\nf\nnew\n', 'the rewind puts a.txt back, and keeps what it could not put back')
      t.equal(w.sh('test -e b.txt').code, 1)
      const u = w.cpfs('unmount', w.ws)
      t.equal(u.code, 0, u.stderr)
      t.same(fs.readdirSync(w.ws).sort(), ['a.txt', 'e', 'g.txt'], 'nothing in the real directory is lost')
      t.equal(fs.readFileSync(join(w.ws, 'a.txt'), 'utf8'), 'a\n')
      t.equal(fs.readFileSync(join(w.ws, 'e/f'), 'utf8'), 'f\n')
      t.equal(fs.readFileSync(join(w.ws, 'g.txt'), 'utf8'), 'new\n')
    })

    t.test('a delete without an open underneath: recorded, and the loss said plainly', async t => {
      const w = workspace(t, 'echo gone > old.txt')
      const under = await shellUnderneath(t, w)
      w.ok('mount', w.ws)
      await under.run('echo tmp > t.tmp && rm t.tmp && rm old.txt')
      await until(() => /old\.txt deleted/.test(daemonLog(w)), 100)
      const log = daemonLog(w)
      // rm may end before its command line is read: the pid is always there.
      t.match(log, /old\.txt deleted underneath the mount by pid \d+ \((rm old\.txt|ended before cpfs could read its command line)\).*its earlier content was not kept/, 'a delete with no open to hold is named, and the loss said')
      // (t.tmp, made and removed at once, is left out when both are heard together; on a busy
      // machine it may be recorded as made, then removed: either way it is not in the tree.)
      t.equal(w.run('ls'), '', 'the mount shows the directory as it is')
      t.equal(w.cpfs('unmount', w.ws).code, 0)
    })

    t.test('a directory swapped for a symlink underneath: the mount shows the symlink, the moved directory keeps its files', async t => {
      const w = workspace(t, 'mkdir -p a/b && echo mine > a/b/f')
      const secret = join(w.ws, '..', 'root-only')
      fs.mkdirSync(join(secret, 'b'), { recursive: true, mode: 0o700 })
      fs.writeFileSync(join(secret, 'b', 'f'), 'ROOT SECRET\n', { mode: 0o600 })
      const under = await shellUnderneath(t, w)
      w.ok('mount', w.ws, '--allow-other')
      w.run('ls -d a a/b >/dev/null')
      await under.run(`mv a a.real && ln -s ${secret} a`)
      await untilLogged(w, 'a.real')
      t.equal(w.run('readlink a'), secret + '\n', 'a is the symlink it now is')
      t.equal(w.run('cat a.real/b/f'), 'mine\n', 'the moved directory has its files')
      // Followed by the kernel with the reader's rights, as on any filesystem.
      const nobody = w.sh('setpriv --reuid=65534 --regid=65534 --clear-groups cat a/b/f 2>&1 || true')
      t.notMatch(nobody.stdout, /SECRET/, 'an unprivileged reader gets nothing through it')
      t.equal(w.cpfs('unmount', w.ws).code, 0)
      t.equal(fs.readlinkSync(join(w.ws, 'a')), secret, 'unmount leaves the real directory as it is')
      t.equal(fs.readFileSync(join(secret, 'b', 'f'), 'utf8'), 'ROOT SECRET\n', 'and nothing outside it changed')
    })

    t.test('a file swapped for a FIFO underneath: recorded as a FIFO, nothing blocks', async t => {
      const w = workspace(t, 'echo data > f && echo other > g')
      const under = await shellUnderneath(t, w)
      w.ok('mount', w.ws)
      w.run('stat f >/dev/null')
      await under.run('cat f >/dev/null && rm f && mkfifo f')
      await untilLogged(w, '"/f"')
      t.equal(w.sh('test -p f && echo fifo').stdout, 'fifo\n', 'the mount shows f as the FIFO it is')
      t.equal(w.run('cat g'), 'other\n', 'the mount answers')
      const log = JSON.parse(w.ok('log', w.ws, '--json'))
      const turn = log.find((l: any) => /underneath/.test(l.prompt ?? ''))
      t.ok(turn, 'the swap is a turn')
      t.equal(w.cpfs('rewind', String(turn.turn), w.ws).code, 0)
      t.equal(w.run('cat f'), 'data\n', 'rewind brings the file back (it was read underneath, so kept)')
      t.equal(w.cpfs('unmount', w.ws).code, 0)
      t.equal(fs.readFileSync(join(w.ws, 'f'), 'utf8'), 'data\n')
    })

    t.test('a mount from a shell inside the directory: one line, cd again', async t => {
      const w = workspace(t, 'echo x > a')
      // The CLI's own parent shell is in the directory: the caller's case.
      const r = w.sh(`"${process.execPath}" "${CLI}" mount .; true`, w.ws) // "; true": bash must not exec the CLI in its place
      t.equal(r.code, 0, r.stderr)
      t.match(r.stderr, /cpfs: your shell is still in the directory underneath the mount: run cd "\$PWD"/, 'the caller is told to cd again')
      t.notMatch(r.stderr, /processes? still reach/, 'and not listed as a stranger')
      t.equal(w.cpfs('unmount', w.ws).code, 0)
    })

    t.test('with the watch off (CPFS_UNDERNEATH=off), mount says so once when someone is underneath', async t => {
      const w = workspace(t, 'echo x > a', { env: { CPFS_UNDERNEATH: 'off' } })
      await shellUnderneath(t, w)
      const m = w.cpfs('mount', w.ws)
      t.equal(m.code, 0, m.stderr)
      t.match(m.stderr, /cpfs: CPFS_UNDERNEATH=off: writes made underneath the mount are not watched/)
      t.equal(m.stderr.match(/not watched/g)?.length, 1, 'once')
      t.equal(w.cpfs('unmount', w.ws).code, 0)
    })
  }
}
