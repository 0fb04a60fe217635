// cpfs exec: mount, run a command inside, unmount — with a failing command, a signal,
// --discard, --turn-per-command, and two sandboxed agents on one checkout at once.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { CLI, fuseAvailable, isMountedAt, manifest, until, workspace } from './helpers.js'

const TREE = 'echo base > base.txt && mkdir src && echo code > src/code.c'

if (fuseAvailable(t)) {
  t.test('exec applies the result and exits with the command\'s code', async t => {
    const w = workspace(t, TREE)
    const r = w.cpfs('exec', w.ws, '--', 'bash', '-c', 'pwd && echo made > new.txt && sed -i s/code/CODE/ src/code.c && exit 3')
    t.equal(r.code, 3, 'the command\'s exit code')
    t.equal(r.stdout.trim(), w.ws, 'the command ran with its working directory in the mount')
    t.notOk(isMountedAt(w.ws), 'unmounted afterwards')
    t.equal(w.run('cat new.txt src/code.c'), 'made\nCODE\n', 'and the result applied (a failing command still keeps its work)')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.equal(log[0].files, 2, 'the history has the work')
  })

  t.test('exec --discard leaves the real directory as it was', async t => {
    const w = workspace(t, TREE)
    const before = manifest(w.ws)
    const r = w.cpfs('exec', w.ws, '--discard', '--', 'bash', '-c', 'rm -rf src && echo x > y')
    t.equal(r.code, 0)
    t.same(manifest(w.ws), before, 'nothing applied')
    const st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(st.pending, 0, 'nothing discarded is pending')
    t.equal(st.redo, 1, 'the discarded work can be brought back with redo')
    // The next session starts from the real directory, and a plain unmount applies nothing.
    w.ok('mount', w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'y')), 'the next mount does not show the discarded file')
    t.ok(fs.existsSync(join(w.ws, 'src')), 'nor the discarded deletion')
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws), before, 'and unmount applies none of it')
  })

  t.test('exec --turn-per-command gives each command line its own turn', async t => {
    const w = workspace(t, TREE)
    const r = w.cpfs('exec', w.ws, '--turn-per-command', '--', 'echo one > one.txt', 'echo two > two.txt', 'false', 'echo never > never.txt')
    t.equal(r.code, 1, 'stops at the first failing command with its code')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log.map((x: any) => x.prompt), [null, 'echo one > one.txt', 'echo two > two.txt', 'false'], 'one turn per command, its command line as the prompt')
    t.same(log.map((x: any) => x.files), [0, 1, 1, 0])
    t.notOk(fs.existsSync(join(w.ws, 'never.txt')))
  })

  t.test('a signal reaches the command and the mount is cleaned up', async t => {
    const w = workspace(t, TREE)
    const child = spawn(process.execPath, [CLI, 'exec', w.ws, '--', 'bash', '-c', 'trap "echo got-term > term.txt; exit 143" TERM; echo started > started.txt; while true; do sleep 0.1; done'], { env: w.env, stdio: 'ignore' })
    t.ok(await until(() => w.sh('test -e started.txt').code === 0), 'the command has started in the mount')
    child.kill('SIGTERM')
    const code = await new Promise<number | null>(resolve => child.once('exit', resolve))
    t.equal(code, 143, 'exec exits with the command\'s code')
    t.notOk(isMountedAt(w.ws), 'the mount is gone')
    t.equal(w.run('cat term.txt'), 'got-term\n', 'the command got SIGTERM and its last write was applied')
  })

  t.test('two sandboxed agents on one checkout at once, each seeing only its own writes', async t => {
    const w = workspace(t, TREE)
    // a writes, then looks once b has written; b starts once a has written, writes, looks at
    // once, and stays until a has looked (each applies its result to the real directory when
    // it ends). Each step waits for the other's flag file (outside the workspace), not for a
    // time; `hold` gives up after about 120 s only if the other never gets there (a hang).
    const sync = join(w.ws, '..', 'sync')
    fs.mkdirSync(sync)
    const hold = (flag: string) => `for i in $(seq 2400); do [ -e ${sync}/${flag} ] && break; sleep 0.05; done; [ -e ${sync}/${flag} ] || { echo "hung waiting for ${flag}" >&2; exit 1; }`
    const agent = (name: string, script: string) => spawn(process.execPath, [CLI, 'exec', w.ws, '--sandbox', '--', 'bash', '-c', script], { env: w.env, stdio: ['ignore', 'pipe', 'pipe'] })
    const a = agent('a', `echo a > a.txt; touch ${sync}/a-wrote; ${hold('b-wrote')}; ls > /tmp/seen-by-a-${process.pid}; touch ${sync}/a-looked`)
    t.ok(await until(() => fs.existsSync(join(sync, 'a-wrote'))), 'agent a has written')
    const b = agent('b', `echo b > b.txt; touch ${sync}/b-wrote; ls > /tmp/seen-by-b-${process.pid}; ${hold('a-looked')}`)
    const [ca, cb] = await Promise.all([a, b].map(c => new Promise<number | null>(resolve => c.once('exit', resolve))))
    t.equal(ca, 0, 'agent a succeeded')
    t.equal(cb, 0, 'agent b succeeded')
    t.notOk(isMountedAt(w.ws), 'no mount is visible outside the sandboxes')
    const seenA = fs.readFileSync(`/tmp/seen-by-a-${process.pid}`, 'utf8')
    const seenB = fs.readFileSync(`/tmp/seen-by-b-${process.pid}`, 'utf8')
    fs.rmSync(`/tmp/seen-by-a-${process.pid}`)
    fs.rmSync(`/tmp/seen-by-b-${process.pid}`)
    t.match(seenA, /^a\.txt$/m, 'agent a sees its own file')
    t.notMatch(seenA, /^b\.txt$/m, 'but not the file agent b wrote in its sandbox meanwhile')
    t.match(seenB, /^b\.txt$/m, 'agent b sees its own file')
    t.notMatch(seenB, /^a\.txt$/m, 'but not the file agent a had written in its sandbox')
    t.equal(w.run('cat a.txt b.txt'), 'a\nb\n', 'both applied to the real directory when they ended')
  })

  t.test('exec: bad input', async t => {
    const w = workspace(t, TREE)
    let r = w.cpfs('exec', w.ws)
    t.equal(r.code, 2)
    t.match(r.stderr, /^cpfs: no command given \(put the command after --/)
    r = w.cpfs('exec', w.ws, '--', 'definitely-not-a-command')
    t.equal(r.code, 1)
    t.match(r.stderr, /^cpfs: cannot run definitely-not-a-command: command not found/)
    t.notOk(isMountedAt(w.ws), 'the mount was cleaned up')
  })
}
