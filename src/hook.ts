// Agent-host hooks: open one turn per user message without writing code, and one step per
// tool call (PreToolUse, PostToolUse: hook-tools.ts). Claude Code runs a
// UserPromptSubmit hook command with a JSON object on stdin ({session_id, cwd, prompt,
// hook_event_name, prompt_id?, ...}) before it handles each prompt; `cpfs hook claude-code`
// turns that into
//   cpfs turn --id <prompt_id, or session:n> --prompt <first line of the prompt>
// so `cpfs rewind <id>` goes back to just before that prompt. `session` is the first 8
// characters of session_id (short enough to type; a UUID's first 8 are enough to tell
// sessions apart), `n` counts that session's prompts in this workspace from 1: one more than
// the highest n the store has given the session, also to turns rewound away since, so that an
// id never names a second prompt (counting the turns left in the history gave the 4th prompt
// after `cpfs rewind <session>:2` the id <session>:3).
// Input that is not JSON at all is reported as such; empty input as no input.
// A hook must never block the user's prompt: whatever the input (null, wrong types, garbage,
// another event), whatever the daemon does (stopped, gone, slow), it exits 0 with at most one
// line on stderr and nothing on stdout (Claude Code adds a hook's stdout to the model's
// context) unless the user asked for that with --context. It never touches the mount itself
// (the workspace comes from the mount table, the rest over the control socket with short
// timeouts): a call into a mount whose daemon is stopped would hang in the kernel.
import { resolve } from 'node:path'
import { call } from './control/client.js'
import { locateMounted } from './control/mounted.js'
import { isCpfsError } from './errors.js'
import { checkId, displayLine } from './session/labels.js'
import { findWorkspaceOf } from './workspaces.js'
import { endSessionSteps, toolHook, type ToolHookInput } from './hook-tools.js'

export interface PromptHookInput {
  session_id?: string
  cwd?: string
  prompt?: string
  prompt_id?: string | number
  hook_event_name?: string
  /** Who wrote the prompt; only the user's prompts open turns. */
  source?: string
}

export interface HookOptions {
  /** The workspace (default: the one that holds the input's cwd). */
  dir?: string
  /** Also tell the model (on stdout, as additional context) which turn the prompt opened. */
  context?: boolean
}

/** How long the whole hook may take, and each daemon call. */
const HOOK_BUDGET_MS = 8000
const CALL_TIMEOUT_MS = 3000
const MAX_INPUT = 4 * 1024 * 1024

function firstLine (prompt: string): string {
  const first = prompt.split('\n').find(l => l.trim()) ?? ''
  const line = displayLine(first).trim()
  return line.length > 72 ? line.slice(0, 71) + '…' : line
}

/** The session part of a generated id: the first 8 characters of session_id that an id may hold. */
export function sessionPart (sessionId: unknown): string {
  let session = typeof sessionId === 'string' ? sessionId.replace(/[^A-Za-z0-9._-]/g, '').slice(0, 8) : ''
  if (session === '' || /^\d+$/.test(session)) session = 'session' + session
  return session
}

/**
 * The id for this prompt: its prompt_id when it makes a valid id, else <session>:<n> with n
 * one past the highest n among `used` (every id the store holds) and the turns; made unique.
 */
export function turnLabel (input: PromptHookInput, turns: Array<{ id: string | null }>, used: string[] = []): { id: string, prompt: string } {
  const taken = new Set(turns.map(t => t.id).filter((x): x is string => x !== null))
  let id: string | null = null
  if (typeof input.prompt_id === 'string' || typeof input.prompt_id === 'number') {
    try {
      id = checkId(String(input.prompt_id))
    } catch {}
  }
  if (id === null) {
    const session = sessionPart(input.session_id)
    let n = 1
    for (const x of [...used, ...taken]) {
      const m = x.startsWith(session + ':') ? /^(\d+)(~\d+)?$/.exec(x.slice(session.length + 1)) : null
      if (m) n = Math.max(n, Number(m[1]) + 1)
    }
    while (taken.has(`${session}:${n}`)) n++
    id = `${session}:${n}`
  }
  let unique = id
  for (let k = 2; taken.has(unique); k++) unique = `${id}~${k}`
  return { id: unique, prompt: firstLine(typeof input.prompt === 'string' ? input.prompt : '') }
}

/** Every id the store holds (a daemon older than this hook answers BAD_REQUEST: then none). */
async function usedIds (socket: string): Promise<string[]> {
  try {
    return await call(socket, { cmd: 'ids' }, { timeoutMs: CALL_TIMEOUT_MS })
  } catch (err) {
    if (isCpfsError(err) && err.code === 'BAD_REQUEST') return []
    throw err
  }
}

async function readStdin (): Promise<string> {
  if (process.stdin.isTTY) return ''
  let data = ''
  process.stdin.setEncoding('utf8')
  for await (const chunk of process.stdin) {
    data += chunk
    if (data.length > MAX_INPUT) break
  }
  return data
}

const TOOL_EVENTS = new Set(['PreToolUse', 'PostToolUse', 'Stop'])

/** Why this input opens no turn, or null when it does. */
function notAPrompt (input: unknown): string | null {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return 'the hook input is not a JSON object'
  const i = input as Record<string, unknown>
  if (TOOL_EVENTS.has(i.hook_event_name as string)) return null
  if (i.hook_event_name !== undefined && i.hook_event_name !== 'UserPromptSubmit') return `${displayLine(String(i.hook_event_name)).slice(0, 40)} is not handled (UserPromptSubmit opens a turn, PreToolUse and PostToolUse a step)`
  if (i.source !== undefined && i.source !== 'user') return `the prompt comes from "${displayLine(String(i.source)).slice(0, 20)}", not the user`
  if (typeof i.prompt !== 'string') return 'the hook input has no prompt'
  for (const k of ['session_id', 'cwd'] as const) {
    if (i[k] !== undefined && typeof i[k] !== 'string') return `"${k}" in the hook input is not a string`
  }
  return null
}

/** The turn opened (its id), or null; never throws, never blocks longer than its budget. */
export async function claudeCodeHook (opts: HookOptions = {}): Promise<string | null> {
  const say = (s: string): void => { process.stderr.write(s + '\n') }
  let timer: NodeJS.Timeout | undefined
  const budget = new Promise<null>((resolve) => {
    timer = setTimeout(() => {
      say(`cpfs hook: gave up after ${HOOK_BUDGET_MS / 1000} s (the cpfs daemon is not answering); no checkpoint taken`)
      resolve(null)
    }, HOOK_BUDGET_MS)
    timer.unref()
  })
  try {
    return await Promise.race([run(opts, say), budget])
  } catch (err) {
    say(`cpfs hook: ${isCpfsError(err) ? err.line().replace(/^cpfs: /, '') : displayLine(String((err as Error)?.message ?? err))}; no checkpoint taken`)
    return null
  } finally {
    clearTimeout(timer)
  }
}

async function run (opts: HookOptions, say: (s: string) => void): Promise<string | null> {
  const raw = await readStdin()
  if (raw.trim() === '') {
    say('cpfs hook: no hook JSON on stdin; nothing done')
    return null
  }
  let input: unknown
  try {
    input = JSON.parse(raw)
  } catch {
    say(`cpfs hook: the hook input is not JSON (it starts "${displayLine(raw.trim().slice(0, 20))}"); nothing done`)
    return null
  }
  const why = notAPrompt(input)
  if (why) {
    say(`cpfs hook: ignored: ${why}`)
    return null
  }
  const i = input as PromptHookInput
  const tool = TOOL_EVENTS.has(i.hook_event_name ?? '')
  if (tool && typeof (input as ToolHookInput).tool_input !== 'object') (input as ToolHookInput).tool_input = {}
  const cwd = typeof i.cwd === 'string' && i.cwd.startsWith('/') ? i.cwd : process.cwd()
  const workspace = findWorkspaceOf(opts.dir ? resolve(opts.dir) : cwd, { touch: false })
  if (!workspace) {
    say(`cpfs hook: ${displayLine(opts.dir ?? cwd)} is not in a mounted cpfs workspace; no checkpoint taken`)
    return null
  }
  const loc = locateMounted(workspace)
  if (tool) {
    await toolHook(input as ToolHookInput, workspace, loc, say)
    return null
  }
  // A new prompt: the tool calls of the last one are over (one the user interrupted never had
  // its PostToolUse, and its step would stay open).
  if (typeof i.session_id === 'string') await endSessionSteps(loc.socket, i.session_id)
  const turns = await call(loc.socket, { cmd: 'log', args: { lines: false } }, { timeoutMs: CALL_TIMEOUT_MS })
  const label = turnLabel(i, turns, await usedIds(loc.socket))
  const head = turns.at(-1)
  const same = head && head.id !== null && head.id === label.id.replace(/~\d+$/, '') && head.files === 0
  if (same) {
    // The same prompt again (the hook ran twice): its turn is open already.
    say(`cpfs: turn ${head.turn} (${head.id}) is already open for this prompt`)
    return head.id
  }
  const r = await call(loc.socket, { cmd: 'turn', args: { id: label.id, prompt: label.prompt } }, { timeoutMs: CALL_TIMEOUT_MS })
  say(`cpfs: turn ${r.head} (${label.id}) opened; cpfs rewind ${label.id} goes back to before this prompt`)
  if (opts.context) {
    const additionalContext = `cpfs checkpoint: this prompt opened turn ${r.head} (id ${label.id}) in ${workspace}; \`cpfs rewind ${label.id}\` restores the files to how they were before it.`
    process.stdout.write(JSON.stringify({ hookSpecificOutput: { hookEventName: 'UserPromptSubmit', additionalContext } }) + '\n')
  }
  return label.id
}
