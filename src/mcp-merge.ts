// The MCP server's revert and merge (issue 23): an agent takes back one middle turn, or brings a
// branch's work (a rewind's, a sandboxed run's) into the head, after a dry run if it likes. A
// conflict changes nothing: the answer lists each side so the agent can fix the paths first.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import type { Target } from './api.js'
import { BOUND, MAX_CHARS, answer, args, maxChars, rel } from './mcp-answers.js'
import { merge, revert, type MergeResult } from './merge-api.js'

/** Paths workspace-relative, as every tool answers them; conflicts keep their sides. */
function shown (r: MergeResult): Record<string, unknown> {
  return {
    what: r.what,
    dryRun: r.dryRun,
    applied: r.applied,
    turn: r.turn,
    head: r.head,
    changes: r.changes.map(c => ({ path: rel(c.path), change: c.change })),
    conflicts: r.conflicts.map(c => ({ ...c, path: rel(c.path) }))
  }
}

const DOES = 'Answers {what, dryRun, applied, turn (the new turn, null if nothing was applied), head, changes, conflicts}. Any conflict changes nothing (applied: false); each conflict has path, why (content, binary, modify/delete, type, hard link, unsure, ...), and the base, theirs and ours sides, with a "merged" text marked as git marks conflicts.'

export function registerMergeTools (server: McpServer, target: Target): void {
  server.registerTool('revert', {
    title: 'Revert one turn',
    description: `Take back what one turn changed, as git revert does, keeping every later turn: its inverse is merged into the head and sealed as a new turn "revert turn T"; text a later turn changed elsewhere is merged line by line. dry_run: say what it would do and change nothing. Needs the workspace mounted. ${DOES} ${BOUND}`,
    inputSchema: args('revert', {
      turn: z.union([z.number().int(), z.string()]).describe('the turn to take back: a number, -N back from the head, or an id'),
      dry_run: z.boolean().optional().describe('only say what it would change, and the conflicts'),
      max_chars: maxChars
    }),
    annotations: { title: 'Revert one turn', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => shown(await revert(String(a.turn), { ...target, dryRun: Boolean(a.dry_run) }))))

  server.registerTool('merge', {
    title: 'Merge a branch',
    description: `Bring a branch's work (list_branches: what a rewind left, or a sandboxed run's "cpfs exec --sandbox" work) into the head as a new turn "merge bN", with three-way rules as git merge has: the base is where the branch started. dry_run: say what it would do and change nothing. Needs the workspace mounted. ${DOES} ${BOUND}`,
    inputSchema: args('merge', {
      branch: z.string().describe('the branch, bN (list_branches names them)'),
      dry_run: z.boolean().optional().describe('only say what it would change, and the conflicts'),
      max_chars: maxChars
    }),
    annotations: { title: 'Merge a branch', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => shown(await merge(a.branch, { ...target, dryRun: Boolean(a.dry_run) }))))
}
