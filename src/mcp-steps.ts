// The MCP server's steps (issue 22): an agent that talks to cpfs over MCP marks its own tool
// calls (step_begin, step_end), asks what one changed (changes_since: the same feedback the
// PostToolUse hook gives) and undoes one (undo_step, with a dry run). The steps are the MCP
// client's: the process that started `cpfs mcp` owns them, so what it and the commands it runs
// change belongs to them.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import type { Target } from './api.js'
import { BOUND, MAX_CHARS, READ_ONLY, answer, args, maxChars, rel } from './mcp-answers.js'
import * as steps from './steps-api.js'

const stepArg = z.union([z.number().int(), z.string()]).describe('a step number, or the id it was begun with (a tool call id)')

export function registerStepTools (server: McpServer, target: Target): void {
  server.registerTool('step_begin', {
    title: 'Begin a step',
    description: `Mark the start of one tool call or command: what changes from now until step_end belongs to it, and can be reported (changes_since) and undone alone (undo_step). Answers {step, id}. ${BOUND}`,
    inputSchema: args('step_begin', {
      label: z.string().optional().describe('what the step does, e.g. the command'),
      id: z.string().optional().describe('an id to name the step by later (unique; not a number), e.g. the tool call id')
    }),
    annotations: { title: 'Begin a step', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async (a) => answer(MAX_CHARS, async () => {
    const s = await steps.stepBegin({ ...target, label: a.label, id: a.id, ownerPid: process.ppid })
    return { step: s.n, id: s.id ?? null }
  }))

  server.registerTool('step_end', {
    title: 'End a step',
    description: `End a step (default: the newest open one) and say what it changed, as changes_since does. Answers {step, id, label, turn, feedback, counts, changes, flags}. ${BOUND}`,
    inputSchema: args('step_end', { step: stepArg.optional(), max_chars: maxChars }),
    annotations: { title: 'End a step', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => {
    const s = await steps.stepEnd(a.step === undefined ? undefined : String(a.step), target)
    return await changes(s.n, target)
  }))

  server.registerTool('changes_since', {
    title: 'What a step changed',
    description: `What one step (a tool call, a command) changed: files created, modified and deleted, and what deserves a second look — deleted tracked files, secrets and dotfiles written, changes outside the paths it named, large deletions, processes it left running, changes by other processes meanwhile. "feedback" is a few lines for the agent (null: nothing worth telling). ${BOUND} Changes nothing.`,
    inputSchema: args('changes_since', { step: stepArg, max_chars: maxChars }),
    annotations: { title: 'What a step changed', ...READ_ONLY }
  }, async (a) => answer(a.max_chars ?? MAX_CHARS, async () => await changes(String(a.step), target)))

  server.registerTool('undo_step', {
    title: 'Undo one step',
    description: `Put back every path one step changed, as it was just before it, keeping everything later. Refused, naming the paths, when a later change touched the same paths (force: take the step's version back anyway; the later one stays in the history). dry_run: say what it would do. Answers {step, label, paths, conflicts, undone}. ${BOUND}`,
    inputSchema: args('undo_step', {
      step: stepArg,
      force: z.boolean().optional(),
      dry_run: z.boolean().optional()
    }),
    annotations: { title: 'Undo one step', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false }
  }, async (a) => answer(MAX_CHARS, async () => {
    const r = await steps.undoStep(String(a.step), { ...target, force: a.force, dryRun: a.dry_run })
    return { step: r.step, label: r.label, paths: r.paths.map(rel), conflicts: r.conflicts.map(c => ({ ...c, path: rel(c.path) })), undone: r.undone }
  }))
}

async function changes (ref: string | number, target: Target) {
  const { text, report } = await steps.changesSince(ref, target)
  return {
    step: report.step.n,
    id: report.step.id ?? null,
    label: report.step.label,
    turn: report.turn,
    feedback: text,
    counts: report.counts,
    changes: report.changes.slice(0, 200).map(c => ({ path: rel(c.path), change: c.change, insertions: c.insertions, deletions: c.deletions })),
    flags: report.flags
  }
}
