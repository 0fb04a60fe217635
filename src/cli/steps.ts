// `cpfs step begin|end|show|list`, and what `log --steps`, `diff --by-step` and `undo --step`
// print. The library part (steps-api.ts) is loaded only when one of them runs.
import { CpfsError } from '../errors.js'
import type { StepListed, StepReport, StepUndoResult } from '../steps-api.js'
import { displayLine } from '../session/labels.js'
import { formatStat, formatSummary } from './format.js'
import { dirStore, isDirectory, json, target, type Command, type Flags } from './common.js'
import { out } from './output.js'
import { feedbackText } from '../reports/feedback.js'

const stepsLib = async () => await import('../steps-api.js')

const ACTIONS = ['begin', 'end', 'show', 'list']

export const stepCommands: Record<string, Command> = {
  step: {
    options: { ...dirStore, id: { type: 'string' }, ...json },
    args: ['ACTION', 'ARG?', 'DIR?'],
    run: async (pos, f) => {
      // `step end DIR`, `step list DIR`: a directory where a step may go is the workspace.
      if (pos.DIR === undefined && pos.ARG !== undefined && (pos.ACTION === 'list' || (pos.ACTION !== 'begin' && isDirectory(pos.ARG)))) {
        pos = { ...pos, DIR: pos.ARG, ARG: undefined }
      }
      const lib = await stepsLib()
      const t = target(pos, f)
      switch (pos.ACTION) {
        case 'begin': {
          // The step is the shell's (or script's) that runs this: what it runs next belongs to it.
          const s = await lib.stepBegin({ ...t, label: pos.ARG, id: f.id as string | undefined, ownerPid: process.ppid })
          out(f.json ? JSON.stringify(s) : String(s.n))
          return 0
        }
        case 'end': {
          const s = await lib.stepEnd(pos.ARG, t)
          if (f.json) out(JSON.stringify(await lib.stepShow(s.n, t)))
          else out(formatStepReport(await lib.stepShow(s.n, t), t.dir!))
          return 0
        }
        case 'show': {
          if (pos.ARG === undefined) throw new CpfsError('USAGE', 'cpfs step show needs a step (its number or id)', 'see cpfs log --steps')
          const r = await lib.stepShow(pos.ARG, t)
          out(f.json ? JSON.stringify(r, null, 2) : formatStepReport(r, t.dir!))
          return 0
        }
        case 'list': {
          const list = await lib.steps(t)
          out(f.json ? JSON.stringify(list, null, 2) : formatSteps(list))
          return 0
        }
        default:
          throw new CpfsError('USAGE', `no step action "${displayLine(pos.ACTION ?? '')}"`, `use one of: ${ACTIONS.join(', ')}`)
      }
    }
  }
}

/** `cpfs log --steps`. */
export async function logSteps (pos: Record<string, string | undefined>, f: Flags): Promise<number> {
  const list = await (await stepsLib()).steps(target(pos, f))
  out(f.json ? JSON.stringify(list, null, 2) : formatSteps(list))
  return 0
}

/** `cpfs diff [TURN] --by-step`: each step of the turns, with what it changed. */
export async function diffBySteps (spec: string | undefined, t: { dir?: string, store?: string }, f: Flags): Promise<number> {
  const lib = await stepsLib()
  const { log } = await import('../api.js')
  const { a, b } = rangeOf(spec, await log({ ...t, paths: 0 }))
  const list = (await lib.steps(t)).filter(s => s.turn !== null && s.turn >= a && s.turn <= b)
  const reports: StepReport[] = []
  for (const s of list) reports.push(await lib.stepShow(s.n, t))
  if (f.json) out(JSON.stringify(reports.map(r => ({ step: r.step.n, id: r.step.id ?? null, label: r.step.label, turn: r.turn, changes: r.changes })), null, 2))
  else out(reports.length === 0 ? 'no steps in these turns' : reports.map(r => `step ${r.step.n}${r.step.id ? ` (${r.step.id})` : ''}  turn ${r.turn}  ${displayLine(r.step.label)}\n${indent(formatStat(r.changes))}`).join('\n\n'))
  return 0
}

/** `cpfs diff [TURN] --by-command`: the turn's changes under each process that made them. */
export async function diffByCommands (spec: string | undefined, t: { dir?: string, store?: string }, f: Flags): Promise<number> {
  const r = await (await stepsLib()).diffByCommand(spec, t)
  if (f.json) out(JSON.stringify(r.commands, null, 2))
  else if (r.commands.length === 0) out('no changes')
  else {
    out(r.commands.map(c => {
      const who = c.process === null ? 'no process recorded (cpfs itself, or before cpfs recorded processes)' : `pid ${c.process.pid}  ${displayLine(c.process.command)}`
      const under = c.process?.parents.map(p => displayLine(p.command).slice(0, 60)).join(' < ')
      return `${who}${under ? `\n  under ${under}` : ''}\n${indent(formatStat(c.changes))}`
    }).join('\n\n'))
  }
  return 0
}

/** `cpfs undo --step ID`. */
export async function undoStepCommand (ref: string, t: { dir?: string, store?: string }, f: Flags): Promise<number> {
  const r: StepUndoResult = await (await stepsLib()).undoStep(ref, { ...t, force: Boolean(f.force), dryRun: Boolean(f['dry-run']) })
  if (f.json) out(JSON.stringify(r))
  else if (f['dry-run']) {
    const lines = [`undoing step ${r.step} (${displayLine(r.label)}) would put back ${r.paths.length} path${r.paths.length === 1 ? '' : 's'}: ${r.paths.map(p => displayLine(p.slice(1))).join(', ')}`]
    for (const c of r.conflicts) lines.push(`  conflict: ${displayLine(c.path.slice(1))} ${c.why === 'shared' ? 'was changed by this step and another at the same time' : 'was changed later' + (c.by.length ? ' by ' + c.by.map(b => `pid ${b.pid} ${displayLine(b.command).slice(0, 40)}`).join(', ') : '')}`)
    out(lines.join('\n'))
    return r.conflicts.length ? 1 : 0
  } else out(r.undone ? `undid step ${r.step} (${displayLine(r.label)}): put back ${r.paths.map(p => displayLine(p.slice(1))).join(', ')}${r.summary ? '; ' + formatSummary(r.summary) : ''}` : `nothing to undo: the paths of step ${r.step} are already as before it`)
  return 0
}

/** The turns "T", "A..B" or nothing (the head) names, as cpfs diff reads them. */
function rangeOf (spec: string | undefined, turns: Array<{ turn: number, id: string | null }>): { a: number, b: number } {
  const head = turns.length
  const one = (s: string): number => {
    const n = /^-\d+$/.test(s) ? head + 1 + Number(s) : /^\d+$/.test(s) ? Number(s) : turns.find(x => x.id === s)?.turn ?? 0
    if (n < 1 || n > head) throw new CpfsError('UNKNOWN_TURN', `no turn has the number or id "${displayLine(s)}"`, 'see cpfs log')
    return n
  }
  if (spec === undefined || spec === '') return { a: head, b: head }
  const m = /^(.*)\.\.(.*)$/.exec(spec)
  if (!m) return { a: one(spec), b: one(spec) }
  return { a: m[1] === '' ? 1 : one(m[1]), b: m[2] === '' ? head : one(m[2]) }
}

function indent (s: string): string {
  return s.split('\n').map(l => '  ' + l).join('\n')
}

export function formatSteps (list: StepListed[]): string {
  if (list.length === 0) return 'no steps recorded (they come from the PreToolUse/PostToolUse hook, cpfs step begin/end, or cpfs exec --step-per-command)'
  return list.map(s => {
    const where = s.turn === null ? (s.inHistory ? 'no change' : 'not in the current history') : `turn ${s.turn}`
    const state = s.closedAt === null ? ' (open)' : ''
    return `step ${s.n}${s.id ? ` (${s.id})` : ''}  ${where}  ${s.files} path${s.files === 1 ? '' : 's'}${state}  ${displayLine(s.label)}`
  }).join('\n')
}

export function formatStepReport (r: StepReport, workspace: string): string {
  const head = `step ${r.step.n}${r.step.id ? ` (${r.step.id})` : ''}${r.turn !== null ? `  turn ${r.turn}` : ''}${r.open ? '  (open)' : ''}  ${displayLine(r.step.label)}`
  return [head, feedbackText(r, workspace) ?? 'changed nothing', '', formatStat(r.changes)].join('\n')
}
