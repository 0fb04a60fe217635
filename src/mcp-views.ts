// The MCP server's views and bisect (issue 23): an agent looks at (or runs a test against) the
// tree of an older turn without leaving the live one, and finds the turn that broke something.
// Views are read-only mounts outside the workspace; nothing here changes the workspace's files.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import type { Target } from './api.js'
import { BOUND, MAX_CHARS, READ_ONLY, answer, args, maxChars, rel } from './mcp-answers.js'
import { closeViews, listViews, openView, type ViewInfo } from './views-api.js'
import { bisect } from './bisect.js'

const turnArg = z.union([z.number().int(), z.string()])

function shown (v: ViewInfo): Record<string, unknown> {
  return { path: v.path, turn: v.turn, ref: v.ref, at: v.at, label: v.label, openedAt: new Date(v.openedAt).toISOString() }
}

/** Opening and closing a view changes no file of the workspace, but is not idempotent (each open mounts one more). */
const MOUNTS = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }

export function registerViewTools (server: McpServer, target: Target): void {
  server.registerTool('view_open', {
    title: 'Open a view of a turn',
    description: `Mount the tree as it was at the start of a turn (any branch: N, -N, an id, bN:T, bN for a branch's tip), read-only, at a path outside the workspace: read files there, run a test or a diff tool against it, while the workspace stays as it is. end: the tree the turn left instead. Answers {path, turn, ref, at, label, openedAt}; close it with view_close. Needs the workspace mounted. ${BOUND}`,
    inputSchema: args('view_open', {
      turn: turnArg.describe('the turn: a number, -N back from the head, an id, bN:T, or bN'),
      path: z.string().optional().describe('an absolute path for the view: a new or empty directory outside the workspace (default: one cpfs makes)'),
      end: z.boolean().optional().describe('the tree the turn left (its end) instead of its start')
    }),
    annotations: { title: 'Open a view of a turn', ...MOUNTS }
  }, async (a) => answer(MAX_CHARS, async () => shown(await openView(String(a.turn), { ...target, path: a.path, end: Boolean(a.end) }))))

  server.registerTool('view_close', {
    title: 'Close views',
    description: `Unmount the view at path, or every view of the workspace when no path is given. Answers {closed: [...]}. ${BOUND}`,
    inputSchema: args('view_close', { path: z.string().optional().describe('the view to close (as view_open answered it)') }),
    annotations: { title: 'Close views', ...MOUNTS }
  }, async (a) => answer(MAX_CHARS, async () => ({ closed: (await closeViews({ ...target, path: a.path })).map(shown) })))

  server.registerTool('list_views', {
    title: 'List views',
    description: `The views of older turns open now. Answers {views: [...]}. ${BOUND} Changes nothing.`,
    inputSchema: args('list_views', {}),
    annotations: { title: 'List views', ...READ_ONLY }
  }, async () => answer(MAX_CHARS, async () => ({ views: (await listViews(target)).map(shown) })))

  server.registerTool('bisect', {
    title: 'Find the turn that broke it',
    description: `Like git bisect run: run a shell command (a test) in read-only views of the trees turns left, between a good turn and a bad one (default: the head), and find the first bad turn. Exit 0 = good, 125 = cannot test (skip), 1-127 = bad, 128 or more stops. write: run each probe in a private writable copy (for tests that write build output). The workspace is never touched. Answers {first, candidates, changes (what the first bad turn changed), probes}. ${BOUND}`,
    inputSchema: args('bisect', {
      good: turnArg.describe('a turn whose tree is good'),
      bad: turnArg.optional().describe('a later turn whose tree is bad (default: the head, as it is now)'),
      command: z.string().describe('the shell command line to run in each tree, e.g. "npm test"'),
      write: z.boolean().optional().describe('let the command write (in a private copy, thrown away after)'),
      max_chars: maxChars
    }),
    annotations: { title: 'Find the turn that broke it', ...READ_ONLY, idempotentHint: false }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => {
    const r = await bisect({ ...target, good: String(a.good), bad: a.bad === undefined ? undefined : String(a.bad), command: ['sh', '-c', a.command], write: Boolean(a.write), output: 'ignore' })
    return { ...r, changes: r.changes.map(c => ({ ...c, path: rel(c.path) })) }
  }))
}
