// `cpfs step show`, the PostToolUse feedback and the MCP tool `changes_since`: what one step
// changed, as `cpfs diff` says it, with what deserves a second look — deleted tracked files,
// dotfiles and secrets written, changes outside the paths the tool call named, large
// deletions, processes the step started that are still running, and changes other processes
// made while it ran. Read-only.
import { isWithin } from '../paths/paths.js'
import { stagedPaths } from '../plans/git-index.js'
import { resolvedType, type View } from '../overlay/view.js'
import { inoOfKey, isInoKey } from '../store/entries.js'
import { isRunning, parseProcessId, runningStartedBy } from '../session/processes.js'
import type { Session } from '../session/session.js'
import type { StepRecord } from '../session/steps.js'
import { describeChanges, readAll, type Change } from './changes.js'
import { analyseStep, byOf, Membership, viewBefore, type StepAnalysis } from '../session/step-analysis.js'

export interface StepProcess {
  pid: number
  command: string
}

export interface StepReport {
  step: StepRecord
  /** The turn its first part is in (null: it changed nothing, or not in the current history). */
  turn: number | null
  open: boolean
  inHistory: boolean
  changes: Change[]
  counts: { added: number, modified: number, deleted: number }
  /** Paths other processes changed while the step was open, and who. */
  others: Array<{ path: string, by: StepProcess[] }>
  /** Processes the step started that still run (they may write more). */
  background: StepProcess[]
  /** What deserves a second look, one line each. */
  flags: string[]
  /** What processes outside any step changed just before it began (since the previous step), and who. */
  between: Change[]
  betweenBy: StepProcess[]
}

/** Dotfiles and secrets worth a second look when written (below .git/ is git's business). */
const SECRET = /(^|\/)(\.env(\..*)?|.*\.pem|.*\.key|id_(rsa|dsa|ecdsa|ed25519)(\.pub)?|\.npmrc|\.pypirc|\.netrc|credentials(\.json)?|secrets?\.(json|ya?ml|toml))$/i
/** A step deleting this many files or more is flagged. */
const MANY_DELETED = 10

/** The paths a set of keys stands for in `view`: '#ino' records by their names. */
function pathsOf (keys: Iterable<string>, view: View): string[] {
  const out: string[] = []
  for (const k of keys) {
    if (!isInoKey(k)) out.push(k)
    else for (const name of view.namesOf(inoOfKey(k))) out.push(name)
  }
  return out
}

/** What the step's keys changed: from before each key's first change to after the step's last one. */
export function stepChanges (session: Session, a: StepAnalysis): Change[] {
  if (a.keys.size === 0) return []
  const views = new Map<number, View>()
  let last = 0
  const groups = new Map<number, string[]>()
  for (const [k, info] of a.keys) {
    last = Math.max(last, info.last)
    const g = groups.get(info.first)
    if (g) g.push(k)
    else groups.set(info.first, [k])
  }
  const after = viewBefore(session, a, last + 1, views)
  const out = new Map<string, Change>()
  for (const [first, keys] of [...groups].sort((x, y) => x[0] - y[0])) {
    const before = viewBefore(session, a, first, views)
    for (const c of describeChanges(before, after, pathsOf(keys, after), session.chunks)) out.set(c.path, c)
  }
  return [...out.values()].sort((x, y) => x.path < y.path ? -1 : 1)
}

function describeProcess (who: Membership, id: string): StepProcess {
  if (id === '') return { pid: 0, command: 'cpfs' }
  const rec = who.record(id)
  return { pid: rec?.pid ?? 0, command: rec?.command ?? 'unknown process' }
}

/** Tracked files (git's index) of the workspace as the view before the step had it, or null. */
function trackedIn (session: Session, view: View): Set<string> | null {
  const r = view.resolve('/.git/index')
  if (!r || resolvedType(r) !== 'f') return null
  const bytes = readAll(view, r, session.chunks)
  return Buffer.isBuffer(bytes) ? stagedPaths(bytes) : null
}

export async function stepReport (session: Session, ref: string | number): Promise<StepReport> {
  const step = session.steps.resolve(ref)
  const a = await analyseStep(session, step)
  const changes = stepChanges(session, a)
  const who = a.who
  const counts = { added: 0, modified: 0, deleted: 0 }
  for (const c of changes) {
    if (c.change === 'added') counts.added++
    else if (c.change === 'deleted') counts.deleted++
    else counts.modified++
  }
  const others: StepReport['others'] = []
  for (const [k, ids] of a.others) others.push({ path: k, by: ids.map(id => describeProcess(who, id)) })
  const background: StepProcess[] = []
  for (const id of a.members) if (id !== step.owner && isRunning(id)) background.push(describeProcess(who, id))
  // Processes it started that run on without having written yet (a dev server, a watcher).
  const owner = step.owner === null ? null : parseProcessId(step.owner)
  if (owner !== null && step.ticks[1] !== null) {
    for (const p of runningStartedBy(owner.pid, step.ticks[0], step.ticks[1])) if (!background.some(b => b.pid === p.pid)) background.push(p)
  }
  const firstPart = a.layers.findIndex(l => step.parts.includes(l) || l === step.from)
  const between = step.between !== undefined ? await betweenChanges(session, a, step.between) : []
  const betweenBy: StepProcess[] = []
  if (step.between !== undefined) {
    const ids = new Set<string>()
    for (const k of session.history.layers.get(step.between)?.keys() ?? []) for (const id of byOf(session, step.between, k)) ids.add(id)
    for (const id of ids) betweenBy.push(describeProcess(who, id))
  }
  const report: StepReport = {
    step,
    turn: firstPart >= 0 ? a.turnOf[firstPart] : null,
    open: session.steps.open.includes(step.n),
    inHistory: a.inHistory,
    changes,
    counts,
    others,
    background,
    flags: [],
    between,
    betweenBy
  }
  report.flags = flagsOf(session, a, report)
  return report
}

/** What the part sealed when the step began holds: changes made between the steps. */
async function betweenChanges (session: Session, a: StepAnalysis, part: number): Promise<Change[]> {
  const i = a.layers.indexOf(part)
  if (i < 0) return []
  const views = new Map<number, View>()
  const keys = [...session.history.layers.get(part)?.keys() ?? []]
  const after = viewBefore(session, a, i + 1, views)
  return describeChanges(viewBefore(session, a, i, views), after, pathsOf(keys, after), session.chunks)
}

function flagsOf (session: Session, a: StepAnalysis, r: StepReport): string[] {
  const flags: string[] = []
  const list = (ps: string[]): string => ps.slice(0, 5).map(p => p.slice(1)).join(', ') + (ps.length > 5 ? ` and ${ps.length - 5} more` : '')
  const deleted = r.changes.filter(c => c.change === 'deleted' && c.kind !== 'd')
  if (deleted.length > 0) {
    const firstPart = a.layers.findIndex(l => r.step.parts.includes(l) || l === r.step.from)
    const tracked = firstPart >= 0 ? trackedIn(session, viewBefore(session, a, firstPart)) : null
    const gone = tracked ? deleted.filter(c => tracked.has(c.path.slice(1))) : []
    if (gone.length) flags.push(`deleted ${gone.length} file${gone.length === 1 ? '' : 's'} tracked by git: ${list(gone.map(c => c.path))}`)
  }
  if (deleted.length >= MANY_DELETED) flags.push(`deleted ${deleted.length} files`)
  const secrets = r.changes.filter(c => c.change !== 'deleted' && !isWithin(c.path, '/.git') && SECRET.test(c.path))
  if (secrets.length) flags.push(`wrote ${secrets.length === 1 ? 'a secret or dotfile' : 'secrets or dotfiles'}: ${list(secrets.map(c => c.path))}`)
  const named = r.step.paths ?? []
  if (named.length) {
    const outside = r.changes.filter(c => c.kind !== 'd' && !named.some(n => isWithin(c.path, n)) && !isWithin(c.path, '/.git'))
    if (outside.length) flags.push(`changed ${outside.length} path${outside.length === 1 ? '' : 's'} outside ${named.map(n => n.slice(1) || '.').slice(0, 3).join(', ')}: ${list(outside.map(c => c.path))}`)
  }
  for (const p of r.background) flags.push(`still running in the background: pid ${p.pid} (${short(p.command)})`)
  if (r.others.length) flags.push(`other processes changed ${r.others.length} path${r.others.length === 1 ? '' : 's'} meanwhile: ${r.others.slice(0, 3).map(o => `${o.path.slice(1)} (${o.by.map(b => b.pid ? `pid ${b.pid} ${short(b.command)}` : b.command).join(', ')})`).join('; ')}`)
  if (r.between.length) flags.push(`before this call, ${r.between.length} path${r.between.length === 1 ? ' was' : 's were'} changed outside any tool call: ${list(r.between.map(c => c.path))}${r.betweenBy.length ? ` (by ${r.betweenBy.slice(0, 3).map(b => b.pid ? `pid ${b.pid} ${short(b.command)}` : b.command).join(', ')})` : ''}`)
  return flags
}

function short (command: string): string {
  return command.length > 60 ? command.slice(0, 59) + '…' : command
}
