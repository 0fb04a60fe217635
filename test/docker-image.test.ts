// The Docker image, built from the Dockerfile and run for real: on a Debian 13 base made with
// debootstrap (cached in the engine), containers with --network none, /dev/fuse and
// SYS_ADMIN over a git checkout: a turn per command, artifacts, the result applied and
// verified, exit codes passed through, CPFS_DISCARD=1, docker stop, docker kill -s USR1.
// Cold (no cached base): about 3 minutes; cached: seconds per container. See README "In a container".
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, manifest, sleep, workspace, type Env } from './helpers.js'
import { BASE, Engine, IMAGE, baseImage, buildImage, onPath } from './docker-engine.js'

// A cold run downloads a Debian system and the npm dependencies: more than tap's default.
t.setTimeout(45 * 60_000)

/** Docker can run here: root with /dev/fuse (fuseAvailable says why not), a client and an engine. */
function dockerAvailable (): boolean {
  if (!fuseAvailable(t)) return false
  const missing = ['docker', 'dockerd'].filter(c => !onPath(c))
  if (missing.length === 0 || (onPath('docker') && new Engine().docker(['version']).code === 0)) return true
  const why = `no Docker engine can run here: ${missing.join(' and ')} not installed (apt-get install docker.io debootstrap)`
  if (process.env.CI) {
    t.fail(`the image test cannot run: ${why}; .ci/run installs them`)
  } else {
    process.stderr.write(`\n!!! SKIPPING THE DOCKER IMAGE TEST: ${why}.\n\n`)
    t.skip(`SKIPPED LOUDLY: ${why}`)
  }
  return false
}

const engine = new Engine()
let containers = 0
const names: string[] = []

/** A git checkout made by the test (its own user, so commits work inside the container). */
function checkout (): Env {
  return workspace(t, [
    'git init -q && git config user.email agent@example.invalid && git config user.name agent',
    'printf "v1\\n" > app.txt && mkdir src && printf "export const x = 1\\n" > src/lib.js',
    'printf "#!/bin/sh\\necho hi\\n" > run.sh && chmod +x run.sh && ln -s src/lib.js lib',
    'head -c 200000 /dev/urandom > blob.bin && git add -A && git commit -qm init'
  ].join('\n'))
}

function artifacts (w: Env): string {
  const dir = join(w.home, '..', 'artifacts')
  fs.mkdirSync(dir, { recursive: true })
  return dir
}

/** docker run arguments: the image over the checkout, no network, FUSE. */
function runArgs (w: Env, opts: { env?: Record<string, string>, detach?: boolean, extra?: string[] } = {}): string[] {
  const name = `cpfs-test-${process.pid}-${containers++}`
  names.push(name)
  return ['run', ...(opts.detach ? ['--detach'] : ['--rm']), '--name', name, '--network', 'none',
    '--device', '/dev/fuse', '--cap-add', 'SYS_ADMIN',
    '--volume', `${w.ws}:/workspace`, '--volume', `${artifacts(w)}:/artifacts`, ...(opts.extra ?? []),
    ...Object.entries(opts.env ?? {}).flatMap(([k, v]) => ['--env', `${k}=${v}`]), IMAGE]
}

function read (dir: string, file: string): string {
  return fs.readFileSync(join(dir, file), 'utf8')
}

/** Every path with type, mode, content hash, link target and mtime (ns): byte-exact and untouched. */
function snapshot (dir: string): Record<string, unknown> {
  const m = manifest(dir)
  return Object.fromEntries(Object.entries(m).map(([p, e]) => [p, { ...e, mtime: fs.lstatSync(join(dir, p), { bigint: true }).mtimeNs.toString() }]))
}

async function logsUntil (name: string, text: string): Promise<boolean> {
  for (let i = 0; i < 600; i++) {
    if (engine.docker(['logs', name]).stdout.includes(text)) return true
    await sleep(100)
  }
  return false
}

let built = false

if (dockerAvailable()) {
  t.teardown(async () => {
    for (const n of names) engine.docker(['rm', '--force', n])
    await engine.stop()
  })

  await t.test('the image builds from the Dockerfile on a Debian 13 base made by debootstrap', async t => {
    const say = (s: string): void => { t.comment(s) }
    try {
      await engine.start(say)
      baseImage(engine, say)
    } catch (err: any) {
      t.fail(`no Docker engine or base image: ${err.message}`)
      return
    }
    let b
    try {
      b = buildImage(engine)
    } catch (err: any) {
      t.fail(err.message)
      return
    }
    const size = Number(engine.docker(['image', 'inspect', '--format', '{{.Size}}', IMAGE]).stdout.trim())
    t.comment(`image ${IMAGE} on ${BASE}: built in ${b.seconds.toFixed(0)} s (${(b.log.match(/Using cache/g) ?? []).length} of ${(b.log.match(/^Step \d+\/\d+ : (?!FROM)/gm) ?? []).length} steps from the cache), ${(size / 1e6).toFixed(0)} MB`)
    t.ok(size > 0, 'the image exists')
    const v = engine.docker(['run', '--rm', '--network', 'none', '--entrypoint', 'cpfs', IMAGE, '--version'])
    t.equal(v.code, 0, 'cpfs is on the PATH in the image')
    t.match(v.stdout, /^cpfs \d+\.\d+\.\d+/)
    const tools = engine.docker(['run', '--rm', '--network', 'none', '--entrypoint', 'sh', IMAGE, '-c', 'node --version; git --version; command -v g++ make python3 || echo no compilers'])
    t.match(tools.stdout, /^v20\.\d+\.\d+\ngit version .*\nno compilers\n$/, 'Node 20 and git, no compilers in the final image')
    built = t.passing()
  })
}

if (built) {
  t.test('a turn per command: log.json and turn-N.diff, the result applied and verified', async t => {
    const w = checkout()
    const cmds = ['echo v2 > app.txt',
      'sed -i s/1/2/ src/lib.js && git rm -q blob.bin && git commit -qam "agent: v2"',
      'mkdir out && node -e \'require("fs").writeFileSync("out/x", "built\\n")\'']
    const r = engine.docker([...runArgs(w), ...cmds])
    t.equal(r.code, 0, `the container exits 0 (stderr: ${r.stderr.trim()})`)
    const art = artifacts(w)
    const log = JSON.parse(read(art, 'log.json'))
    t.same(log.map((x: any) => x.prompt), [null, ...cmds], 'one turn per command, named by it')
    t.same(log.map((x: any) => x.changes.map((c: any) => c.path).filter((p: string) => !p.startsWith('/.git/')).sort()), [[], ['/app.txt'], ['/blob.bin', '/src/lib.js'], ['/out', '/out/x']], 'what each turn changed')
    t.same(fs.readdirSync(art).sort(), ['log.json', 'summary.txt', 'turn-1.diff', 'turn-2.diff', 'turn-3.diff', 'turn-4.diff'])
    t.match(read(art, 'turn-2.diff'), /-v1\n\+v2/, 'a diff per turn')
    t.match(read(art, 'turn-3.diff'), /-export const x = 1\n\+export const x = 2/)
    t.match(read(art, 'turn-4.diff'), /\+built/)
    t.match(read(art, 'summary.txt'), /verified \d+ paths?[\s\S]*exit code 0/, 'applied and verified')
    t.equal(w.run('cat app.txt src/lib.js out/x'), 'v2\nexport const x = 2\nbuilt\n', 'the result is in the checkout')
    t.notOk(fs.existsSync(join(w.ws, 'blob.bin')))
    t.equal(w.run('git log --format=%s'), 'agent: v2\ninit\n', 'the commit made in the container is in the checkout')
    t.equal(w.run('git status --porcelain'), '?? out/\n')
    t.equal(w.sh('git fsck --strict').code, 0, 'and the repository is sound')
  })

  t.test('a failing command: its exit code, the work before it applied, nothing after it', async t => {
    const w = checkout()
    const r = engine.docker([...runArgs(w), 'echo more >> app.txt', 'exit 7', 'echo never > never'])
    t.equal(r.code, 7, 'the container exits with the failing command\'s code')
    const art = artifacts(w)
    t.same(JSON.parse(read(art, 'log.json')).map((x: any) => x.prompt), [null, 'echo more >> app.txt', 'exit 7'], 'no turn after the failure')
    t.match(read(art, 'summary.txt'), /verified \d+ paths?[\s\S]*exit code 7/)
    t.equal(w.run('cat app.txt'), 'v1\nmore\n', 'the work before the failure is applied')
    t.notOk(fs.existsSync(join(w.ws, 'never')))
    const none = engine.docker(runArgs(w))
    t.equal(none.code, 2, 'no command: exit 2')
    t.match(none.stderr, /no command given/, 'and says so')
  })

  t.test('CPFS_DISCARD=1 leaves the checkout byte-exact and untouched', async t => {
    const w = checkout()
    const before = snapshot(w.ws)
    const r = engine.docker([...runArgs(w, { env: { CPFS_DISCARD: '1' } }),
      'echo v2 > app.txt && rm run.sh && git add -A && git commit -qm gone', 'rm -rf src lib && chmod 600 blob.bin'])
    t.equal(r.code, 0, `the container exits 0 (stderr: ${r.stderr.trim()})`)
    t.same(snapshot(w.ws), before, 'every path, byte, mode and mtime as before')
    const art = artifacts(w)
    t.match(read(art, 'turn-2.diff'), /\+v2/, 'the work is in the artifacts')
    t.match(read(art, 'turn-3.diff'), /lib\.js/)
    t.match(read(art, 'summary.txt'), /left as it was/)
  })

  t.test('docker stop: what the command did is applied, the processes it started end', async t => {
    const w = checkout()
    const args = runArgs(w, { detach: true })
    const name = args[args.indexOf('--name') + 1]
    const r = engine.docker([...args, 'echo partial > partial.txt; sleep 600 & echo ready; sleep 600; echo never > never'])
    t.equal(r.code, 0, 'started')
    t.ok(await logsUntil(name, 'ready'), 'the command runs')
    t.equal(engine.docker(['stop', '--time', '60', name], { timeout: 120_000 }).code, 0, 'docker stop')
    t.equal(engine.docker(['wait', name]).stdout.trim(), '143', 'the container exits 128 + SIGTERM')
    t.equal(w.run('cat partial.txt'), 'partial\n', 'what the command wrote is applied')
    t.notOk(fs.existsSync(join(w.ws, 'never')))
    t.match(read(artifacts(w), 'summary.txt'), /verified \d+ paths?[\s\S]*exit code 143/)
    engine.docker(['rm', name])
  })

  t.test('CPFS_TURNS=signal: docker kill -s USR1 opens a new turn', async t => {
    const w = checkout()
    const sync = join(w.home, '..', 'sync')
    fs.mkdirSync(sync)
    const args = runArgs(w, { detach: true, env: { CPFS_TURNS: 'signal' }, extra: ['--volume', `${sync}:/sync`] })
    const name = args[args.indexOf('--name') + 1]
    const r = engine.docker([...args, 'bash', '-c', 'echo a > a; echo ready; while [ ! -e /sync/go ]; do sleep 0.05; done; echo b > b'])
    t.equal(r.code, 0, 'started')
    t.ok(await logsUntil(name, 'ready'), 'the command wrote a')
    t.equal(engine.docker(['kill', '--signal', 'USR1', name]).code, 0, 'docker kill -s USR1')
    let head = ''
    for (let i = 0; i < 300 && head !== '2'; i++) {
      head = /"head":(\d+)/.exec(engine.docker(['exec', name, 'cpfs', 'status', '/workspace', '--json']).stdout)?.[1] ?? ''
      if (head !== '2') await sleep(100)
    }
    t.equal(head, '2', 'the signal opened turn 2')
    fs.writeFileSync(join(sync, 'go'), '')
    t.equal(engine.docker(['wait', name]).stdout.trim(), '0', 'the command\'s exit code')
    t.same(JSON.parse(read(artifacts(w), 'log.json')).map((x: any) => x.changes.map((c: any) => c.path)), [['/a'], ['/b']], 'the work is split at the signal')
    t.equal(w.run('cat a b'), 'a\nb\n', 'and applied')
    engine.docker(['rm', name])
  })
}
