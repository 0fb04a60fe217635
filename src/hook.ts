// Agent-host hooks: open one turn per user message without writing code. Claude Code runs a
// UserPromptSubmit hook command with a JSON object on stdin ({session_id, cwd, prompt, ...})
// before it handles each prompt; `cpfs hook claude-code` turns that into
//   cpfs turn --id <session>:<n> -m <first line of the prompt>
// so `cpfs rewind <session>:<n>` goes back to just before the n-th prompt of that session.
// A hook must never block the user's prompt: whatever happens, it exits 0 and prints
// nothing on stdout (Claude Code adds a hook's stdout to the model's context).
import * as api from './api.js'
import { isCpfsError } from './errors.js'
import { findWorkspace, isMounted, locate } from './store/locate.js'

export interface PromptHookInput {
  session_id?: string
  cwd?: string
  prompt?: string
  hook_event_name?: string
}

export function turnLabel (input: PromptHookInput, turns: Array<{ id: string | null }>): { id: string, message: string } {
  const session = String(input.session_id ?? 'session').slice(0, 8)
  const n = turns.filter(t => t.id?.startsWith(session + ':')).length + 1
  const first = String(input.prompt ?? '').split('\n').find(l => l.trim()) ?? ''
  const message = first.length > 72 ? first.slice(0, 71) + '…' : first
  return { id: `${session}:${n}`, message }
}

async function readStdin (): Promise<string> {
  let data = ''
  process.stdin.setEncoding('utf8')
  for await (const chunk of process.stdin) data += chunk
  return data
}

export async function claudeCodeHook (dir?: string): Promise<string | null> {
  let input: PromptHookInput = {}
  try {
    input = JSON.parse(await readStdin())
  } catch {
    process.stderr.write('cpfs hook: no hook JSON on stdin; nothing done\n')
    return null
  }
  const workspace = dir ?? findWorkspace(input.cwd ?? process.cwd())
  if (!workspace || !isMounted(locate(workspace).workspace)) {
    process.stderr.write(`cpfs hook: ${input.cwd ?? process.cwd()} is not in a mounted cpfs workspace; no checkpoint taken\n`)
    return null
  }
  try {
    const label = turnLabel(input, await api.log({ dir: workspace }))
    const head = await api.turn({ dir: workspace, ...label })
    process.stderr.write(`cpfs: turn ${head} (${label.id}) opened; cpfs rewind ${label.id} goes back to before this prompt\n`)
    return label.id
  } catch (err) {
    process.stderr.write(`cpfs hook: ${isCpfsError(err) ? err.line() : String(err)}\n`)
    return null
  }
}
