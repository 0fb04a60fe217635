// `cpfs mcp`: a Model Context Protocol server on stdio, so that an agent can checkpoint and
// undo its own work. Each tool is a thin call into the library; errors come back as tool
// errors carrying the same one-line message the CLI prints.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { z } from 'zod'
import * as api from './api.js'
import { CpfsError, isCpfsError } from './errors.js'

type ToolResult = { content: Array<{ type: 'text', text: string }>, isError?: boolean }

async function answer (fn: () => Promise<unknown>): Promise<ToolResult> {
  try {
    const value = await fn()
    return { content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) }] }
  } catch (err) {
    const e = isCpfsError(err) ? err : new CpfsError('INTERNAL', String((err as Error)?.message ?? err))
    return { content: [{ type: 'text', text: e.line() }], isError: true }
  }
}

export function createMcpServer (target: api.Target): McpServer {
  const server = new McpServer({ name: 'cpfs', version: '0.1.0' })
  const turnArg = z.string().describe('a turn number, or the external id given to cpfs turn --id')

  server.registerTool('list_turns', {
    title: 'List checkpoints',
    description: 'The turns (checkpoints) of this workspace: number, time, message, external id, and the paths each changed.',
    inputSchema: {}
  }, async () => answer(() => api.log(target)))

  server.registerTool('checkpoint', {
    title: 'Start a new turn',
    description: 'Seal the current turn and start the next one; later changes can be undone back to this point.',
    inputSchema: { message: z.string().optional().describe('what the next turn is about'), id: z.string().optional().describe('an id to rewind to later') }
  }, async ({ message, id }) => answer(async () => ({ head: await api.turn({ ...target, message, id }) })))

  server.registerTool('show_diff', {
    title: 'Show what a turn changed',
    description: 'What a turn (default: the current one) or a range "A..B" changed: per-file +/- counts, or unified diffs with patch=true.',
    inputSchema: { turn: z.string().optional().describe('a turn, or a range A..B'), patch: z.boolean().optional().describe('include unified diffs of text files') }
  }, async ({ turn, patch }) => answer(async () => (await api.diff(turn, { ...target, patches: Boolean(patch) })).changes))

  server.registerTool('rewind_dry_run', {
    title: 'Preview a rewind',
    description: 'What rewinding to the start of a turn would change, without changing anything: {canRewind, error?, filesChanged, insertions, deletions}.',
    inputSchema: { turn: turnArg }
  }, async ({ turn }) => answer(async () => {
    const p = await api.rewindPreview(turn, target)
    const out: Record<string, unknown> = { canRewind: p.canRewind }
    if (p.error !== undefined) out.error = p.error
    return Object.assign(out, { filesChanged: p.filesChanged, insertions: p.insertions, deletions: p.deletions })
  }))

  server.registerTool('rewind', {
    title: 'Rewind',
    description: 'Make the workspace exactly what it was when the turn began. Reversible with redo until something new is written.',
    inputSchema: { turn: turnArg }
  }, async ({ turn }) => answer(() => api.rewind(turn, target)))

  server.registerTool('redo', {
    title: 'Redo',
    description: 'Bring back what the last rewind dropped, if nothing was written since.',
    inputSchema: {}
  }, async () => answer(() => api.redo(target)))

  return server
}

export async function serveMcp (target: api.Target): Promise<void> {
  const server = createMcpServer(target)
  await server.connect(new StdioServerTransport())
  await new Promise<void>((resolve) => { process.stdin.on('close', resolve) })
}
