// Claude Code's tool hooks (issue 22): PreToolUse opens a step named by the call's
// tool_use_id, PostToolUse ends it and tells the model what the call changed, as Claude Code's
// documented hook output: {"hookSpecificOutput": {"hookEventName": "PostToolUse",
// "additionalContext": "..."}} on stdout, exit 0. Nothing is printed for a call that changed
// nothing and met nothing worth a look, and nothing ever for PreToolUse: the tool call goes on
// as it would without cpfs. The step's owner is the agent: the nearest ancestor of this hook
// process that is not a shell (Claude Code runs hooks through one), so that the agent's own
// edits and the commands it runs belong to the step, and another agent's do not.
import * as fs from 'node:fs'
import { isAbsolute, resolve } from 'node:path'
import { call } from './control/client.js'
import type { Location } from './store/locate.js'
import { feedbackText } from './reports/feedback.js'
import { displayLine } from './session/labels.js'
import { isWithin } from './paths/paths.js'
import { isCpfsError } from './errors.js'

export interface ToolHookInput {
  hook_event_name: 'PreToolUse' | 'PostToolUse' | 'Stop'
  session_id?: string
  cwd?: string
  tool_name?: string
  tool_input?: Record<string, unknown>
  tool_use_id?: string
}

const CALL_TIMEOUT_MS = 3000
const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'fish', 'ash', 'ksh', 'busybox'])

/** The agent running this hook: the nearest ancestor that is not a shell (nor another cpfs hook). */
export function agentPid (from = process.ppid): number {
  let pid = from
  for (let depth = 0; depth < 8 && pid > 1; depth++) {
    let comm: string
    let ppid: number
    let cmdline = ''
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'latin1')
      comm = /^Name:\s*(.*)$/m.exec(status)?.[1] ?? ''
      ppid = Number(/^PPid:\s*(\d+)$/m.exec(status)?.[1] ?? 0)
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ')
    } catch {
      return pid
    }
    const ourHook = /\bcpfs\b/.test(cmdline) && /\bhook\b/.test(cmdline)
    if (!SHELLS.has(comm) && !ourHook) return pid
    pid = ppid
  }
  return pid
}

/** What a tool call is, in a line: the tool and its command or file. */
export function toolLabel (input: ToolHookInput): string {
  const tool = typeof input.tool_name === 'string' ? input.tool_name : 'tool'
  const i = input.tool_input ?? {}
  const what = typeof i.command === 'string' ? i.command : typeof i.file_path === 'string' ? i.file_path : typeof i.notebook_path === 'string' ? i.notebook_path : typeof i.description === 'string' ? i.description : ''
  const line = displayLine(what.split('\n')[0] ?? '').trim()
  return line ? `${tool}: ${line.length > 120 ? line.slice(0, 119) + '…' : line}` : tool
}

/**
 * Workspace paths ('/a/b') a tool call names: its file_path, or the words of its command that
 * look like paths (a slash, or a name with an extension), resolved from its cwd. Changes
 * elsewhere are flagged; a call that names none (npm test) flags none.
 */
export function namedPaths (input: ToolHookInput, workspace: string): string[] {
  const i = input.tool_input ?? {}
  const cwd = typeof input.cwd === 'string' && isAbsolute(input.cwd) ? input.cwd : workspace
  const words: string[] = []
  for (const k of ['file_path', 'notebook_path', 'path']) if (typeof i[k] === 'string') words.push(i[k] as string)
  if (typeof i.command === 'string') {
    for (const w of i.command.split(/[\s;&|()<>]+/)) {
      const word = w.replace(/^['"]|['"]$/g, '')
      if (word === '' || word.startsWith('-') || word.includes('=') || word.includes('$')) continue
      // A sed or perl expression (s/a/b/g, y/ab/cd/) is not a path.
      if (/^(s|y|tr)\/.*\/[a-z0-9]*$/.test(word) || /^\/.*\/[a-z]*$/.test(word) && !word.slice(1, -1).includes('/')) continue
      if (word.includes('/') || /^[\w.-]+\.[A-Za-z0-9]{1,8}$/.test(word)) words.push(word)
    }
  }
  const out = new Set<string>()
  for (const w of words) {
    const abs = resolve(cwd, w)
    if (isWithin(abs, workspace)) out.add(abs === workspace ? '/' : abs.slice(workspace.length))
  }
  return [...out].slice(0, 20)
}

/** End the open steps of an agent's session (a daemon older than steps answers BAD_REQUEST: none). */
export async function endSessionSteps (socket: string, session: string): Promise<void> {
  try {
    await call(socket, { cmd: 'step-end-session', args: { session } }, { timeoutMs: CALL_TIMEOUT_MS })
  } catch (err) {
    if (!(isCpfsError(err) && err.code === 'BAD_REQUEST')) throw err
  }
}

/** Handle one tool event; returns what it printed on stdout (null: nothing). */
export async function toolHook (input: ToolHookInput, workspace: string, loc: Location, say: (s: string) => void): Promise<string | null> {
  const id = typeof input.tool_use_id === 'string' && input.tool_use_id !== '' ? input.tool_use_id : undefined
  if (input.hook_event_name === 'Stop') {
    // The agent finished its answer: a tool call it interrupted ends here.
    if (typeof input.session_id === 'string') await endSessionSteps(loc.socket, input.session_id)
    return null
  }
  if (input.hook_event_name === 'PreToolUse') {
    const args = {
      label: toolLabel(input),
      tool: typeof input.tool_name === 'string' ? input.tool_name : undefined,
      id,
      paths: namedPaths(input, workspace),
      session: typeof input.session_id === 'string' ? input.session_id : undefined,
      ownerPid: agentPid()
    }
    try {
      await call(loc.socket, { cmd: 'step-begin', args }, { timeoutMs: CALL_TIMEOUT_MS })
    } catch (err: any) {
      // The hook ran twice for one call: its step is open already.
      if (err?.code !== 'DUPLICATE_STEP') throw err
    }
    return null
  }
  if (id === undefined) {
    say('cpfs hook: PostToolUse without a tool_use_id; no step to end')
    return null
  }
  try {
    await call(loc.socket, { cmd: 'step-end', args: { ref: id } }, { timeoutMs: CALL_TIMEOUT_MS })
  } catch (err: any) {
    // No step for this call (PreToolUse not hooked, or it failed): nothing to report on.
    if (err?.code === 'UNKNOWN_STEP' || err?.code === 'NO_OPEN_STEP') {
      say(`cpfs hook: no step was begun for ${displayLine(id).slice(0, 40)} (is PreToolUse hooked too?)`)
      return null
    }
    if (err?.code !== 'STEP_ENDED') throw err
  }
  const report = await call(loc.socket, { cmd: 'step-show', args: { ref: id } }, { timeoutMs: CALL_TIMEOUT_MS })
  const additionalContext = feedbackText(report, workspace)
  if (additionalContext === null) return null
  const out = JSON.stringify({ hookSpecificOutput: { hookEventName: 'PostToolUse', additionalContext } })
  process.stdout.write(out + '\n')
  return out
}
