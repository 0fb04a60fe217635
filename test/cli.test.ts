// The CLI as a daily tool, driven as a user drives it: through pipes, from subdirectories, in a
// pseudo-terminal (python3's pty module), with the patches it prints fed to git apply and
// patch -p1, and with the completion scripts loaded into real shells.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { CLI, fuseAvailable, manifest, until, workspace, type Env } from './helpers.js'

/** cpfs run with its current directory at `cwd` (a subdirectory, say). */
function cpfsIn (w: Env, cwd: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, env: w.env, encoding: 'utf8', timeout: 120_000 })
  return { code: r.status ?? 128, stdout: r.stdout ?? '', stderr: r.stderr ?? '' }
}

// Runs argv in a pseudo-terminal and prints what the terminal showed, then the exit status.
const PTY = `
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b''
while True:
    try:
        d = os.read(fd, 65536)
    except OSError:
        break
    if not d:
        break
    out += d
_, st = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.stdout.write('\\nEXIT %d\\n' % os.waitstatus_to_exitcode(st))
`

function inPty (cwd: string, env: NodeJS.ProcessEnv, ...args: string[]): { text: string, code: number } {
  const r = spawnSync('python3', ['-c', PTY, process.execPath, CLI, ...args], { cwd, env, encoding: 'utf8', timeout: 60_000 })
  const m = /\nEXIT (-?\d+)\n$/.exec(r.stdout)
  return { text: r.stdout.replace(/\nEXIT -?\d+\n$/, '').replace(/\r\n/g, '\n'), code: m ? Number(m[1]) : -1 }
}

const TREE = [
  "printf 'one\\ntwo\\nthree\\n\\n' > trailing.txt", // ends in an empty line: the last context line is empty
  "printf 'no newline' > nonl.txt",
  'seq 1 50 > lines.txt',
  'seq 1 3000 > wide.txt', // rewritten whole below: past the diff's edit limit (a whole-file hunk)
  'echo gone > old.txt',
  'echo run > tool.sh',
  'mkdir -p src/deep && echo x > src/deep/x.txt && echo y > src/y.txt',
  "{ printf '\\0'; head -c 2999 /dev/urandom; } > blob.bin", // a NUL: binary for sure, as git decides
  'ln -s src link'
].join(' && ')
const TEXT_WORK = "sed -i 's/$/x/' wide.txt && printf 'ONE\\ntwo\\nthree\\n\\n' > trailing.txt && printf 'no newline, changed' > nonl.txt && sed -i '25s/.*/twenty-five/' lines.txt && rm old.txt && echo new > src/new.txt && echo Y >> src/y.txt"
const OTHER_WORK = 'chmod +x tool.sh && printf X >> blob.bin && rm link && ln -s src/deep link'

if (fuseAvailable(t)) {
  t.test('a closed pipe ends the output quietly with 141, never a stack trace', async t => {
    const w = workspace(t, 'echo 1 > small.txt')
    w.ok('mount', w.ws)
    w.run('seq 1 20000 > big.txt')
    for (const cmd of [`diff 1 ${w.ws} | head -2`, `log --json ${w.ws} | head -c 10`, `diff ${w.ws} | true`, `log ${w.ws} | true`, `status ${w.ws} | true`, '--help | true']) {
      const r = w.sh(`set +e +o pipefail; node ${CLI} ${cmd}; echo "status \${PIPESTATUS[0]}" >&2`)
      t.notMatch(r.stderr, /Error|at .*\.js|internal error|EPIPE/, `cpfs ${cmd}: no stack trace, no error`)
      t.match(r.stderr, /^status (0|141)\n$/, `cpfs ${cmd}: the conventional status (141 when the reader left first)`)
    }
    const r = w.sh(`set +e +o pipefail; node ${CLI} diff 1 ${w.ws} | head -2; echo "\${PIPESTATUS[0]}"`)
    t.equal(r.stdout, 'diff --git a/big.txt b/big.txt\nnew file mode 100644\n141\n', 'head got its two lines; a long diff stopped with 141')
    w.ok('unmount', w.ws)
  })

  t.test('cpfs diff is a patch git apply and patch -p1 accept; paths filter; --stat agrees with log', async t => {
    const w = workspace(t, TREE)
    const before = join(w.ws, '..', 'before')
    w.run(`cp -a . ${before}`)
    w.ok('mount', w.ws)
    w.run(TEXT_WORK)
    w.ok('turn', w.ws, '-m', 'text work')
    w.run(OTHER_WORK)
    w.ok('turn', w.ws, '-m', 'modes, binary, symlink')
    const skip = (rel: string) => rel === '.git' || rel.startsWith('.git/')
    const after = manifest(w.ws)
    // Turn 1 (text only) through both tools; turns 1..2 through git apply (binary, mode, symlink).
    const p1 = join(w.ws, '..', 'turn1.patch')
    const p12 = join(w.ws, '..', 'range.patch')
    // Not w.ok(): that trims the output, and a patch's last line may be a context line of one space.
    fs.writeFileSync(p1, w.cpfs('diff', '1', w.ws).stdout)
    fs.writeFileSync(p12, w.cpfs('diff', '1..2', w.ws).stdout)
    t.match(fs.readFileSync(p1, 'utf8'), /@@ -1,4 \+1,4 @@\n-one\n\+ONE\n two\n three\n \n/, 'the final empty context line is kept')
    t.match(fs.readFileSync(p1, 'utf8'), /\\ No newline at end of file/, 'a missing final newline is marked')
    t.match(fs.readFileSync(p1, 'utf8'), /\n@@ -1,3000 \+1,3000 @@\n-1\n-2\n/, 'a file changed on every line: one hunk, all out and all in')
    const gitCopy = join(w.ws, '..', 'git-copy')
    const patchCopy = join(w.ws, '..', 'patch-copy')
    const rangeCopy = join(w.ws, '..', 'range-copy')
    w.run(`cp -a ${before} ${gitCopy} && cp -a ${before} ${patchCopy} && cp -a ${before} ${rangeCopy}`)
    w.run(`git apply --check ${p1} && git apply ${p1}`, gitCopy)
    w.run(`patch -p1 --batch < ${p1} > /dev/null`, patchCopy)
    w.run(`git apply ${p12}`, rangeCopy)
    w.ok('rewind', '2', w.ws)
    const at1 = manifest(w.ws, { skip })
    t.same(manifest(gitCopy, { skip }), at1, 'git apply of cpfs diff 1 gives exactly the tree after turn 1')
    t.same(manifest(patchCopy, { skip }), at1, 'patch -p1 of cpfs diff 1 gives exactly the tree after turn 1')
    t.same(manifest(rangeCopy, { skip }), after, 'git apply of cpfs diff 1..2 gives the tree after turn 2: binary, mode and symlink changes too')
    w.ok('redo', w.ws)

    // -- PATH... keeps the changes at or below those paths; relative to the current directory.
    const only = w.ok('diff', '1', w.ws, '--stat', '--', join(w.ws, 'src'))
    t.match(only, /^A src\/new.txt {2}\+1\n M src\/y.txt {2}\+1\n 2 paths changed, \+2 -0$/, 'diff -- src lists only what changed below src')
    const fromSrc = cpfsIn(w, join(w.ws, 'src'), 'diff', '1', '--', 'y.txt')
    t.equal(fromSrc.code, 0, fromSrc.stderr)
    t.match(fromSrc.stdout, /^diff --git a\/src\/y.txt b\/src\/y.txt\n/, 'a relative path from a subdirectory')
    t.notMatch(fromSrc.stdout, /trailing|new.txt/, 'and nothing else')
    const outside = w.cpfs('diff', '1', w.ws, '--', '/etc')
    t.equal(outside.code, 1, 'a path outside the workspace is refused')
    t.match(outside.stderr, /^cpfs: \/etc is outside the workspace .*\(give paths inside the workspace\)\n$/)

    // log and diff --stat count the same way.
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    for (const turn of [1, 2]) {
      const stat = w.ok('diff', String(turn), w.ws, '--stat').split('\n').at(-1)!
      const l = log[turn - 1]
      t.equal(stat, ` ${l.files} path${l.files === 1 ? '' : 's'} changed, +${l.insertions} -${l.deletions}`, `turn ${turn}: diff --stat and log agree (${stat.trim()})`)
    }
    w.ok('unmount', w.ws)
  })

  t.test('colour and pager on a terminal, neither through a pipe or with NO_COLOR', async t => {
    const w = workspace(t, "printf 'a\\nb\\n' > f")
    w.ok('mount', w.ws)
    w.run("printf 'a\\nB\\n' > f")
    const env = { ...w.env, NO_COLOR: '', CPFS_PAGER: 'sed "s/^/PAGED:/"' }
    delete env.NO_COLOR
    let r = inPty(w.ws, env, 'diff')
    t.equal(r.code, 0)
    t.match(r.text, /^PAGED:/m, 'a terminal gets the pager')
    t.match(r.text, /PAGED:\x1b\[32m\+B\x1b\[0m/, 'added lines green')
    t.match(r.text, /PAGED:\x1b\[31m-b\x1b\[0m/, 'removed lines red')
    r = inPty(w.ws, { ...env, NO_COLOR: '1' }, 'diff')
    t.notMatch(r.text, /\x1b\[/, 'NO_COLOR: no escape sequences')
    t.match(r.text, /PAGED:\+B/, 'still paged')
    r = inPty(w.ws, env, 'diff', '--no-pager', '--color=never')
    t.notMatch(r.text, /PAGED:|\x1b\[/, '--no-pager --color=never')
    r = inPty(w.ws, { ...env, CPFS_PAGER: 'less' }, 'log')
    t.equal(r.code, 0, 'less with LESS=FRX quits by itself when the output fits')
    t.match(r.text, /TURN +OPENED/)
    const piped = w.sh(`node ${CLI} diff | cat`)
    t.notMatch(piped.stdout, /PAGED:|\x1b\[/, 'through a pipe: no pager, no colour')
    t.match(piped.stdout, /^\+B$/m)
    const bad = w.cpfs('diff', w.ws, '--color=sometimes')
    t.equal(bad.code, 2)
    t.match(bad.stderr, /^cpfs: --color must be auto, always or never, not "sometimes"/)
    w.ok('unmount', w.ws, '--discard')
  })

  t.test('every command finds the workspace from a subdirectory; nested workspaces are refused', async t => {
    const w = workspace(t, 'mkdir -p a/b && echo 1 > a/b/f')
    w.ok('mount', w.ws)
    const sub = join(w.ws, 'a', 'b')
    w.run('echo 2 > f', sub)
    for (const args of [['status'], ['log'], ['diff', '--stat'], ['turn', '-m', 'from below']]) {
      const r = cpfsIn(w, sub, ...args)
      t.equal(r.code, 0, `cpfs ${args[0]} from a/b: ${r.stderr.trim()}`)
    }
    t.match(cpfsIn(w, sub, 'status').stdout, new RegExp(`workspace +${w.ws}\\n`), 'status names the workspace above')
    t.equal(JSON.parse(cpfsIn(w, sub, 'log', '--json').stdout)[0].message, 'from below', 'turn from a subdirectory sealed the workspace\'s turn')
    const nested = cpfsIn(w, sub, 'mount')
    t.equal(nested.code, 1, 'mounting a directory inside a mounted workspace is refused')
    t.match(nested.stderr, new RegExp(`^cpfs: ${sub} is inside the workspace ${w.ws}, which is mounted; workspaces do not nest \\(use ${w.ws} itself`))
    t.equal(nested.stderr.split('\n').length, 2, 'in one line')
    t.equal(fs.readdirSync(w.home).length, 1, 'and no second history was created')
    t.equal(cpfsIn(w, sub, 'rewind', '1').code, 0, 'rewind from a subdirectory')
    w.ok('unmount', w.ws)
    // Not mounted: the history above is found (the directory with cpfs history).
    const off = cpfsIn(w, sub, 'log', '--json')
    t.equal(off.code, 0, off.stderr)
    t.same(JSON.parse(off.stdout).map((x: any) => x.turn), [1], 'log from a subdirectory of an unmounted workspace (the rewind left turn 1)')
    const inner = w.cpfs('mount', join(w.ws, 'a'))
    t.equal(inner.code, 1)
    t.match(inner.stderr, /which has cpfs history; workspaces do not nest/, 'nor inside one with history')
    const elsewhere = fs.mkdtempSync(join(tmpdir(), 'cpfs-test-store-'))
    t.teardown(() => fs.rmSync(elsewhere, { recursive: true, force: true }))
    // Around a mounted one (with a CPFS_HOME outside both, so that only the nesting is wrong).
    w.ok('mount', w.ws)
    const r = spawnSync(process.execPath, [CLI, 'mount', join(w.ws, '..')], { env: { ...w.env, CPFS_HOME: elsewhere }, encoding: 'utf8' })
    t.equal(r.status, 1)
    t.match(r.stderr, new RegExp(`contains the workspace ${w.ws}; workspaces do not nest`), 'nor around one')
    t.same(fs.readdirSync(elsewhere), [], 'and left no history behind')
    w.ok('unmount', w.ws)
  })

  t.test('turn labels: -m describes the sealed work, --prompt and --id the new turn; ids are unique', async t => {
    const w = workspace(t, 'echo 1 > f')
    w.ok('mount', w.ws)
    w.run('echo 2 > f')
    t.equal(w.ok('turn', w.ws, '-m', 'add login form'), '2')
    t.equal(w.ok('turn', w.ws, '--prompt', 'Now write the tests', '--id', 'msg_1'), '3')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log.map((x: any) => [x.turn, x.prompt, x.message, x.id]), [[1, null, 'add login form', null], [2, null, null, null], [3, 'Now write the tests', null, 'msg_1']], 'the message is on the turn that did the work; the prompt and id on the new one')
    const human = w.ok('log', w.ws)
    t.match(human, /^TURN +OPENED +CHANGED +LINES +BYTES +ID +PROMPT +MESSAGE$/m, 'log has a PROMPT and a MESSAGE column')
    t.match(human, /^ 1 .* add login form$/m)
    t.match(human, /^\*3 .* msg_1 +Now write the tests$/m)
    const dup = w.cpfs('turn', w.ws, '--id', 'msg_1')
    t.equal(dup.code, 1, 'a repeated id is refused')
    t.match(dup.stderr, /^cpfs: turn 3 already has the id "msg_1"/)
    for (const bad of ['12', 'a..b', 'two words', '']) {
      const r = w.cpfs('turn', w.ws, '--id', bad)
      t.equal(r.code, 1, `--id "${bad}" is refused`)
      t.match(r.stderr, /^cpfs: the turn id .* \(use letters, digits and punctuation/)
    }
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).head, 3, 'no refused turn was opened')
    w.ok('unmount', w.ws)
  })

  t.test('control characters in labels never reach the terminal', async t => {
    const w = workspace(t, 'echo 1 > f')
    w.ok('mount', w.ws)
    const nasty = 'fix \x1b]0;pwned\x07\x1b[31mred\x1b[0m\x9b2J bell\x07 tab\tend'
    w.ok('turn', w.ws, '-m', nasty, '--prompt', 'next\x1b[2Jprompt\r\nsecond line')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.equal(log[0].message, 'fix red bell\ufffd tab end', 'stored without escape sequences; other controls made visible, tabs spaces')
    t.equal(log[1].prompt, 'nextprompt\nsecond line', 'newlines kept in storage (a prompt has lines)')
    t.notMatch(JSON.stringify(log), /\\u001b|\\u009b|\\u0007/, 'no ESC, CSI or BEL is stored')
    const human = w.ok('log', w.ws)
    // eslint-disable-next-line no-control-regex
    t.notMatch(human, /[\x00-\x08\x0b-\x1f\x7f-\x9f]/, 'log prints no control characters (with NO_COLOR)')
    t.match(human, /next ?prompt/, 'the readable part stays')
    t.equal(human.split('\n').length, 3, 'a multi-line prompt is shown on one line')
    w.ok('unmount', w.ws)
  })

  t.test('unmount names the processes that keep the mount busy, and the caller\'s own shell', async t => {
    const w = workspace(t, 'mkdir sub && echo 1 > sub/f')
    w.ok('mount', w.ws)
    const fromInside = w.sh(`cd ${w.ws}/sub && node ${CLI} unmount; exit $?`) // the `exit` keeps bash from exec'ing node: the shell stays inside
    t.equal(fromInside.code, 1, 'refused while the shell is inside')
    t.match(fromInside.stderr, /^cpfs: .* is busy: pid \d+ bash \(cwd .*\/sub\) — your shell is inside \(cd out of .* first, then run cpfs unmount .* again; nothing was changed\)$/m, 'names the shell (pid, command, cwd) and says to cd out')
    t.notMatch(fromInside.stderr, /cd out.*cd out/, 'once (it read "your shell is inside: cd out (cd out of ...")')
    t.equal(fromInside.stderr.split('\n').length, 2, 'in one line')
    const holder = spawn('bash', ['-c', 'exec sleep 60'], { cwd: join(w.ws, 'sub'), stdio: 'ignore' })
    t.teardown(() => { try { holder.kill('SIGKILL') } catch {} })
    // The message names the holder by its command: wait until bash has become sleep.
    const comm = (): string => { try { return fs.readFileSync(`/proc/${holder.pid}/comm`, 'utf8').trim() } catch { return '' } }
    t.ok(await until(() => comm() === 'sleep'), 'the holder runs sleep, its cwd in the mount')
    const busy = w.cpfs('unmount', w.ws)
    t.equal(busy.code, 1)
    t.match(busy.stderr, new RegExp(`pid ${holder.pid} sleep \\(cwd ${w.ws}/sub\\)`), 'another process, by pid, command and cwd')
    t.notMatch(busy.stderr, /your shell/, 'not the caller\'s shell this time')
    t.match(busy.stderr, /nothing was changed\)$/m)
    t.equal(w.run('cat sub/f'), '1\n', 'still mounted')
    holder.kill('SIGKILL')
    await new Promise(resolve => holder.on('exit', resolve))
    w.ok('unmount', w.ws)
  })

  t.test('on a mounted workspace the per-message commands load nothing but the cpfs command itself', async t => {
    // Which files a command loads: CommonJS from require.cache at exit, ES modules from a
    // resolve hook (its speed is measured in bench/cli-start.mjs). The command is one bundled
    // file (scripts/bundle-cli.mjs); the library comes as ES modules only when needed.
    const w = workspace(t, 'echo 1 > f')
    const trace = join(w.ws, '..', 'trace.mjs')
    const hooks = join(w.ws, '..', 'trace-hooks.mjs')
    fs.writeFileSync(hooks, `export async function resolve (specifier, context, next) {
  const r = await next(specifier, context)
  if (!r.url.startsWith('node:')) process.stderr.write('IMPORT ' + r.url + '\\n')
  return r
}
`)
    fs.writeFileSync(trace, `import { register, createRequire } from 'node:module'
register(${JSON.stringify('file://' + hooks)})
const require = createRequire(import.meta.url)
process.on('exit', () => { for (const f of Object.keys(require.cache)) process.stderr.write('REQUIRE ' + f + '\\n') })
`)
    const loaded = (args: string[], input?: string) => {
      const r = spawnSync(process.execPath, ['--import', trace, CLI, ...args], { cwd: w.ws, env: w.env, encoding: 'utf8', input })
      t.equal(r.status, 0, `cpfs ${args.join(' ')}: ${r.stderr.split('\n').filter(l => !/^(IMPORT|REQUIRE) /.test(l)).join(' ').trim()}`)
      // cpfs's own files and packages only: tap's hooks in every child load modules of their own.
      const lines = (kind: string) => [...new Set(r.stderr.split('\n').filter(l => l.startsWith(kind + ' ')).map(l => l.slice(kind.length + 1).replace(/^file:\/\//, '')).filter(f => ours.test(f)))]
      return { imported: lines('IMPORT').filter(f => f !== CLI), required: lines('REQUIRE') }
    }
    const root = join(CLI, '..', '..', '..')
    const ours = new RegExp(`^${root}/(dist/|node_modules/(classic-level|msgpackr|@modelcontextprotocol|diff|zod|esbuild)/)`)
    w.ok('mount', w.ws)
    w.run('echo 2 > f')
    const hook = JSON.stringify({ session_id: 's', cwd: w.ws, hook_event_name: 'UserPromptSubmit', prompt: 'hi' })
    for (const [args, input] of [[['turn']], [['status']], [['log']], [['diff', '--stat']], [['undo']], [['redo']], [['rewind', '1']], [['hook', 'claude-code'], hook]] as Array<[string[], string?]>) {
      const { imported, required } = loaded(args, input)
      t.same(required, [CLI], `cpfs ${args[0]}: the one file of the cpfs command, nothing else required`)
      t.same(imported, [], `cpfs ${args[0]}: no ES module loaded (no library, store, planner, daemon or MCP module)`)
    }
    w.ok('unmount', w.ws)
    const offline = loaded(['log'])
    t.ok(offline.imported.some(u => u.endsWith('/dist/api.js')), 'not mounted, log does load the library (the check can fail)')
    t.ok(offline.imported.some(u => /classic-level/.test(u)), 'and LevelDB with it')
  })

  t.test('the mount table names the workspace\'s cpfs directory; a home no mount option can carry still works', async t => {
    const source = (ws: string) => {
      const line = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find(l => l.split(' ')[4] === ws)
      t.ok(line, `${ws} is in the mount table`)
      const parts = line!.split(' ')
      return parts[parts.indexOf('-') + 2]
    }
    const w = workspace(t, 'echo 1 > f')
    w.ok('mount', w.ws)
    const [dir] = fs.readdirSync(w.home).filter(n => n.startsWith('ws-'))
    t.equal(source(w.ws), `cpfs:${join(w.home, dir)}`, 'the source is cpfs: and the directory with the socket, the log and the store')
    w.run('echo 2 > f')
    // The mount table is enough: a caller with another CPFS_HOME (an agent host's clean
    // environment) reaches the same daemon.
    const elsewhere = { ...w.env, CPFS_HOME: join(w.home, '..', 'other-home') }
    const r = spawnSync(process.execPath, [CLI, 'turn', w.ws], { env: elsewhere, encoding: 'utf8' })
    t.equal(r.status, 0, r.stderr)
    t.equal(r.stdout, '2\n', 'turn 1 sealed, 2 opened, through the daemon the mount names')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).head, 2)
    w.ok('unmount', w.ws)

    const odd = join(w.home, '..', 'a home, with a comma')
    fs.mkdirSync(odd)
    const v = workspace(t, 'echo 1 > f', { env: { CPFS_HOME: odd } })
    v.ok('mount', v.ws)
    t.equal(source(v.ws), 'cpfs', 'a directory name a mount option cannot carry: plain cpfs')
    v.run('echo 2 > f')
    t.equal(v.ok('turn', v.ws), '2', 'and commands find the daemon from the path, as before')
    t.match(v.ok('status', v.ws), /head +turn 2/)
    v.ok('unmount', v.ws)
    t.equal(v.run('cat f'), '2\n', 'applied')
  })

  t.test('typos, per-command help, status --all, completion for bash, zsh and fish', async t => {
    const w = workspace(t, 'echo 1 > f')
    let r = w.cpfs('umount')
    t.equal(r.code, 2)
    t.equal(r.stderr, 'cpfs: unknown command "umount"; did you mean unmount? (cpfs unmount --help)\n')
    r = w.cpfs('rewnd', '1')
    t.match(r.stderr, /did you mean rewind\?/, 'an edit away')
    r = w.cpfs('help', 'rewind')
    t.equal(r.code, 0)
    t.match(r.stdout, /^Usage: cpfs rewind TURN/, 'cpfs help rewind is the rewind help')
    t.equal(r.stdout, w.cpfs('rewind', '--help').stdout, 'the same as cpfs rewind --help')

    w.ok('mount', w.ws)
    w.run('echo 2 > f')
    w.ok('turn', w.ws, '--id', 'msg_7')
    const other = workspace(t, 'echo o > o')
    const home = w.env.CPFS_HOME!
    spawnSync(process.execPath, [CLI, 'mount', other.ws], { env: w.env })
    spawnSync(process.execPath, [CLI, 'unmount', other.ws], { env: w.env })
    const all = JSON.parse(w.ok('status', '--all', '--json'))
    const mine = all.find((x: any) => x.workspace === w.ws)
    const theirs = all.find((x: any) => x.workspace === other.ws)
    t.ok(mine && theirs, `status --all lists both workspaces of ${home}`)
    t.ok(theirs.lastUsed > 0 && theirs.lastUsed <= Date.now(), 'an unmounted workspace: when it was last used, from its history')
    t.notMatch(w.ok('status', '--all'), new RegExp(`${other.ws}.*\\b0s ago`), 'not "used 0s ago" for every workspace')
    // A sandboxed run's history is copied into the workspace's as a branch, and its own store
    // (under $CPFS_HOME/sandboxes) removed: status --all lists no sandbox left behind.
    const sb = w.cpfs('exec', other.ws, '--sandbox', '--', 'bash', '-c', 'echo s > s')
    t.equal(sb.code, 0, `exec --sandbox: ${sb.stderr.trim()}`)
    const withSandbox = JSON.parse(w.ok('status', '--all', '--json'))
    t.notOk(withSandbox.some((x: any) => x.sandbox === true && x.workspace === other.ws), 'status --all lists no sandbox left behind')
    t.match(JSON.parse(w.ok('log', '--all', '--json', other.ws)).branches, [{ by: 'sandbox', what: /echo s > s/ }], 'the run is a branch of the workspace\'s history')

    // The completion scripts call cpfs by name (for turn numbers and ids): put it on PATH.
    const bin = join(w.ws, '..', 'bin')
    fs.mkdirSync(bin)
    fs.writeFileSync(join(bin, 'cpfs'), `#!/bin/sh\nexec ${process.execPath} ${CLI} "$@"\n`, { mode: 0o755 })
    const PATH = `${bin}:${process.env.PATH}`
    // bash: the real completion function, as bash calls it.
    const bash = (line: string) => w.run(`set +eu; export PATH=${PATH}; eval "$(node ${CLI} completion bash)"
      COMP_LINE=${JSON.stringify(line)}; COMP_POINT=\${#COMP_LINE}
      read -ra COMP_WORDS <<< "$COMP_LINE"; [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
      COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
      _cpfs; printf '%s\\n' "\${COMPREPLY[@]}"`)
    t.match(bash('cpfs rew'), /^rewind$/m, 'subcommands')
    t.match(bash('cpfs rewind --'), /^--dry-run$/m, 'flags of the command')
    t.notMatch(bash('cpfs rewind --'), /^--keep-turns$/m, 'only its own flags')
    const turns = bash('cpfs rewind ')
    t.match(turns, /^1$/m, 'turn numbers of the workspace here')
    t.match(turns, /^msg_7$/m, 'and ids')
    t.match(bash('cpfs diff --'), /^--stat$/m)
    for (const shell of ['zsh', 'fish']) {
      if (spawnSync(shell, ['--version']).error) {
        t.comment(`${shell} is not installed here (Debian package ${shell}): its completion script is only checked for its contents`)
        const script = w.ok('completion', shell)
        t.match(script, /rewind/, `${shell} script names the commands`)
        continue
      }
      const script = join(w.ws, '..', `cpfs.${shell}`)
      fs.writeFileSync(script, w.ok('completion', shell))
      const check = spawnSync(shell, shell === 'zsh' ? ['-n', script] : ['--no-execute', script], { encoding: 'utf8' })
      t.equal(check.status, 0, `${shell} parses its completion script: ${check.stderr}`)
      if (shell === 'fish') {
        const c = spawnSync('fish', ['-c', `source ${script}; complete -C 'cpfs rewind '; complete -C 'cpfs rewind --'; complete -C 'cpfs unm'`], { cwd: w.ws, env: { ...w.env, PATH }, encoding: 'utf8' })
        t.match(c.stdout, /^msg_7/m, 'fish completes turn ids')
        t.match(c.stdout, /^--dry-run/m, 'fish completes flags')
        t.match(c.stdout, /^unmount/m, 'fish completes commands')
      }
    }
    w.ok('unmount', w.ws)
  })
}
