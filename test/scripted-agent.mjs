// A scripted coding agent: replays tool calls as Claude Code makes them, with no model. For
// each call it runs the configured hook command through a shell with the documented hook JSON
// on stdin (PreToolUse, then PostToolUse with the tool's response), and does the tool's work
// itself in between: Bash runs the command in a child shell, Write and Edit change the file
// from this process, as Claude Code's own tools do. Prints, as JSON, what each PostToolUse
// hook printed (its additionalContext) and how each hook exited.
//   node scripted-agent.mjs SCRIPT.json
// SCRIPT: { hook: "shell command", cwd, session_id, calls: [{ id, tool, input } | { wait: ms }] }
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { resolve } from 'node:path'

const script = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
const results = []

function hook (event, call, extra = {}) {
  const input = {
    session_id: script.session_id,
    transcript_path: '/dev/null',
    cwd: script.cwd,
    hook_event_name: event,
    tool_name: call.tool,
    tool_input: call.input,
    tool_use_id: call.id,
    ...extra
  }
  const r = spawnSync('sh', ['-c', script.hook], { input: JSON.stringify(input), encoding: 'utf8', cwd: script.cwd, timeout: 60_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

function runTool (call) {
  const { tool, input } = call
  if (tool === 'Bash') {
    const r = spawnSync('bash', ['-c', input.command], { cwd: script.cwd, encoding: 'utf8', timeout: 60_000 })
    return { stdout: r.stdout, stderr: r.stderr, interrupted: false, exit_code: r.status }
  }
  const path = resolve(script.cwd, input.file_path)
  if (tool === 'Write') {
    fs.writeFileSync(path, input.content)
    return { type: 'create', filePath: path }
  }
  if (tool === 'Edit') {
    const before = fs.readFileSync(path, 'utf8')
    if (!before.includes(input.old_string)) throw new Error(`Edit: old_string not found in ${path}`)
    fs.writeFileSync(path, before.replace(input.old_string, input.new_string))
    return { filePath: path }
  }
  if (tool === 'Read') return { content: fs.readFileSync(path, 'utf8') }
  throw new Error(`no such tool: ${tool}`)
}

for (const call of script.calls) {
  if (call.wait !== undefined) {
    await new Promise(resolve => setTimeout(resolve, call.wait))
    continue
  }
  const pre = hook('PreToolUse', call)
  const response = runTool(call)
  const post = hook('PostToolUse', call, { tool_response: response })
  let context = null
  if (post.stdout.trim()) {
    const out = JSON.parse(post.stdout)
    if (out.hookSpecificOutput?.hookEventName !== 'PostToolUse') throw new Error('PostToolUse output names another event: ' + post.stdout)
    context = out.hookSpecificOutput.additionalContext
  }
  results.push({ id: call.id, pre: pre.code, post: post.code, preStdout: pre.stdout, stderr: pre.stderr + post.stderr, context })
}
process.stdout.write(JSON.stringify(results) + '\n')
