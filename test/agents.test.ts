// Agent-host integration: the Claude Code prompt hook driven the way Claude Code calls it,
// and the MCP server driven by a real MCP client from the same SDK.
import t, { type Test } from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { CLI, ROOT, daemonPid, fuseAvailable, manifest, stopDaemon, workspace, type Env } from './helpers.js'

const TREE = 'mkdir src && echo one > src/a.txt && echo keep > keep.txt'

/** A real MCP client of `cpfs mcp` on the workspace, closed when the test ends. */
async function connectMcp (t: Test, w: Env): Promise<Client> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', w.ws], env: w.env as Record<string, string>, stderr: 'pipe' })
  const client = new Client({ name: 'cpfs-test', version: '1.0.0' })
  await client.connect(transport)
  t.teardown(() => client.close())
  return client
}

if (fuseAvailable(t)) {
  t.test('the Claude Code UserPromptSubmit hook opens one turn per prompt', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const hook = (prompt: string, cwd: string) => spawnSync(process.execPath, [CLI, 'hook', 'claude-code'], {
      cwd,
      env: w.env,
      encoding: 'utf8',
      input: JSON.stringify({ session_id: 'abcdef123456', transcript_path: '/tmp/t.jsonl', cwd, permission_mode: 'default', hook_event_name: 'UserPromptSubmit', prompt })
    })
    let r = hook('Add a greeting to a.txt\nand more details', join(w.ws, 'src'))
    t.equal(r.code ?? r.status, 0, 'exit 0')
    t.equal(r.stdout, '', 'nothing on stdout (it would reach the model\'s context)')
    w.run('echo greeting >> src/a.txt')
    r = hook('Now delete keep.txt', w.ws)
    w.run('rm keep.txt')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log.map((x: any) => [x.id, x.prompt, x.message]), [[null, null, null], ['abcdef12:1', 'Add a greeting to a.txt', null], ['abcdef12:2', 'Now delete keep.txt', null]], 'one turn per prompt, labelled with its prompt')
    w.ok('rewind', 'abcdef12:2', w.ws)
    t.equal(w.run('cat keep.txt src/a.txt'), 'keep\none\ngreeting\n', 'rewind <id> goes back to just before that prompt')
    w.ok('rewind', 'abcdef12:1', w.ws)
    t.equal(w.run('cat src/a.txt'), 'one\n')
    w.ok('unmount', w.ws)
    r = hook('not mounted now', w.ws)
    t.equal(r.status, 0, 'an unmounted workspace never blocks the prompt')
    t.match(r.stderr, /not in a mounted cpfs workspace/)
    r = spawnSync(process.execPath, [CLI, 'hook', 'claude-code'], { cwd: w.ws, env: w.env, encoding: 'utf8', input: 'garbage' })
    t.equal(r.status, 0, 'garbage on stdin never blocks the prompt either')
    t.equal(r.stderr, 'cpfs hook: the hook input is not JSON (it starts "garbage"); nothing done\n', 'and is reported as not JSON (it read "no hook JSON on stdin")')
    r = spawnSync(process.execPath, [CLI, 'hook', 'claude-code'], { cwd: w.ws, env: w.env, encoding: 'utf8', input: '' })
    t.equal(r.stderr, 'cpfs hook: no hook JSON on stdin; nothing done\n', 'no input at all is no input')
  })

  t.test('the MCP server: list -> diff -> dry-run -> rewind -> redo with a real MCP client', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo two >> src/a.txt && echo new > new.txt')
    w.ok('turn', w.ws, '-m', 'second', '--id', 'm2')
    w.run('rm keep.txt')
    const client = await connectMcp(t, w)
    const tools = (await client.listTools()).tools.map(x => x.name).sort()
    t.same(tools, ['bisect', 'blame', 'changes_since', 'checkpoint', 'list_branches', 'list_turns', 'list_views', 'merge', 'pull', 'push', 'redo', 'revert', 'rewind', 'rewind_dry_run', 'show_diff', 'status', 'step_begin', 'step_end', 'undo_step', 'view_close', 'view_open'], 'the tools')
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r: any = await client.callTool({ name, arguments: args })
      return { error: Boolean(r.isError), text: r.content[0].text as string }
    }
    const turns = JSON.parse((await call('list_turns')).text).list
    t.same(turns.map((x: any) => [x.turn, x.id, x.files]), [[1, null, 2], [2, 'm2', 1]], 'list_turns')
    t.same(turns[0].paths, [{ path: 'new.txt', change: 'added' }, { path: 'src/a.txt', change: 'modified' }], 'with the paths, workspace-relative')
    const diff = JSON.parse((await call('show_diff', { turn: '1' })).text).changes
    t.same(diff.map((c: any) => [c.path, c.change, c.insertions]), [['new.txt', 'added', 1], ['src/a.txt', 'modified', 1]], 'show_diff: the same path form')
    const blamed = JSON.parse((await call('blame', { path: 'src/a.txt' })).text)
    t.match(blamed, { path: 'src/a.txt', total: 1, lines: [{ turn: 1, change: 'modified', insertions: 1, by: 'mount', command: /^bash -euo pipefail -c echo two >> src\/a\.txt/ }] }, 'blame: the turn, the change, and the shell that made it')
    const withPatch = JSON.parse((await call('show_diff', { turn: '1', patch: true })).text).changes
    t.match(withPatch[1].patch, /\+two/, 'unified diffs on request')
    const dry = JSON.parse((await call('rewind_dry_run', { turn: '1' })).text)
    t.same(dry, { canRewind: true, filesChanged: ['keep.txt', 'new.txt', 'src/a.txt'], insertions: 1, deletions: 2, filesChangedTotal: 3 }, 'rewind_dry_run')
    t.equal(w.run('ls'), 'new.txt\nsrc\n', 'the dry run changed nothing')
    const bad = await call('rewind_dry_run', { turn: '42' })
    t.same(JSON.parse(bad.text).canRewind, false, 'a dry run of an unknown turn answers canRewind: false')
    const rw = await call('rewind', { turn: '1' })
    t.notOk(rw.error, 'rewind')
    t.equal(w.run('ls && cat src/a.txt'), 'keep.txt\nsrc\none\n', 'the workspace is back at turn 1')
    const redo = await call('redo')
    t.notOk(redo.error, 'redo')
    t.equal(w.run('ls'), 'new.txt\nsrc\n', 'redo brought turn 2 back')
    // History is a tree: work after a rewind is kept when redo goes back, and the agent can reach it.
    await call('rewind', { turn: '1' })
    w.run('echo side > side.txt')
    t.notOk((await call('redo')).error, 'redo after a write')
    const branches = JSON.parse((await call('list_branches')).text).branches
    t.match(branches, [{ branch: /^b\d+$/, by: 'redo', sharedTurns: 0, turns: [{ ref: /^b\d+:1$/, paths: ['side.txt'] }] }], 'list_branches: the side work, its own turn 1')
    t.notOk((await call('rewind', { turn: branches[0].branch })).error, 'rewind to that branch\'s tip')
    t.equal(w.run('ls'), 'keep.txt\nside.txt\nsrc\n', 'the side work is back')
    await call('redo')
    t.equal(w.run('ls'), 'new.txt\nsrc\n', 'and redo returns')
    const err = await call('rewind', { turn: 'nope' })
    t.ok(err.error, 'errors are tool errors')
    t.match(err.text, /^cpfs: no turn has the number or id "nope"/, 'with the CLI\'s one-line message')
    const cp = JSON.parse((await call('checkpoint', { message: 'from the agent' })).text)
    t.equal(cp.head, 3, 'checkpoint opens a turn')
    // Steps: the MCP client's own tool call, marked, reported and undone alone.
    t.same(JSON.parse((await call('step_begin', { label: 'generate', id: 'call-1' })).text), { step: 1, id: 'call-1' }, 'step_begin')
    w.run('echo generated > gen.txt && rm new.txt')
    const ended = JSON.parse((await call('step_end')).text)
    t.match(ended, { step: 1, id: 'call-1', counts: { added: 1, modified: 0, deleted: 1 }, changes: [{ path: 'gen.txt', change: 'added' }, { path: 'new.txt', change: 'deleted' }] }, 'step_end: what the step changed')
    t.match(ended.feedback, /created 1, deleted 1 paths[^]*\+ gen\.txt[^]*- new\.txt[^]*cpfs undo --step call-1/, 'with the feedback an agent reads')
    t.same(JSON.parse((await call('changes_since', { step: 'call-1' })).text).counts, ended.counts, 'changes_since tells it again')
    t.same(JSON.parse((await call('step_begin', { label: 'later', id: 'call-2' })).text).step, 2)
    w.run('echo later > later.txt')
    await call('step_end', { step: 'call-2' })
    const undoDry = JSON.parse((await call('undo_step', { step: 'call-1', dry_run: true })).text)
    t.same({ paths: undoDry.paths, undone: undoDry.undone }, { paths: ['gen.txt', 'new.txt'], undone: false }, 'undo_step dry_run: what it would put back')
    t.same(JSON.parse((await call('undo_step', { step: 'call-1' })).text).undone, true, 'undo_step')
    t.equal(w.run('ls'), 'later.txt\nnew.txt\nsrc\n', 'the step is undone; the later one is kept')
    // An agent's persistent shell (started before the step) runs a command in it: its write is the step's.
    const shell = spawn('bash', [], { cwd: w.ws, stdio: ['pipe', 'ignore', 'ignore'] })
    t.teardown(() => { shell.kill() })
    await new Promise(resolve => shell.on('spawn', resolve))
    await call('step_begin', { label: 'in the persistent shell', id: 'call-3' })
    shell.stdin.write('echo p > persistent.txt && touch persistent.done\n')
    while (!fs.existsSync(join(w.ws, 'persistent.done'))) await new Promise(resolve => setTimeout(resolve, 50))
    const inShell = JSON.parse((await call('step_end', { step: 'call-3' })).text)
    t.same(inShell.changes.map((c: any) => c.path), ['persistent.done', 'persistent.txt'], 'a persistent shell of the agent writes for the step it runs in')
    const unknown = await call('undo_step', { step: 'nope' })
    t.ok(unknown.error, 'an unknown step is a tool error')
    t.match(unknown.text, /^cpfs: no step has the number or id "nope"/)
  })

  t.test('the hook never blocks a prompt: any input, a stopped daemon, other events; prompt_id; --context', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const hook = (input: string, extra: string[] = []) => {
      const r = spawnSync(process.execPath, [CLI, 'hook', 'claude-code', ...extra], { cwd: w.ws, env: w.env, encoding: 'utf8', input, timeout: 60_000 })
      return { code: r.status, stdout: r.stdout, stderr: r.stderr, killed: r.signal !== null }
    }
    const turns = () => JSON.parse(w.ok('log', w.ws, '--json')).length
    const payload = (o: Record<string, unknown>) => JSON.stringify({ session_id: 's1', cwd: w.ws, hook_event_name: 'UserPromptSubmit', ...o })
    for (const input of ['null', '[]', '42', '"text"', '{}', '', '{"prompt": 7}', '{"prompt": "x", "cwd": 5}', '{"prompt": "x", "session_id": {}}', '{"prompt": "x", "prompt_id": null}']) {
      const r = hook(input)
      t.equal(r.code, 0, `input ${input || '(empty)'}: exit 0`)
      t.equal(r.stdout, '', 'nothing on stdout')
      t.ok(r.stderr.split('\n').length <= 2, `one stderr line at most: ${r.stderr.trim()}`)
      t.notMatch(r.stderr, /internal error|at .*\.js/, 'no internal error')
    }
    t.equal(turns(), 2, 'only the valid prompt among them opened a turn (one with no prompt_id)')
    for (const [what, input] of [['Notification', JSON.stringify({ session_id: 's1', cwd: w.ws, hook_event_name: 'Notification', message: 'x' })], ['a system prompt', payload({ prompt: 'compacting', source: 'system' })]]) {
      const r = hook(input)
      t.equal(r.code, 0)
      t.match(r.stderr, /ignored/, `${what}: ignored, and said so`)
    }
    // A tool call opens a step, not a turn; a PostToolUse for a call without one is said so.
    const pre = hook(JSON.stringify({ session_id: 's1', cwd: w.ws, hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: 'not an object', tool_use_id: 'toolu_x' }))
    t.same([pre.code, pre.stdout, pre.stderr], [0, '', ''], 'PreToolUse (even with a tool_input that is not an object): a step, silently')
    const post = hook(JSON.stringify({ session_id: 's1', cwd: w.ws, hook_event_name: 'PostToolUse', tool_name: 'Bash', tool_use_id: 'toolu_none' }))
    t.same([post.code, post.stdout], [0, ''], 'PostToolUse for a call with no step: exit 0, nothing for the model')
    t.match(post.stderr, /no step was begun for toolu_none \(is PreToolUse hooked too\?\)/, 'and a line saying why')
    t.equal(turns(), 2, 'other events, tool calls and non-user prompts open no turn')
    let r = hook(payload({ prompt: 'Use the id', prompt_id: 'pr_abc' }))
    t.match(r.stderr, /turn 3 \(pr_abc\) opened/)
    t.equal(JSON.parse(w.ok('log', w.ws, '--json')).at(-1).id, 'pr_abc', 'prompt_id is the turn id')
    r = hook(payload({ prompt: 'Use the id', prompt_id: 'pr_abc' }))
    t.equal(turns(), 3, 'the same prompt twice (the hook ran twice) opens no second turn')
    w.run('echo w > work.txt')
    r = hook(payload({ prompt: 'again', prompt_id: 'pr_abc' }))
    const ids = JSON.parse(w.ok('log', w.ws, '--json')).map((x: any) => x.id)
    t.equal(new Set(ids.filter((x: any) => x)).size, ids.filter((x: any) => x).length, `ids stay unique (${ids.join(' ')})`)
    r = hook(payload({ prompt: '\x1b]0;owned\x07Title \x1b[31mred' }))
    const last = JSON.parse(w.ok('log', w.ws, '--json')).at(-1)
    t.equal(last.prompt, 'Title red', 'escape sequences in a prompt are not stored')
    r = hook(payload({ prompt: 'with context', prompt_id: 'ctx_1' }), ['--context'])
    const ctx = JSON.parse(r.stdout)
    t.equal(ctx.hookSpecificOutput.hookEventName, 'UserPromptSubmit', '--context: the documented additionalContext output')
    t.match(ctx.hookSpecificOutput.additionalContext, /cpfs rewind ctx_1/)

    // A stopped daemon still accepts connections but never answers: the hook gives up in time.
    const pid = daemonPid(w.home)
    process.kill(pid, 'SIGSTOP')
    try {
      r = hook(payload({ prompt: 'while stopped' }))
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    t.equal(r.code, 0, 'a stopped daemon: exit 0')
    t.notOk(r.killed, 'it ended by itself (the 60 s guard of the test did not have to kill it)')
    t.match(r.stderr, /did not answer .*no checkpoint taken/, 'saying the daemon did not answer')
    w.ok('unmount', w.ws)
  })

  t.test('MCP: views of old turns, bisect, revert and merge, with dry runs, from a real MCP client', async t => {
    const w = workspace(t, 'echo "exit 0" > check.sh && printf "a\nb\nc\n" > notes.txt')
    w.ok('mount', w.ws)
    w.run('echo one > one.txt')
    w.ok('turn', w.ws, '-m', 'one')
    w.run('echo "exit 3" > check.sh')
    w.ok('turn', w.ws, '-m', 'breaks it')
    w.run('sed -i s/c/C/ notes.txt')
    w.ok('turn', w.ws, '-m', 'three')
    const client = await connectMcp(t, w)
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r: any = await client.callTool({ name, arguments: args })
      return { error: Boolean(r.isError), text: r.content[0].text as string }
    }
    // A view of turn 2's start: one.txt is there, the check still passes; the live tree is as it was.
    const before = manifest(w.ws)
    const opened = await call('view_open', { turn: 2 })
    t.notOk(opened.error, `view_open: ${opened.text}`)
    const view = JSON.parse(opened.text)
    t.match(view, { turn: 2, ref: '2', at: 'start' }, 'the view of turn 2')
    t.equal(fs.readFileSync(join(view.path, 'check.sh'), 'utf8'), 'exit 0\n', 'the file as it was then')
    t.equal(fs.readFileSync(join(view.path, 'one.txt'), 'utf8'), 'one\n')
    t.throws(() => fs.writeFileSync(join(view.path, 'one.txt'), 'x'), { code: 'EROFS' }, 'the view refuses writes')
    t.same(JSON.parse((await call('list_views')).text).views.map((v: any) => v.path), [view.path], 'list_views')
    t.same(JSON.parse((await call('view_close', { path: view.path })).text).closed.map((v: any) => v.path), [view.path], 'view_close')
    t.same(JSON.parse((await call('list_views')).text).views, [], 'no view left')
    t.same(manifest(w.ws), before, 'the workspace did not change')
    // bisect: turn 2 broke check.sh.
    const b = await call('bisect', { good: 1, command: 'sh check.sh' })
    t.notOk(b.error, `bisect: ${b.text}`)
    const found = JSON.parse(b.text)
    t.match(found.first, { turn: 2, label: 'breaks it' }, 'bisect finds turn 2')
    t.same(found.changes.map((c: any) => c.path), ['check.sh'], 'with what it changed, workspace-relative')
    // revert turn 2, after a dry run that changes nothing.
    const dry = JSON.parse((await call('revert', { turn: 2, dry_run: true })).text)
    t.match(dry, { dryRun: true, applied: false, conflicts: [], changes: [{ path: 'check.sh' }] }, 'revert dry_run says what it would change')
    t.same(manifest(w.ws), before, 'and changes nothing')
    const rv = JSON.parse((await call('revert', { turn: 2 })).text)
    t.match(rv, { applied: true, what: 'revert turn 2' }, 'revert')
    t.equal(w.run('cat check.sh notes.txt'), 'exit 0\na\nb\nC\n', 'turn 2 is taken back, turn 3 kept')
    // merge: a rewind leaves a branch; its work comes back by a merge, with a conflict first.
    await call('rewind', { turn: 1 })
    w.run('echo side > side.txt && sed -i s/a/A/ notes.txt')
    w.ok('turn', w.ws, '-m', 'side work')
    const branches = JSON.parse((await call('list_branches')).text).branches
    const left = branches.find((x: any) => x.turns.some((tt: any) => tt.message === 'breaks it'))
    t.ok(left, 'the line the rewind left is a branch')
    const mdry = JSON.parse((await call('merge', { branch: left.branch, dry_run: true })).text)
    t.match(mdry, { dryRun: true, applied: false, conflicts: [] }, 'merge dry_run: clean')
    t.same(mdry.changes.map((c: any) => c.path).sort(), ['notes.txt', 'one.txt'], 'the branch\'s one.txt and its notes.txt line, merged')
    const m = JSON.parse((await call('merge', { branch: left.branch })).text)
    t.match(m, { applied: true, what: `merge ${left.branch}` }, 'merge')
    t.equal(w.run('cat notes.txt one.txt side.txt check.sh'), 'A\nb\nC\none\nside\nexit 0\n', 'both lines of work, merged line by line')
    w.run('sed -i s/C/X/ notes.txt')
    w.ok('turn', w.ws)
    // The merge's turn brought line 3's C; a later turn changed it again: taking the merge back conflicts there.
    const clash = JSON.parse((await call('revert', { turn: m.turn, dry_run: true })).text)
    t.match(clash, { applied: false, conflicts: [{ path: 'notes.txt', why: 'content' }] }, 'a conflict: the path and why, workspace-relative')
    const err = await call('merge', { branch: 'b99' })
    t.ok(err.error, 'an unknown branch is a tool error')
    t.match(err.text, /^cpfs: /, 'with the CLI\'s one-line message')
    await client.close()
    w.ok('unmount', w.ws, '--discard')
  })

  t.test('MCP: numbers or strings for turns, annotations on every tool, read-only tools never write', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo two >> src/a.txt')
    w.ok('turn', w.ws)
    w.run('for i in $(seq 1 30); do echo $i > f$i; done && rm keep.txt')
    const connect = async () => {
      const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', w.ws], env: { ...w.env, CPFS_TEST_CRASH_AFTER_OP: '' } as Record<string, string>, stderr: 'pipe' })
      const client = new Client({ name: 'cpfs-test', version: '1.0.0' })
      await client.connect(transport)
      t.teardown(() => client.close())
      return client
    }
    let client = await connect()
    const { tools } = await client.listTools()
    for (const tool of tools) {
      t.equal(typeof tool.annotations?.readOnlyHint, 'boolean', `${tool.name}: readOnlyHint`)
      t.equal(typeof tool.annotations?.destructiveHint, 'boolean', `${tool.name}: destructiveHint`)
    }
    const ann = Object.fromEntries(tools.map(x => [x.name, x.annotations]))
    t.equal(ann.rewind?.destructiveHint, true, 'rewind is marked destructive')
    for (const n of ['list_turns', 'list_branches', 'list_views', 'bisect', 'show_diff', 'rewind_dry_run', 'status']) t.equal(ann[n]?.readOnlyHint, true, `${n} is read-only`)
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r: any = await client.callTool({ name, arguments: args })
      return { error: Boolean(r.isError), text: r.content.map((c: any) => c.text) as string[] }
    }
    const dry = await call('rewind_dry_run', { turn: 1 })
    t.notOk(dry.error, 'a number is a turn')
    t.equal(JSON.parse(dry.text[0]).canRewind, true)
    const diff = await call('show_diff', { turn: 1 })
    t.notOk(diff.error)
    t.same(JSON.parse(diff.text[0]).changes.map((c: any) => c.path), ['src/a.txt'], 'show_diff with a number')
    const rw = await call('rewind', { turn: 2 })
    t.notOk(rw.error, 'rewind with a number')
    await client.close()

    // An interrupted plan (the applier killed after its first operation)...
    w.run('for i in $(seq 1 30); do echo $i > f$i; done')
    await stopDaemon(w.home, w.ws)
    const crashed = spawnSync(process.execPath, [CLI, 'unmount', w.ws], { env: { ...w.env, CPFS_TEST_CRASH_AFTER_OP: '1' }, encoding: 'utf8' })
    t.equal(crashed.signal, 'SIGKILL', 'the applier was killed mid-plan')
    const real = manifest(w.ws)
    client = await connect()
    const list = await call('list_turns')
    t.notOk(list.error)
    t.match(list.text.join('\n'), /a plan to the real directory was interrupted.*nothing was changed now/, 'list_turns reports the pending plan in its answer')
    const st = await call('status')
    t.equal(JSON.parse(st.text[0]).interrupted, true, 'status says so too')
    t.notOk((await call('show_diff', { turn: 1 })).error)
    t.notOk((await call('rewind_dry_run', { turn: '1' })).error)
    t.same(manifest(w.ws), real, 'and none of the read-only tools touched the real directory')
    await client.close()
    w.ok('unmount', w.ws)
  })
}


if (fuseAvailable(t)) {
  t.test('the hook\'s generated id is what the docs say: <first 8 characters of session_id>:<n>, n never given twice', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const hook = (prompt: string) => spawnSync(process.execPath, [CLI, 'hook', 'claude-code'], {
      cwd: w.ws,
      env: w.env,
      encoding: 'utf8',
      input: JSON.stringify({ session_id: 'abcdef123456-7890', cwd: w.ws, hook_event_name: 'UserPromptSubmit', prompt })
    })
    for (const p of ['one', 'two', 'three']) {
      hook(p)
      w.run(`echo ${p} > ${p}.txt`)
    }
    const ids = () => JSON.parse(w.ok('log', w.ws, '--json')).map((x: any) => x.id)
    t.same(ids(), [null, 'abcdef12:1', 'abcdef12:2', 'abcdef12:3'], 'the n-th prompt of the session is <first 8 characters>:n')
    w.ok('rewind', 'abcdef12:2', w.ws)
    const r = hook('four')
    t.match(r.stderr, /turn 4 \(abcdef12:4\) opened/, 'the 4th prompt is :4 after a rewind too (it was :3, the id of a turn rewound away)')
    t.same(ids(), [null, 'abcdef12:1', 'abcdef12:2', 'abcdef12:4'])
    const readme = fs.readFileSync(join(ROOT, 'README.md'), 'utf8')
    t.match(readme, /`<first 8 characters of session_id>:<n>`/, 'the README says so')
    t.match(w.ok('hook', '--help'), /the first 8\ncharacters of session_id/, 'and so does cpfs hook --help')
    w.ok('unmount', w.ws, '--discard')
  })

  t.test('MCP answers are bounded: one turn of 20,000 paths, paging, the same path form, unknown arguments refused', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    // One turn the size of an npm ci: 20,000 files, made by a script in the mount, and a big text file.
    w.run('for d in $(seq 1 20); do mkdir -p node_modules/p$d; for i in $(seq 1 1000); do echo "$d $i" > node_modules/p$d/f$i.js; done; done; seq 1 30000 > big.txt')
    w.ok('turn', w.ws)
    const client = await connectMcp(t, w)
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r: any = await client.callTool({ name, arguments: args })
      const text = r.content.map((c: any) => c.text).join('\n') as string
      return { error: Boolean(r.isError), text, json: r.isError ? null : JSON.parse(r.content[0].text) }
    }
    const LIMIT = 20_000
    const { tools } = await client.listTools()
    for (const tool of tools.filter(x => x.name !== 'checkpoint')) t.match(tool.description, /at most 20,000 characters/, `${tool.name} states the bound`)
    for (const tool of tools) t.equal((tool.inputSchema as any).additionalProperties, false, `${tool.name}: its schema admits no other argument`)

    const started = Date.now()
    const list = await call('list_turns')
    t.comment(`list_turns after a turn of 20,000 paths: ${Date.now() - started} ms, ${list.text.length} characters`)
    t.ok(list.text.length <= LIMIT, `list_turns is small: ${list.text.length} characters (it was 2.7 million for an npm ci)`)
    const big = list.json.list[0]
    t.ok(big.files > 20_000, `it counts the turn's paths: ${big.files}`)
    t.equal(big.paths.length, 5, 'and lists the first five')
    t.equal(big.more_paths, big.files - 5, 'saying how many more')
    t.equal(big.insertions, undefined, 'without reading every file for line counts unless asked (lines: true)')
    const wide = await call('list_turns', { paths_per_turn: 200, limit: 200 })
    t.ok(wide.text.length <= LIMIT, `more paths per turn still fit: ${wide.text.length}`)
    const small = await call('list_turns', { max_chars: 2000, paths_per_turn: 200 })
    t.ok(small.text.length <= 2000, `max_chars lowers the bound: ${small.text.length}`)
    t.match(small.json.note, /paths per turn listed/, 'and says it listed fewer paths')

    const page1 = await call('show_diff', { turn: 1 })
    t.ok(page1.text.length <= LIMIT, `show_diff of the turn: ${page1.text.length} characters`)
    t.equal(page1.json.paths, big.files, 'counts every path')
    t.equal(page1.json.changes.length, 100, 'lists a page of 100')
    t.equal(page1.json.next_offset, 100, 'and where the next page starts')
    const page2 = await call('show_diff', { turn: 1, offset: 100 })
    t.equal(page2.json.changes[0].path, (await call('show_diff', { turn: 1, offset: 100, limit: 1 })).json.changes[0].path)
    t.notSame(page2.json.changes[0], page1.json.changes[0], 'the next page goes on')
    const patches = await call('show_diff', { turn: 1, patch: true, limit: 1000 })
    t.ok(patches.text.length <= LIMIT, `with patches too: ${patches.text.length}`)
    t.ok(patches.json.next_offset > 0 && patches.json.next_offset < 1000, `fewer paths fit with their patches: next_offset ${patches.json.next_offset}`)
    const bigPatch = await call('show_diff', { turn: 1, patch: true, paths: ['big.txt'] })
    t.ok(bigPatch.text.length <= LIMIT, `a patch longer than the bound is cut: ${bigPatch.text.length}`)
    t.match(bigPatch.json.changes[0].patch_cut, /the patch has \d+ characters; .*cpfs diff 1 -- big\.txt prints it whole/, 'and says so')

    const dry = await call('rewind_dry_run', { turn: 1 })
    t.ok(dry.text.length <= LIMIT, `rewind_dry_run: ${dry.text.length} characters`)
    t.equal(dry.json.filesChangedTotal, big.files, 'counts every path')
    t.equal(dry.json.filesChanged.length, 200, 'lists 200')
    t.equal(dry.json.next_offset, 200)

    const every = [list, page1, patches, dry, await call('status')].map(x => x.text).join('\n')
    t.notMatch(every, /"(path|from)":"\/|"filesChanged":\["\//, 'no tool gives a path with a leading "/"')
    t.match(every, /"path":"node_modules\/p1\/f1\.js"/, 'all the same form: workspace-relative')

    const head = (await call('status')).json.head
    const bad = await call('checkpoint', { turn: 'x' })
    t.ok(bad.error, 'an unknown argument is an error')
    t.match(bad.text, /unknown argument "turn": checkpoint takes message, prompt, id/, 'naming it and the arguments the tool takes')
    t.equal((await call('status')).json.head, head, 'and nothing was done (no turn was added)')
    const rw = await call('rewind', { turn: 1, force: true })
    t.match(rw.text, /unknown argument "force": rewind takes turn/, 'rewind with an argument it does not take is refused')
    t.equal(w.run('cat big.txt | wc -l'), '30000\n', 'before rewinding anything')
    t.match((await call('list_turns', { max_chars: 10 })).text, /max_chars/, 'a bound below the minimum is refused too')
    const rel = await call('show_diff', { turn: 1, paths: ['/big.txt'] })
    t.match(rel.text, /is not inside the workspace .*paths are workspace-relative, without a leading "\/"/, 'a path with a leading "/" gets the rule')
    await client.close()
    w.ok('unmount', w.ws, '--discard')
  })
}
