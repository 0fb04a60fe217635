// Agent-host integration: the Claude Code prompt hook driven the way Claude Code calls it,
// and the MCP server driven by a real MCP client from the same SDK.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { CLI, fuseAvailable, workspace } from './helpers.js'

const TREE = 'mkdir src && echo one > src/a.txt && echo keep > keep.txt'

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
    t.same(log.map((x: any) => [x.id, x.message]), [[null, null], ['abcdef12:1', 'Add a greeting to a.txt'], ['abcdef12:2', 'Now delete keep.txt']], 'one turn per prompt, named after it')
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
  })

  t.test('the MCP server: list -> diff -> dry-run -> rewind -> redo with a real MCP client', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo two >> src/a.txt && echo new > new.txt')
    w.ok('turn', w.ws, '-m', 'second', '--id', 'm2')
    w.run('rm keep.txt')
    const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', w.ws], env: w.env as Record<string, string>, stderr: 'pipe' })
    const client = new Client({ name: 'cpfs-test', version: '1.0.0' })
    await client.connect(transport)
    t.teardown(() => client.close())
    const tools = (await client.listTools()).tools.map(x => x.name).sort()
    t.same(tools, ['checkpoint', 'list_turns', 'redo', 'rewind', 'rewind_dry_run', 'show_diff'], 'the tools')
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r: any = await client.callTool({ name, arguments: args })
      return { error: Boolean(r.isError), text: r.content[0].text as string }
    }
    const turns = JSON.parse((await call('list_turns')).text)
    t.same(turns.map((x: any) => [x.turn, x.id, x.files]), [[1, null, 2], [2, 'm2', 1]], 'list_turns')
    const diff = JSON.parse((await call('show_diff', { turn: '1' })).text)
    t.same(diff.map((c: any) => [c.path, c.change, c.insertions]), [['/new.txt', 'added', 1], ['/src/a.txt', 'modified', 1]], 'show_diff')
    const withPatch = JSON.parse((await call('show_diff', { turn: '1', patch: true })).text)
    t.match(withPatch[1].patch, /\+two/, 'unified diffs on request')
    const dry = JSON.parse((await call('rewind_dry_run', { turn: '1' })).text)
    t.same(dry, { canRewind: true, filesChanged: ['keep.txt', 'new.txt', 'src/a.txt'], insertions: 1, deletions: 2 }, 'rewind_dry_run')
    t.equal(w.run('ls'), 'new.txt\nsrc\n', 'the dry run changed nothing')
    const bad = await call('rewind_dry_run', { turn: '42' })
    t.same(JSON.parse(bad.text).canRewind, false, 'a dry run of an unknown turn answers canRewind: false')
    const rw = await call('rewind', { turn: '1' })
    t.notOk(rw.error, 'rewind')
    t.equal(w.run('ls && cat src/a.txt'), 'keep.txt\nsrc\none\n', 'the workspace is back at turn 1')
    const redo = await call('redo')
    t.notOk(redo.error, 'redo')
    t.equal(w.run('ls'), 'new.txt\nsrc\n', 'redo brought turn 2 back')
    const err = await call('rewind', { turn: 'nope' })
    t.ok(err.error, 'errors are tool errors')
    t.match(err.text, /^cpfs: no turn has the number or id "nope"/, 'with the CLI\'s one-line message')
    const cp = JSON.parse((await call('checkpoint', { message: 'from the agent' })).text)
    t.equal(cp.head, 3, 'checkpoint opens a turn')
  })
}
