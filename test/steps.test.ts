// Steps (issue 22, parts 2, 4 and 5): `cpfs step begin/end/show/list`, `log --steps`,
// `diff --by-step`, `blame` naming the step, `undo --step` mounted and offline, conflicts and
// --force, two agents at once told apart by their process trees, `exec --step-per-command`,
// steps across turns, rewinds, and kill -9. Real tools in a real mount; the daemon in its own
// process.
import t from 'tap'
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { CLI, daemonPid, exited, fuseAvailable, manifest, workspace, type Env } from './helpers.js'

const TREE = 'echo one > a.txt && echo keep > keep.txt && mkdir src && echo code > src/main.ts && git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm init'
const skip = (rel: string) => rel === '.git' || rel.startsWith('.git/')

/** `cpfs step ...` run by a bash that does `script` inside the step, as a user's shell would. */
function inStep (w: Env, label: string, id: string, script: string): string {
  const cpfs = `'${process.execPath}' '${CLI}'`
  return w.run(`${cpfs} step begin '${label}' --id ${id} >/dev/null\n${script}\n${cpfs} step end ${id}`)
}

if (fuseAvailable(t)) {
  t.test('a step from the shell: show, list, log --steps, diff --by-step, blame, undo --step, redo of nothing lost', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo before >> a.txt') // outside any step
    const told = inStep(w, 'regenerate', 'gen1', 'rm keep.txt && echo new > src/new.ts && echo two >> a.txt')
    t.match(told, /^step 1 \(gen1\)  turn 1  regenerate\n/, 'step end says which step')
    t.match(told, /created 1, modified 1, deleted 1 paths/, 'and what it changed')
    t.match(told, /deleted 1 file tracked by git: keep\.txt/, 'flagging the tracked file it deleted')
    inStep(w, 'later', 'later1', 'echo later > later.txt')
    const list = JSON.parse(w.ok('log', '--steps', '--json', w.ws))
    t.match(list, [{ n: 1, id: 'gen1', label: 'regenerate', turn: 1, inHistory: true }, { n: 2, id: 'later1', turn: 1 }], 'log --steps')
    t.match(w.ok('step', 'list', w.ws), /^step 1 \(gen1\)  turn 1  \d paths  regenerate\nstep 2 \(later1\)/, 'step list')
    const show = JSON.parse(w.ok('step', 'show', 'gen1', '--json', w.ws))
    t.same(show.changes.map((c: any) => [c.path, c.change]), [['/a.txt', 'modified'], ['/keep.txt', 'deleted'], ['/src/new.ts', 'added']], 'step show: its changes only (not the write before it)')
    t.same(show.changes.find((c: any) => c.path === '/a.txt').insertions, 1, 'a.txt: the step\'s line only')
    const bySteps = JSON.parse(w.ok('diff', '--by-step', '--json', w.ws))
    t.same(bySteps.map((s: any) => [s.step, s.changes.length]), [[1, 3], [2, 1]], 'diff --by-step: each step of the turn')
    const byCommand = JSON.parse(w.ok('diff', '--by-command', '--json', w.ws))
    t.match(byCommand.find((c: any) => /^rm keep\.txt$/.test(c.process?.command)), { process: { parents: [{ command: /step begin/ }] }, changes: [{ path: '/keep.txt', change: 'deleted' }] }, 'diff --by-command: rm, with the shell above it, and what it deleted')
    t.ok(byCommand.some((c: any) => c.changes.some((x: any) => x.path === '/later.txt')), 'every change of the turn is under a command')
    t.match(w.ok('diff', '--by-command', w.ws), /pid \d+  rm keep\.txt\n  under /, 'also as text')
    const blame = JSON.parse(w.ok('blame', join(w.ws, 'a.txt'), '--json')).lines
    t.same(blame.map((l: any) => l.step?.id ?? null), [null, 'gen1'], 'blame names the step of each change (none for the write before it)')
    t.match(w.ok('blame', join(w.ws, 'a.txt')), /turn 1  step gen1  modified/, 'also in the text form')
    const before = manifest(w.ws, { skip })
    w.ok('undo', '--step', 'gen1', w.ws)
    t.equal(w.run('cat a.txt keep.txt later.txt'), 'one\nbefore\nkeep\nlater\n', 'undo --step: a.txt as before the step (the earlier write kept), keep.txt back, the later step kept')
    t.notOk(fs.existsSync(join(w.ws, 'src/new.ts')), 'what it made is gone')
    t.equal(w.run('git status --short'), ' M a.txt\n?? later.txt\n', 'git agrees: a.txt has the write made before the step, later.txt is the later step\'s')
    const after = manifest(w.ws, { skip })
    t.not(JSON.stringify(after), JSON.stringify(before))
    t.match(w.cpfs('undo', '--step', 'gen1', w.ws), { code: 1, stderr: /^cpfs: step 1 \(regenerate\) cannot be undone alone: .*\(changed later by cpfs\)/ }, 'a second undo of the same step: its paths changed since (by the undo)')
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws, { skip }), after, 'unmount applies it, verified')
  })

  t.test('conflicts: refused naming the path and the process; undoing the later step first works; --force takes it back anyway', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    inStep(w, 'first', 's1', 'echo first > a.txt && echo f > f.txt')
    inStep(w, 'second', 's2', 'bash -c ": second-shell; echo second > a.txt"')
    const r = w.cpfs('undo', '--step', 's1', w.ws)
    t.equal(r.code, 1, 'refused')
    t.match(r.stderr, /^cpfs: step 1 \(first\) cannot be undone alone: a\.txt \(changed later by pid \d+ bash -c : second-shell/, 'naming the path and who changed it later')
    t.equal(r.stderr.trim().split('\n').length, 1, 'in one line')
    t.equal(w.run('cat a.txt f.txt'), 'second\nf\n', 'and nothing changed')
    const dry = JSON.parse(w.ok('undo', '--step', 's1', '--dry-run', '--json', w.ws))
    t.match(dry, { paths: ['/a.txt', '/f.txt'], conflicts: [{ path: '/a.txt', why: 'later' }], undone: false }, '--dry-run --json lists the conflicts')
    t.equal(w.cpfs('undo', '--step', 's1', '--dry-run', w.ws).code, 1, '--dry-run exits 1 when it would be refused')
    w.ok('undo', '--step', 's2', w.ws)
    t.equal(w.run('cat a.txt'), 'first\n', 'the later step undone first')
    w.ok('undo', '--step', 's1', w.ws)
    t.equal(w.run('cat a.txt; ls'), 'one\na.txt\nkeep.txt\nsrc\n', 'then the earlier one: back to before both')
    inStep(w, 'third', 's3', 'echo third > a.txt')
    inStep(w, 'fourth', 's4', 'echo fourth > a.txt')
    w.ok('undo', '--step', 's3', '--force', w.ws)
    t.equal(w.run('cat a.txt'), 'one\n', '--force: the step\'s "before" is taken back over the later change')
    w.ok('undo', '--step', 's4', '--force', w.ws)
    t.equal(w.run('cat a.txt'), 'third\n', 'and the later version is still in the history')
  })

  t.test('two agents at once in one workspace: each step holds its own agent\'s changes only', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const cpfs = `'${process.execPath}' '${CLI}'`
    // Two shells (agents) interleave: each begins its step, then both write while both are open.
    // Marker files outside the workspace order them: both steps are open while both write.
    const m = (name: string) => join(w.home, name)
    const wait = (name: string) => `until [ -e '${m(name)}' ]; do sleep 0.05; done`
    const agentA = w.runAsync(`${cpfs} step begin A --id a1 >/dev/null; touch '${m('a-open')}'; ${wait('b-open')}; echo A > from-a.txt; sed -i s/one/A/ a.txt; touch '${m('a-wrote')}'; ${wait('b-wrote')}; ${cpfs} step end a1 >/dev/null`)
    const agentB = w.runAsync(`${wait('a-open')}; ${cpfs} step begin B --id b1 >/dev/null; touch '${m('b-open')}'; ${wait('a-wrote')}; echo B > from-b.txt; rm keep.txt; touch '${m('b-wrote')}'; ${cpfs} step end b1 >/dev/null`)
    await Promise.all([agentA, agentB])
    const a = JSON.parse(w.ok('step', 'show', 'a1', '--json', w.ws))
    const b = JSON.parse(w.ok('step', 'show', 'b1', '--json', w.ws))
    t.same(a.changes.map((c: any) => c.path), ['/a.txt', '/from-a.txt'], 'A: its own changes')
    t.same(b.changes.map((c: any) => c.path), ['/from-b.txt', '/keep.txt'], 'B: its own changes')
    t.ok(a.others.some((o: any) => o.path === '/from-b.txt'), 'A is told another process changed from-b.txt meanwhile')
    t.match(a.flags.join('\n'), /other processes changed \d+ paths? meanwhile/, 'as a flag')
    w.ok('undo', '--step', 'b1', w.ws)
    t.equal(w.run('cat a.txt keep.txt; ls'), 'A\nkeep\na.txt\nfrom-a.txt\nkeep.txt\nsrc\n', 'undoing B leaves A\'s work alone')
  })

  t.test('exec --step-per-command: one step per command; one of them undone, offline', async t => {
    const w = workspace(t, TREE)
    const orig = manifest(w.ws, { skip })
    const r = w.cpfs('exec', w.ws, '--step-per-command', '--', 'echo gen > gen.txt', 'rm keep.txt', 'echo more >> a.txt')
    t.equal(r.code, 0, `exec: ${r.stderr}`)
    const list = JSON.parse(w.ok('log', '--steps', '--json', w.ws))
    t.same(list.map((s: any) => [s.n, s.label, s.files]), [[1, 'echo gen > gen.txt', 1], [2, 'rm keep.txt', 1], [3, 'echo more >> a.txt', 1]], 'a step per command, read offline')
    const before = manifest(w.ws, { skip })
    const u = JSON.parse(w.ok('undo', '--step', '2', '--json', w.ws))
    t.match(u, { step: 2, undone: true, mounted: false, summary: { verified: Number } }, 'offline undo --step: a verified plan')
    t.same(manifest(w.ws, { skip }), { ...before, 'keep.txt': orig['keep.txt'] }, 'the real directory: keep.txt back, the rest as it was')
    t.equal(w.run('cat keep.txt gen.txt a.txt'), 'keep\ngen\none\nmore\n')
    t.match(w.cpfs('undo', '--step', '9', w.ws), { code: 1, stderr: /^cpfs: no step has the number or id "9" \(steps are 1\.\.3\)/ }, 'an unknown step: one line, exit 1')
  })

  t.test('steps across a turn, a rewind, and kill -9 of the daemon', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const cpfs = `'${process.execPath}' '${CLI}'`
    // One shell: the step is its own, and the turn is sealed in the middle of it.
    w.run(`${cpfs} step begin long --id long >/dev/null; echo x > x.txt; ${cpfs} turn >/dev/null; echo y > y.txt; ${cpfs} step end long >/dev/null`)
    const show = JSON.parse(w.ok('step', 'show', 'long', '--json', w.ws))
    t.same(show.changes.map((c: any) => c.path), ['/x.txt', '/y.txt'], 'a step open across a turn holds its changes in both')
    t.same(JSON.parse(w.ok('log', '--json', w.ws)).map((x: any) => x.files), [1, 1], 'and each turn keeps its own')
    w.ok('undo', '--step', 'long', w.ws)
    t.equal(w.run('ls'), 'a.txt\nkeep.txt\nsrc\n', 'undone across the turn')
    w.ok('rewind', '1', w.ws)
    t.match(w.cpfs('undo', '--step', 'long', w.ws), { code: 1, stderr: /is not in the current history \(rewound away or pruned\)/ }, 'a step rewound away cannot be undone')
    w.ok('redo', w.ws)
    // A step open when the daemon is killed: its changes stay, it ends at the next mount.
    w.run(`${cpfs} step begin crash --id crash >/dev/null; echo c > c.txt; sync`)
    const pid = daemonPid(w.home)
    process.kill(pid, 'SIGKILL')
    t.ok(await exited(pid), 'the daemon is gone')
    w.sh(`umount -l '${w.ws}' 2>/dev/null || fusermount -uz '${w.ws}' 2>/dev/null || true`)
    w.ok('mount', w.ws)
    const list = JSON.parse(w.ok('log', '--steps', '--json', w.ws))
    t.match(list.at(-1), { id: 'crash', files: 1 }, 'the step survived, with its change')
    t.not(list.at(-1).closedAt, null, 'and was ended by the new mount')
    w.ok('undo', '--step', 'crash', w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'c.txt')), 'and can be undone')
  })

  t.test('a tool call the user interrupted (no PostToolUse): its step ends at the next prompt, or when the agent stops', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const hook = (o: Record<string, unknown>) => spawnSync(process.execPath, [CLI, 'hook', 'claude-code'], { cwd: w.ws, env: w.env, encoding: 'utf8', input: JSON.stringify({ session_id: 'sess-1', cwd: w.ws, ...o }) })
    const open = () => JSON.parse(w.ok('log', '--steps', '--json', w.ws)).filter((s: any) => s.closedAt === null).map((s: any) => s.id)
    hook({ hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'sleep 100' }, tool_use_id: 'toolu_cut' })
    hook({ hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'true' }, tool_use_id: 'toolu_other', session_id: 'sess-2' })
    t.same(open(), ['toolu_cut', 'toolu_other'], 'two calls open, of two sessions')
    const r = hook({ hook_event_name: 'UserPromptSubmit', prompt: 'next' })
    t.equal(r.status, 0)
    t.same(open(), ['toolu_other'], 'the next prompt of sess-1 ended its interrupted call; the other session\'s stays open')
    const stop = hook({ hook_event_name: 'Stop', session_id: 'sess-2', stop_hook_active: false })
    t.same([stop.status, stop.stdout, stop.stderr], [0, '', ''], 'Stop: silently')
    t.same(open(), [], 'and ended sess-2\'s')
  })

  t.test('bad input: one line naming the cause and the fix, non-zero, nothing changed', async t => {
    const w = workspace(t, TREE)
    t.match(w.cpfs('step', 'begin', 'x', w.ws), { code: 1, stderr: /^cpfs: .* is not mounted: a step records changes made in the mount/ }, 'step begin while not mounted')
    w.ok('mount', w.ws)
    t.match(w.cpfs('step', 'end', w.ws), { code: 1, stderr: /^cpfs: no step is open \(begin one with cpfs step begin\)/ }, 'step end with none open')
    t.match(w.cpfs('step', 'show', w.ws), { code: 2, stderr: /^cpfs: cpfs step show needs a step \(its number or id\)/ }, 'step show without a step')
    t.match(w.cpfs('step', 'fly', w.ws), { code: 2, stderr: /^cpfs: no step action "fly" \(use one of: begin, end, show, list\)/ }, 'an unknown action')
    w.ok('step', 'begin', 'a', '--id', 'dup', w.ws)
    t.match(w.cpfs('step', 'begin', 'b', '--id', 'dup', w.ws), { code: 1, stderr: /^cpfs: a step already has the id "dup"/ }, 'a duplicate id')
    t.match(w.cpfs('step', 'begin', 'b', '--id', '12', w.ws), { code: 1, stderr: /^cpfs: / }, 'an id that is a number')
    t.match(w.cpfs('undo', '--step', 'dup', w.ws), { code: 1, stderr: /^cpfs: step 1 is still open \(end it first/ }, 'undo of an open step')
    w.ok('step', 'end', 'dup', w.ws)
    t.match(w.cpfs('undo', '--step', 'dup', w.ws), { code: 1, stderr: /^cpfs: step 1 \(a\) changed nothing/ }, 'undo of a step that changed nothing')
    t.match(w.cpfs('undo', '--dry-run', w.ws), { code: 2, stderr: /--dry-run goes with --step/ }, 'undo --dry-run without --step')
    t.equal(w.run('cat a.txt keep.txt'), 'one\nkeep\n', 'nothing changed')
  })
}
