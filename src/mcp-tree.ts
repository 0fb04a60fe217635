// The MCP server's history tree (issue 23): an agent lists the branches its rewinds left, to
// go back to any of their turns (rewind with bN:T) or tips (bN).
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import type { Target } from './api.js'
import { BOUND, MAX_CHARS, READ_ONLY, answer, args, maxChars, rel } from './mcp-answers.js'
import { branches } from './tree-api.js'

export function registerTreeTools (server: McpServer, target: Target): void {
  server.registerTool('list_branches', {
    title: 'List branches',
    description: `History is a tree: what a rewind, undo or discard left is kept as a branch, also after later writes. Lists each branch, most recently left first: its name (bN), when and by what it was left, how many turns it shares with the head, and its own turns (ref "bN:T" for rewind; rewind "bN" goes to its tip) with their prompts and first paths. ${BOUND} Changes nothing.`,
    inputSchema: args('list_branches', {
      limit: z.number().int().min(1).max(200).optional().describe('how many branches (default 20)'),
      paths_per_turn: z.number().int().min(0).max(50).optional().describe('how many paths of each turn to list (default 3)'),
      max_chars: maxChars
    }),
    annotations: { title: 'List branches', ...READ_ONLY }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => {
    const all = await branches(target)
    const perTurn = a.paths_per_turn ?? 3
    const shown = all.slice(0, a.limit ?? 20).map(b => ({
      branch: b.branch,
      leftAt: new Date(b.leftAt).toISOString(),
      by: b.by,
      sharedTurns: b.shared,
      redoGoesHere: b.redo,
      turns: b.turns.map(t => ({ ref: t.ref, prompt: t.prompt, message: t.message, id: t.id, files: t.files, paths: t.changes.slice(0, perTurn).map(c => rel(c.path)) }))
    }))
    return { branches: shown, ...(all.length > shown.length ? { more: all.length - shown.length } : {}) }
  }))
}
