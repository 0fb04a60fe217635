// `cpfs mcp`: a Model Context Protocol server on stdio, so that an agent can checkpoint and
// undo its own work. Each tool is a thin call into the library; errors come back as tool
// errors carrying the same one-line message the CLI prints. Every tool says what it does to the
// workspace (annotations): the read-only ones (list_turns, show_diff, rewind_dry_run, status)
// never change anything — not even finishing a plan a crash interrupted, which they report
// instead. Turns may be given as numbers or strings (models send both).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { z } from 'zod'
import * as api from './api.js'
import { CpfsError, isCpfsError } from './errors.js'

type ToolResult = { content: Array<{ type: 'text', text: string }>, isError?: boolean }

async function answer (fn: () => Promise<unknown>, notes: () => Promise<string[]> = async () => []): Promise<ToolResult> {
  try {
    const value = await fn()
    const content: ToolResult['content'] = [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) }]
    for (const n of await notes()) content.push({ type: 'text', text: n })
    return { content }
  } catch (err) {
    const e = isCpfsError(err) ? err : new CpfsError('INTERNAL', String((err as Error)?.message ?? err))
    return { content: [{ type: 'text', text: e.line() }], isError: true }
  }
}

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }

export function createMcpServer (target: api.Target): McpServer {
  const server = new McpServer({ name: 'cpfs', version: '0.1.0' })
  const turnArg = z.union([z.number().int(), z.string()]).describe('a turn number (1, 2, ...), or the external id given to cpfs turn --id')
  const rangeArg = z.union([z.number().int(), z.string()]).describe('a turn number or id, or a range "A..B"')

  /** A plan interrupted by a crash: read-only tools leave it alone and say so. */
  const pendingPlan = async (): Promise<string[]> => {
    try {
      const s = await api.status(target)
      return s.interrupted ? ['Note: a plan to the real directory was interrupted (a crash); nothing was changed now. The next command that changes the workspace (rewind, redo, unmount, or cpfs mount) finishes it.'] : []
    } catch {
      return []
    }
  }

  server.registerTool('list_turns', {
    title: 'List checkpoints',
    description: 'The turns (checkpoints) of this workspace: number, time, prompt (what it was opened for), message (what it did), external id, the paths each changed and +/- lines (counted as show_diff counts them). Changes nothing.',
    inputSchema: {},
    annotations: { title: 'List checkpoints', ...READ_ONLY }
  }, async () => answer(() => api.log({ ...target, lines: true }), pendingPlan))

  server.registerTool('status', {
    title: 'Workspace status',
    description: 'Whether the workspace is mounted, the head turn, the number of turns, turns not yet applied to the real directory, redo steps, and whether a plan was interrupted. Changes nothing.',
    inputSchema: {},
    annotations: { title: 'Workspace status', ...READ_ONLY }
  }, async () => answer(async () => {
    const s = await api.status(target)
    delete s.ops
    return s
  }))

  server.registerTool('checkpoint', {
    title: 'Start a new turn',
    description: 'Seal the current turn and start the next one; later changes can be undone back to this point. "message" describes the work of the turn being sealed; "prompt" and "id" label the turn being started.',
    inputSchema: {
      message: z.string().optional().describe('what the turn being sealed did'),
      prompt: z.string().optional().describe('what the next turn is for'),
      id: z.string().optional().describe('an id for the next turn, to rewind to later (unique; not a number)')
    },
    annotations: { title: 'Start a new turn', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async ({ message, prompt, id }) => answer(async () => ({ head: await api.turn({ ...target, message, prompt, id }) })))

  server.registerTool('show_diff', {
    title: 'Show what a turn changed',
    description: 'What a turn (default: the current one) or a range "A..B" changed: per-path +/- counts, or git-style patches (git apply accepts them) with patch=true; "paths" keeps only changes at or below those workspace paths. Changes nothing.',
    inputSchema: {
      turn: rangeArg.optional(),
      patch: z.boolean().optional().describe('include a git-style patch per path'),
      paths: z.array(z.string()).optional().describe('workspace-relative paths to limit the diff to')
    },
    annotations: { title: 'Show what a turn changed', ...READ_ONLY }
  }, async ({ turn, patch, paths }) => answer(async () => (await api.diff(turn === undefined ? undefined : String(turn), { ...target, patches: Boolean(patch), paths })).changes, pendingPlan))

  server.registerTool('rewind_dry_run', {
    title: 'Preview a rewind',
    description: 'What rewinding to the start of a turn would change, without changing anything: {canRewind, error?, filesChanged, insertions, deletions}.',
    inputSchema: { turn: turnArg },
    annotations: { title: 'Preview a rewind', ...READ_ONLY }
  }, async ({ turn }) => answer(async () => {
    const p = await api.rewindPreview(String(turn), target)
    const out: Record<string, unknown> = { canRewind: p.canRewind }
    if (p.error !== undefined) out.error = p.error
    return Object.assign(out, { filesChanged: p.filesChanged, insertions: p.insertions, deletions: p.deletions })
  }, pendingPlan))

  server.registerTool('rewind', {
    title: 'Rewind',
    description: 'Make the workspace exactly what it was when the turn began: later work leaves the files (redo brings it back until something new is written).',
    inputSchema: { turn: turnArg },
    annotations: { title: 'Rewind', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false }
  }, async ({ turn }) => answer(() => api.rewind(String(turn), target)))

  server.registerTool('redo', {
    title: 'Redo',
    description: 'Bring back what the last rewind dropped, if nothing was written since.',
    inputSchema: {},
    annotations: { title: 'Redo', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async () => answer(() => api.redo(target)))

  return server
}

export async function serveMcp (target: api.Target): Promise<void> {
  const server = createMcpServer(target)
  await server.connect(new StdioServerTransport())
  await new Promise<void>((resolve) => { process.stdin.on('close', resolve) })
}
