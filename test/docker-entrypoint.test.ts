// The Docker image's entrypoint, run directly in a private mount namespace (as in the
// container): a turn per command or per SIGUSR1, artifacts, apply or discard, exit codes,
// SIGTERM and leftover processes. test/docker-image.test.ts runs it in the real image.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { CLI, ROOT, fuseAvailable, manifest, until, workspace } from './helpers.js'
import { s3Available, s3Server } from './s3-server.js'

const SCRIPT = join(ROOT, 'scripts', 'ci-agent.sh')

function shim (dir: string): string {
  // The image puts cpfs on PATH (npm link); here a shim does.
  const bin = join(dir, 'bin')
  fs.mkdirSync(bin, { recursive: true })
  fs.writeFileSync(join(bin, 'cpfs'), `#!/bin/sh\nexec ${process.execPath} ${CLI} "$@"\n`, { mode: 0o755 })
  return bin
}

if (fuseAvailable(t)) {
  t.test('a turn per command, artifacts, apply, the failing command\'s exit code', async t => {
    const w = workspace(t, 'echo v1 > app.txt')
    const art = join(w.home, '..', 'artifacts')
    const env = `PATH=${shim(join(w.home, '..'))}:$PATH CPFS_WORKSPACE=${w.ws} CPFS_ARTIFACTS=${art}`
    const r = w.sh(`${env} unshare -m --propagation private ${SCRIPT} "echo v2 > app.txt" "mkdir out && echo built > out/x" "exit 7" "echo never > never"`, '/')
    t.equal(r.code, 7, 'exits with the failing command\'s code')
    const log = JSON.parse(fs.readFileSync(join(art, 'log.json'), 'utf8'))
    t.same(log.map((x: any) => x.prompt), [null, 'echo v2 > app.txt', 'mkdir out && echo built > out/x', 'exit 7'], 'one turn per command')
    t.match(fs.readFileSync(join(art, 'turn-2.diff'), 'utf8'), /-v1\n\+v2/, 'a diff per turn')
    t.match(fs.readFileSync(join(art, 'turn-3.diff'), 'utf8'), /\+built/)
    t.match(fs.readFileSync(join(art, 'summary.txt'), 'utf8'), /verified \d+ paths[\s\S]*exit code 7/, 'summary')
    t.equal(w.run('cat app.txt out/x'), 'v2\nbuilt\n', 'the result was applied to the workspace')
    t.notOk(fs.existsSync(join(w.ws, 'never')))
  })

  t.test('CPFS_REMOTE: the run\'s history is pushed at the end, the exit code unchanged', { skip: !s3Available(t) }, async t => {
    const s3 = await s3Server(t)
    const bucket = await s3.bucket()
    const aws = Object.entries({ ...s3.env, AWS_ENDPOINT_URL: s3.endpoint }).map(([k, v]) => `${k}=${v}`).join(' ')
    const w = workspace(t, 'echo v1 > app.txt')
    const art = join(w.home, '..', 'artifacts')
    const env = `PATH=${shim(join(w.home, '..'))}:$PATH CPFS_WORKSPACE=${w.ws} CPFS_ARTIFACTS=${art} CPFS_REMOTE=s3://${bucket}/fleet CPFS_REMOTE_AS=run-1 ${aws}`
    const r = w.sh(`${env} unshare -m --propagation private ${SCRIPT} "echo v2 > app.txt" "exit 3"`, '/')
    t.equal(r.code, 3, 'the failing command\'s code, pushed or not')
    t.match(fs.readFileSync(join(art, 'summary.txt'), 'utf8'), /pushed 3 turns and 0 branches to s3:\/\/.*\/fleet\/workspaces\/run-1/)
    const dest = join(w.home, '..', 'laptop')
    const c = w.sh(`${aws} ${process.execPath} ${CLI} clone s3://${bucket}/fleet/run-1 ${dest}`, '/')
    t.equal(c.code, 0, c.stderr)
    t.same(manifest(dest), manifest(w.ws), 'cloned elsewhere, the run\'s result')
    t.same(JSON.parse(w.sh(`${process.execPath} ${CLI} log ${dest} --json`, '/').stdout).map((x: any) => x.prompt), [null, 'echo v2 > app.txt', 'exit 3'], 'with its turns')
    // The server gone: the run's code is still the commands', the failure is reported.
    await s3.killGateway()
    const down = w.sh(`${env} unshare -m --propagation private ${SCRIPT} "echo v3 > app.txt"`, '/')
    await s3.startGateway()
    t.equal(down.code, 0, 'a failed push does not change the exit code')
    t.match(down.stderr, /cpfs-agent: the history was not pushed to s3:\/\/.*\(cpfs: cannot .*\); it is still in the workspace's store/)
    t.equal(w.run('cat app.txt'), 'v3\n', 'and the result was applied')
  })

  t.test('CPFS_DISCARD=1 leaves the workspace untouched', async t => {
    const w = workspace(t, 'echo v1 > app.txt')
    const art = join(w.home, '..', 'artifacts')
    const env = `PATH=${shim(join(w.home, '..'))}:$PATH CPFS_WORKSPACE=${w.ws} CPFS_ARTIFACTS=${art} CPFS_DISCARD=1`
    const r = w.sh(`${env} unshare -m --propagation private ${SCRIPT} "echo v2 > app.txt"`, '/')
    t.equal(r.code, 0)
    t.equal(w.run('cat app.txt'), 'v1\n', 'nothing applied')
    t.match(fs.readFileSync(join(art, 'turn-2.diff'), 'utf8'), /\+v2/, 'but the work is in the artifacts')
  })

  t.test('what a command leaves running in the background ends before the unmount', async t => {
    const w = workspace(t, 'echo v1 > app.txt')
    const art = join(w.home, '..', 'artifacts')
    const env = `PATH=${shim(join(w.home, '..'))}:$PATH CPFS_WORKSPACE=${w.ws} CPFS_ARTIFACTS=${art}`
    // Without it the sleeps would keep the mount busy: nothing applied.
    const r = w.sh(`${env} unshare -m --propagation private ${SCRIPT} "sleep 611 & echo v2 > app.txt" "(cd /; sleep 611) &"`, '/')
    t.equal(r.code, 0, 'exits 0')
    t.match(r.stderr, /ending the processes the command left running/, 'says so')
    t.match(fs.readFileSync(join(art, 'summary.txt'), 'utf8'), /verified \d+ paths?[\s\S]*exit code 0/)
    t.equal(w.run('cat app.txt'), 'v2\n', 'applied')
    t.equal(w.sh('pgrep -f "^sleep 611$"').code, 1, 'no sleep left')
  })

  t.test('SIGTERM (docker stop) ends the command and everything it started; its work is applied', async t => {
    const w = workspace(t, 'echo v1 > app.txt')
    const art = join(w.home, '..', 'artifacts')
    const ready = join(w.home, '..', 'ready')
    const env = { ...w.env, PATH: `${shim(join(w.home, '..'))}:${process.env.PATH}`, CPFS_WORKSPACE: w.ws, CPFS_ARTIFACTS: art }
    const child = spawn('unshare', ['-m', '--propagation', 'private', SCRIPT, `echo partial > partial; sleep 612 & touch ${ready}; sleep 612; echo never > never`], { env, stdio: 'ignore' })
    t.ok(await until(() => fs.existsSync(ready)), 'the command runs')
    process.kill(child.pid!, 'SIGTERM')
    const code = await new Promise<number | null>(resolve => child.once('exit', resolve))
    t.equal(code, 143, '128 + SIGTERM')
    t.equal(w.run('cat partial'), 'partial\n', 'what it wrote is applied')
    t.notOk(fs.existsSync(join(w.ws, 'never')))
    t.match(fs.readFileSync(join(art, 'summary.txt'), 'utf8'), /verified \d+ paths?[\s\S]*exit code 143/)
    t.equal(w.sh('pgrep -f "^sleep 612$"').code, 1, 'no sleep left')
  })

  t.test('no command: exit 2 and one line saying so', async t => {
    const r = spawnSync(SCRIPT, [], { encoding: 'utf8' })
    t.equal(r.status, 2)
    t.equal(r.stderr, 'cpfs-agent: no command given (pass the commands to run as arguments)\n')
  })

  t.test('CPFS_TURNS=signal: every SIGUSR1 opens a new turn', async t => {
    const w = workspace(t, 'echo v1 > app.txt')
    const art = join(w.home, '..', 'artifacts')
    const env = { ...w.env, PATH: `${shim(join(w.home, '..'))}:${process.env.PATH}`, CPFS_WORKSPACE: w.ws, CPFS_ARTIFACTS: art, CPFS_TURNS: 'signal' }
    // The command steps on when the test says so (files outside the workspace).
    const sync = join(w.home, '..', 'sync')
    fs.mkdirSync(sync)
    const step = (n: string) => `touch ${sync}/done-${n}; while [ ! -e ${sync}/go-${n} ]; do sleep 0.05; done`
    const child = spawn('unshare', ['-m', '--propagation', 'private', SCRIPT, 'bash', '-c', `echo a > a; ${step('a')}; echo b > b; ${step('b')}; echo c > c`], { env, stdio: 'ignore' })
    // Each wait is for a state (a file, a turn), however long it takes; only a hang ends it
    // without it, and the assertions after it fail.
    const untilFile = async (f: string) => { await until(() => fs.existsSync(join(sync, f))) }
    // unshare execs the script: same pid.
    const pid = child.pid!
    // The trap runs `cpfs turn`: step on once the daemon reports the new turn (not after a
    // fixed sleep, which a loaded machine outlasts).
    const turns = () => {
      // The mount lives in the script's private mount namespace: ask from inside it.
      const r = spawnSync('nsenter', ['-t', String(pid), '-m', process.execPath, CLI, 'log', w.ws, '--json'], { env, encoding: 'utf8' })
      return r.status === 0 ? JSON.parse(r.stdout).length : 0
    }
    const untilTurns = async (n: number) => { await until(() => turns() >= n) }
    await untilFile('done-a')
    process.kill(pid, 'SIGUSR1')
    await untilTurns(2)
    fs.writeFileSync(join(sync, 'go-a'), '')
    await untilFile('done-b')
    process.kill(pid, 'SIGUSR1')
    await untilTurns(3)
    fs.writeFileSync(join(sync, 'go-b'), '')
    const code = await new Promise<number | null>(resolve => child.once('exit', resolve))
    t.equal(code, 0, 'the command\'s exit code')
    const log = JSON.parse(fs.readFileSync(join(art, 'log.json'), 'utf8'))
    t.same(log.map((x: any) => x.changes.map((c: any) => c.path)), [['/a'], ['/b'], ['/c']], 'the work is split at each signal')
    t.equal(w.run('cat a b c'), 'a\nb\nc\n', 'and applied')
  })
}
