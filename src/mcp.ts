// `cpfs mcp`: a Model Context Protocol server on stdio, so that an agent can checkpoint and
// undo its own work. Each tool is a thin call into the library, its answer shaped to fit an
// agent's context (src/mcp-answers.ts: summaries, pages, at most 20,000 characters by
// default, workspace-relative paths); errors come back as tool errors carrying the same
// one-line message the CLI prints, and an unknown argument is one of them. Every tool says what it does to the
// workspace (annotations): the read-only ones (list_turns, show_diff, rewind_dry_run, status)
// never change anything — not even finishing a plan a crash interrupted, which they report
// instead. Turns may be given as numbers or strings (models send both).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { z } from 'zod'
import * as api from './api.js'
import { isAbsolute, resolve } from 'node:path'
import { CpfsError } from './errors.js'
import { BOUND, MAX_CHARS, READ_ONLY, answer, args, diffPage, maxChars, previewPage, rel, summaryOut, turnsPage } from './mcp-answers.js'
import { registerStepTools } from './mcp-steps.js'
import { registerTreeTools } from './mcp-tree.js'
import { registerMergeTools } from './mcp-merge.js'
import { registerRemoteTools } from './mcp-remote.js'
import { registerViewTools } from './mcp-views.js'

const offsetArg = z.number().int().min(0).optional().describe('where the page starts in the list (0 = the first; an answer that stops early gives next_offset)')

const turnArg = z.union([z.number().int(), z.string()]).describe('a turn number (1, 2, ...), -N counted back from the head (-1 is the head turn), or the external id given to cpfs turn --id; on another branch (list_branches), "bN:T" (turn T of branch N) or "bN" (its tip)')
const rangeArg = z.union([z.number().int(), z.string()]).describe('a turn number or id, -N counted back from the head, or a range "A..B"')

export function createMcpServer (target: api.Target): McpServer {
  const server = new McpServer({ name: 'cpfs', version: '0.1.0' })
  /** A plan interrupted by a crash: read-only tools leave it alone and say so. */
  const pendingPlan = async (): Promise<string[]> => {
    try {
      const s = await api.status(target)
      return s.interrupted ? ['Note: a plan to the real directory was interrupted (a crash); nothing was changed now. The next command that changes the workspace (rewind, redo, unmount, or cpfs mount) finishes it.'] : []
    } catch {
      return []
    }
  }
  registerHistoryTools(server, target, pendingPlan)
  registerDiffTools(server, target, pendingPlan)
  registerChangeTools(server, target)
  registerStepTools(server, target)
  registerTreeTools(server, target)
  registerMergeTools(server, target)
  registerRemoteTools(server, target)
  registerViewTools(server, target)
  return server
}

/** list_turns and status: the history and the workspace, read only. */
function registerHistoryTools (server: McpServer, target: api.Target, pendingPlan: () => Promise<string[]>): void {
  server.registerTool('list_turns', {
    title: 'List checkpoints',
    description: `The turns (checkpoints) of this workspace, newest last: number, id, prompt (what it was opened for), message (what it did), when it was opened, how many paths (files) and bytes it changed, and its first paths. By default the newest 20 turns and 5 paths each; from_turn/to_turn and limit page through the rest, paths_per_turn lists more; lines=true adds +/- line counts as show_diff counts them (reads the changed files: slower on big turns). ${BOUND} Changes nothing.`,
    inputSchema: args('list_turns', {
      from_turn: z.number().int().min(1).optional().describe('the first turn to list'),
      to_turn: z.number().int().min(1).optional().describe('the last turn to list (default: the head)'),
      limit: z.number().int().min(1).max(200).optional().describe('how many turns (default 20)'),
      paths_per_turn: z.number().int().min(0).max(200).optional().describe('how many paths of each turn to list (default 5)'),
      lines: z.boolean().optional().describe('count +/- lines of text files (slower)'),
      max_chars: maxChars
    }),
    annotations: { title: 'List checkpoints', ...READ_ONLY }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => {
    const perTurn = a.paths_per_turn ?? 5
    const turns = await api.log({ ...target, lines: Boolean(a.lines), paths: perTurn })
    return turnsPage(turns, { from: a.from_turn, to: a.to_turn, limit: a.limit ?? 20, pathsPerTurn: perTurn, max: (a.max_chars ?? MAX_CHARS) - 500 })
  }, pendingPlan))

  server.registerTool('status', {
    title: 'Workspace status',
    description: `Whether the workspace is mounted, the head turn, the number of turns, turns not yet applied to the real directory, redo steps, and whether a plan was interrupted. ${BOUND} Changes nothing.`,
    inputSchema: args('status', {}),
    annotations: { title: 'Workspace status', ...READ_ONLY }
  }, async () => answer(MAX_CHARS, async () => {
    const s = await api.status(target)
    delete s.ops
    const skipped = s.skipped
    return { ...s, skipped: skipped.slice(0, 20).map(rel), ...(skipped.length > 20 ? { skippedCount: skipped.length } : {}) }
  }))
}

/** show_diff, blame and rewind_dry_run: what a turn changed, who changed a path, what a rewind would change. */
function registerDiffTools (server: McpServer, target: api.Target, pendingPlan: () => Promise<string[]>): void {
  /** Workspace-relative paths as given; an absolute path must be inside the workspace. */
  const workspaceArgs = (paths: string[] | undefined): string[] | undefined => {
    if (!paths) return undefined
    const ws = resolve(target.dir ?? '.')
    return paths.map(p => {
      if (!isAbsolute(p)) return p
      if (p === ws || p.startsWith(ws + '/')) return p
      throw new CpfsError('PATH_OUTSIDE', `${p} is not inside the workspace ${ws}`, 'paths are workspace-relative, without a leading "/", as the tools list them: e.g. src/a.txt')
    })
  }

  server.registerTool('show_diff', {
    title: 'Show what a turn changed',
    description: `What a turn (default: the current one) or a range "A..B" changed: totals, then per path its change and +/- lines, 100 paths a page (offset, limit); patch=true adds git-style patches (git apply accepts them; one too long for the answer is cut, and says so); "paths" keeps only changes at or below those workspace paths. ${BOUND} Changes nothing.`,
    inputSchema: args('show_diff', {
      turn: rangeArg.optional(),
      patch: z.boolean().optional().describe('include a git-style patch per path'),
      paths: z.array(z.string()).optional().describe('workspace-relative paths to limit the diff to'),
      offset: offsetArg,
      limit: z.number().int().min(1).max(1000).optional().describe('how many paths a page lists (default 100)'),
      max_chars: maxChars
    }),
    annotations: { title: 'Show what a turn changed', ...READ_ONLY }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => {
    const spec = a.turn === undefined ? undefined : String(a.turn)
    const d = await api.diff(spec, { ...target, patches: Boolean(a.patch), paths: workspaceArgs(a.paths) })
    return diffPage(d.changes, { a: d.a, b: d.b, offset: a.offset ?? 0, limit: a.limit ?? 100, max: (a.max_chars ?? MAX_CHARS) - 500, spec: spec ?? String(d.b) })
  }, pendingPlan))

  server.registerTool('blame', {
    title: 'Who changed a path',
    description: `Every turn that changed a path, newest last: what the turn did to it (change, +/- lines), when, and who — the process that changed it in the mount (pid, command line) and the commands it ran under (its shell, the tool, the agent), or "underneath" (a process writing below the mount), or "unrecorded" (cpfs itself, or before cpfs recorded processes). The last 20 changes by default (limit). ${BOUND} Changes nothing.`,
    inputSchema: args('blame', {
      path: z.string().describe('a workspace path, e.g. src/a.txt or .env'),
      limit: z.number().int().min(1).max(500).optional().describe('how many of the newest changes to list (default 20)'),
      max_chars: maxChars
    }),
    annotations: { title: 'Who changed a path', ...READ_ONLY }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => {
    const b = await api.blame(workspaceArgs([a.path])![0], target)
    const lines = b.lines.slice(-(a.limit ?? 20)).map(l => ({
      turn: l.turn, change: l.change, insertions: l.insertions, deletions: l.deletions, by: l.by,
      at: l.at === null ? null : new Date(l.at).toISOString(),
      pid: l.process?.pid ?? null, command: l.process?.command ?? null, under: l.process?.parents.map(p => p.command) ?? []
    }))
    return { path: rel(b.path), total: b.lines.length, lines }
  }, pendingPlan))

  server.registerTool('rewind_dry_run', {
    title: 'Preview a rewind',
    description: `What rewinding to the start of a turn would change, without changing anything: {canRewind, error?, filesChanged, insertions, deletions, filesChangedTotal}; filesChanged lists up to 200 paths a page (offset, limit; next_offset when more). ${BOUND}`,
    inputSchema: args('rewind_dry_run', {
      turn: turnArg,
      offset: offsetArg,
      limit: z.number().int().min(1).max(5000).optional().describe('how many paths of filesChanged a page lists (default 200)'),
      max_chars: maxChars
    }),
    annotations: { title: 'Preview a rewind', ...READ_ONLY }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => {
    const p = await api.rewindPreview(String(a.turn), target)
    return previewPage(p, { offset: a.offset ?? 0, limit: a.limit ?? 200, max: (a.max_chars ?? MAX_CHARS) - 500 })
  }, pendingPlan))
}

/** checkpoint, rewind and redo: the tools that change the workspace or its history. */
function registerChangeTools (server: McpServer, target: api.Target): void {
  server.registerTool('checkpoint', {
    title: 'Start a new turn',
    description: 'Seal the current turn and start the next one; later changes can be undone back to this point. "message" describes the work of the turn being sealed; "prompt" and "id" label the turn being started. Answers {"head": N}.',
    inputSchema: args('checkpoint', {
      message: z.string().optional().describe('what the turn being sealed did'),
      prompt: z.string().optional().describe('what the next turn is for'),
      id: z.string().optional().describe('an id for the next turn, to rewind to later (unique; not a number)')
    }),
    annotations: { title: 'Start a new turn', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async ({ message, prompt, id }) => answer(MAX_CHARS, async () => ({ head: await api.turn({ ...target, message, prompt, id }) })))

  server.registerTool('rewind', {
    title: 'Rewind',
    description: `Make the workspace exactly what it was when the turn began: later work leaves the files and is kept as a branch (redo brings it back, also after new writes; list_branches lists every branch). Rewinding to where the workspace already is changes nothing. Answers {head, dropped, mounted, summary?}. ${BOUND}`,
    inputSchema: args('rewind', { turn: turnArg }),
    annotations: { title: 'Rewind', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false }
  }, async ({ turn }) => answer(MAX_CHARS, async () => {
    const r = await api.rewind(String(turn), target)
    return { head: r.head, dropped: r.dropped, mounted: r.mounted, summary: summaryOut(r.summary) }
  }))

  server.registerTool('redo', {
    title: 'Redo',
    description: `Go back to the tip the last rewind left; what was written since is kept as a branch of its own. Answers {head, mounted, summary?}. ${BOUND}`,
    inputSchema: args('redo', {}),
    annotations: { title: 'Redo', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async () => answer(MAX_CHARS, async () => {
    const r = await api.redo(target)
    return { head: r.head, mounted: r.mounted, summary: summaryOut(r.summary) }
  }))
}

export async function serveMcp (target: api.Target): Promise<void> {
  const server = createMcpServer(target)
  await server.connect(new StdioServerTransport())
  await new Promise<void>((resolve) => { process.stdin.on('close', resolve) })
}
