// The library's steps (issue 22): begin and end a step, what one changed (the feedback an agent
// gets after a tool call), the list of steps, and the undo of one. Like api.ts, each function
// talks to the mount daemon when the workspace is mounted and opens the store itself when not;
// steps begin and end only in a mount (nothing changes outside one).
import { CpfsError } from './errors.js'
import { callDaemon } from './control/mounted.js'
import { daemonUp } from './daemons.js'
import { offline, viaDaemonOr, where, type Target } from './api.js'
import { keepRefreshed } from './plans/keep.js'
import { planViews } from './plans/planner.js'
import { runPlan } from './plans/run.js'
import { viewOf } from './plans/views.js'
import type { PlanSummary } from './plans/finish.js'
import { diffByCommand as byCommand, type CommandChanges } from './reports/by-command.js'
import { feedbackText } from './reports/feedback.js'
import { stepReport, type StepReport } from './reports/step-report.js'
import { prepareHeadChange } from './session/restore.js'
import type { StepOptions, StepRecord } from './session/steps.js'
import { applyStepUndo, conflictError, planStepUndo, undoStepIn, type StepUndone } from './session/undo-step.js'
import { listSteps, type StepListed } from './reports/step-list.js'

export type { StepOptions, StepRecord } from './session/steps.js'
export type { StepReport } from './reports/step-report.js'
export type { CommandChanges } from './reports/by-command.js'
export type { StepListed } from './reports/step-list.js'
export type { StepUndone, StepConflict } from './session/undo-step.js'
export { listSteps } from './reports/step-list.js'
export { undoStepIn } from './session/undo-step.js'

async function mountedOnly (t: Target, what: string) {
  const loc = where(t)
  if (!await daemonUp(loc)) throw new CpfsError('NOT_MOUNTED', `${loc.workspace} is not mounted: ${what}`, `run cpfs mount ${loc.workspace} first`)
  return loc
}

/** Begin a step in the mounted workspace. */
export async function stepBegin (opts: Target & StepOptions = {}): Promise<StepRecord> {
  const loc = await mountedOnly(opts, 'a step records changes made in the mount, and none can be made now')
  const { dir: _d, store: _s, ...args } = opts
  return await callDaemon(loc, { cmd: 'step-begin', args })
}

/** End a step (the newest open one by default). */
export async function stepEnd (ref?: string | number, opts: Target = {}): Promise<StepRecord> {
  const loc = await mountedOnly(opts, 'no step can be open')
  return await callDaemon(loc, { cmd: 'step-end', args: ref === undefined ? {} : { ref: String(ref) } })
}

/** What step `ref` (a number or an id) changed, and what deserves a second look. */
export async function stepShow (ref: string | number, opts: Target = {}): Promise<StepReport> {
  return await viaDaemonOr(where(opts), 'step-show', { ref: String(ref) }, async (s) => await stepReport(s, String(ref)), 'read')
}

/**
 * What the agent is told after a tool call: the feedback text for step `ref` (null when it
 * changed nothing worth telling), with the report it comes from. The MCP tool changes_since.
 */
export async function changesSince (ref: string | number, opts: Target = {}): Promise<{ text: string | null, report: StepReport }> {
  const loc = where(opts)
  const report = await stepShow(ref, opts)
  return { text: feedbackText(report, loc.workspace), report }
}

/** What turn `spec` (default: the head) or a range A..B changed, grouped by the process that changed each path. */
export async function diffByCommand (spec?: string | number, opts: Target = {}): Promise<{ a: number, b: number, commands: CommandChanges[] }> {
  const s = spec === undefined ? undefined : String(spec)
  return await viaDaemonOr(where(opts), 'diff-by-command', { spec: s }, async (ss) => await byCommand(ss, s), 'read')
}

/** The steps, oldest first (the newest `last` of them, default 100). */
export async function steps (opts: Target & { last?: number } = {}): Promise<StepListed[]> {
  const last = opts.last ?? 100
  return await viaDaemonOr(where(opts), 'steps', { last }, async (s) => await listSteps(s, last), 'read')
}

/** What undoStep did: mounted or not, and offline the plan that wrote the real directory. */
export interface StepUndoResult extends StepUndone {
  mounted?: boolean
  summary?: PlanSummary
}

/**
 * Undo one step: every path it changed put back as it was just before, everything later kept;
 * refused when later changes touched the same paths (force: put back anyway). Offline, the
 * real directory is changed by a drift-checked, verified plan, as restore's is.
 */
export async function undoStep (ref: string | number, opts: Target & { force?: boolean, dryRun?: boolean } = {}): Promise<StepUndoResult> {
  const loc = where(opts)
  const args = { ref: String(ref), force: opts.force, dryRun: opts.dryRun }
  if (await daemonUp(loc)) return { ...await callDaemon(loc, { cmd: 'undo-step', args }), mounted: true }
  return await offline(loc, async (s) => {
    if (opts.dryRun) return { ...await undoStepIn(s, String(ref), { dryRun: true }), mounted: false }
    const pending = s.pending()
    if (pending > 0) throw new CpfsError('PENDING', `${pending} turn${pending === 1 ? ' is' : 's are'} not applied to the real directory yet`, `run cpfs unmount ${loc.workspace} (it applies them) or mount the workspace, then undo the step`)
    await keepRefreshed(s)
    const u = await planStepUndo(s, String(ref))
    if (u.conflicts.length && !opts.force) throw conflictError(u)
    const prepared = await prepareHeadChange(s, async (scratch) => applyStepUndo(s, u, scratch))
    const expected = await viewOf(s, s.meta.applied)
    const base = { step: u.step.n, label: u.step.label, paths: u.paths.map(p => p.path), conflicts: u.conflicts, mounted: false }
    if (planViews(expected, prepared.view, prepared.touched).ops.length === 0) return { ...base, undone: false }
    const { change, preOps } = prepared.commit()
    const summary = await runPlan(s, expected, prepared.view, prepared.touched, { force: opts.force, targetStack: change.stack, after: change, preOps })
    return { ...base, undone: true, summary }
  })
}
