// `cpfs undo --step ID`: put back, as a change of the head turn, every path one step changed,
// each as it was just before the step first changed it, and keep everything later. A path that
// another process changed after the step (or together with it, in one layer) is a conflict:
// refused, naming it and who changed it, unless forced — then the step's "before" is taken back
// anyway and the later version stays in the history (cpfs rewind and restore still reach it).
import { CpfsError } from '../errors.js'
import type { Overlay } from '../overlay/overlay.js'
import { resolvedType, type View } from '../overlay/view.js'
import { isWithin } from '../paths/paths.js'
import { inoOfKey, isInoKey, type Entry } from '../store/entries.js'
import { analyseStep, viewBefore, type StepAnalysis } from './step-analysis.js'
import type { Session } from './session.js'
import type { StepRecord } from './steps.js'

export interface StepConflict {
  path: string
  /** Why: changed again later, or together with another process. */
  why: 'later' | 'shared' | 'below'
  by: Array<{ pid: number, command: string }>
}

/** What undoing a step does: each path and the view it is restored from. */
export interface StepUndo {
  step: StepRecord
  /** Paths to put back, each with the index (in the analysis's layers) of the view before its first change. */
  paths: Array<{ path: string, before: number }>
  conflicts: StepConflict[]
  analysis: StepAnalysis
}

/** Plan the undo of step `ref` (read-only): refuses a step that is open, gone or changed nothing. */
export async function planStepUndo (session: Session, ref: string | number): Promise<StepUndo> {
  const step = session.steps.resolve(ref)
  if (session.steps.open.includes(step.n)) throw new CpfsError('STEP_OPEN', `step ${step.n} is still open`, `end it first (cpfs step end ${step.id ?? step.n})`)
  const a = await analyseStep(session, step)
  if (!a.inHistory) throw new CpfsError('STEP_GONE', `what step ${step.n} changed is not in the current history (rewound away or pruned)`, 'cpfs redo brings a rewound history back; see cpfs log --steps')
  if (a.keys.size === 0) throw new CpfsError('NOTHING_TO_UNDO', `step ${step.n} (${step.label}) changed nothing`, 'see cpfs step show ' + (step.id ?? step.n))
  const who = a.who
  const describe = (ids: string[]) => ids.map(id => id === '' ? { pid: 0, command: 'cpfs' } : { pid: who.record(id)?.pid ?? 0, command: who.record(id)?.command ?? 'unknown process' })
  const now = session.overlay.view
  const conflicts: StepConflict[] = []
  const paths: StepUndo['paths'] = []
  const seen = new Set<string>()
  const views = new Map<number, View>()
  for (const [key, info] of a.keys) {
    const names = isInoKey(key) ? now.namesOf(inoOfKey(key)) : [key]
    for (const p of names) {
      if (seen.has(p)) continue
      seen.add(p)
      const then = viewBefore(session, a, info.first, views).resolve(p)
      const cur = now.resolve(p)
      // A directory that was there before and is now, and that the step did not make again,
      // had only its times changed by what was made in it: that goes back with each child.
      if (then && cur && resolvedType(then) === 'd' && resolvedType(cur) === 'd' && !replacedDir(session, a, p)) continue
      paths.push({ path: p, before: info.first })
      if (info.shared) conflicts.push({ path: p, why: 'shared', by: [] })
      // Changed again later, unless what came later left it as the step did (undone since).
      else if (info.laterBy.length && !sameState(viewBefore(session, a, info.last + 1, views), now, p)) {
        conflicts.push({ path: p, why: 'later', by: describe(info.laterBy) })
      }
    }
  }
  // A directory the step made (or replaced) goes back whole: what others put in it since is a conflict.
  for (const { path, before } of paths) {
    const then = viewBefore(session, a, before, views).resolve(path)
    const cur = now.resolve(path)
    if (!cur || resolvedType(cur) !== 'd' || (then && resolvedType(then) === 'd' && !replacedDir(session, a, path))) continue
    for (const [k, ids] of laterOthers(session, a, before)) {
      if (k !== path && isWithin(k, path) && !a.keys.has(k)) conflicts.push({ path: k, why: 'below', by: describe(ids) })
    }
  }
  paths.sort((x, y) => x.path < y.path ? -1 : x.path > y.path ? 1 : 0)
  return { step, paths, conflicts, analysis: a }
}

/**
 * Is path p the same in both views: absent in both, or the same kind, mode, owner and content
 * (a file's chunk references, content-addressed; a symlink's target; the same real file)?
 * Times and inode numbers may differ: a path put back by a later undo is still "as the step
 * left it".
 */
function sameState (a: View, b: View, p: string): boolean {
  const x = a.resolve(p)
  const y = b.resolve(p)
  if (!x || !y) return !x && !y
  if (x.kind !== y.kind) return false
  if (x.kind === 'lower' || y.kind === 'lower') return x.kind === 'lower' && y.kind === 'lower' && x.lowerPath === y.lowerPath && x.stat === y.stat
  return sameEntry(x.entry, y.entry)
}

function sameEntry (e: Entry, f: Entry): boolean {
  if (e.kind !== f.kind) return false
  if (e.kind === 'w' || f.kind === 'w') return true
  if (e.kind === 'h' || f.kind === 'h') return e.kind === 'h' && f.kind === 'h' && e.ino === f.ino
  if (e.mode !== f.mode || e.uid !== f.uid || e.gid !== f.gid) return false
  if (e.kind === 'l' && f.kind === 'l') return e.target === f.target
  if (e.kind === 'f' && f.kind === 'f') {
    if (e.size !== f.size || e.src !== f.src || e.srcSize !== f.srcSize || e.chunks.size !== f.chunks.size) return false
    for (const [i, c] of e.chunks) {
      const d = f.chunks.get(i)
      if (d === undefined || (c === null) !== (d === null) || (c !== null && !c.equals(d!))) return false
    }
    return true
  }
  return e.kind === 'd'
}

/** Did the step replace directory `path` (make it again, fresh), rather than change its metadata? */
function replacedDir (session: Session, a: StepAnalysis, path: string): boolean {
  const info = a.keys.get(path)
  if (!info) return false
  for (let i = info.first; i <= info.last; i++) {
    const e = session.history.layers.get(a.layers[i])?.get(path)
    if (e?.kind === 'd' && e.fresh === 1) return true
  }
  return false
}

/** Keys changed by processes that are not the step's, in the layers from index `from` on. */
function laterOthers (session: Session, a: StepAnalysis, from: number): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (let i = from; i < a.layers.length; i++) {
    for (const k of session.history.layers.get(a.layers[i])?.keys() ?? []) {
      if (a.keys.has(k)) continue
      out.set(k, [])
    }
  }
  return out
}

/** The one-line refusal for conflicts. */
export function conflictError (u: StepUndo): CpfsError {
  const shown = u.conflicts.slice(0, 5).map(c => `${c.path.slice(1)} (${c.why === 'shared' ? 'changed by this step and another at the same time' : `changed later${c.by.length ? ' by ' + c.by.map(b => b.pid ? `pid ${b.pid} ${b.command.slice(0, 40)}` : b.command).join(', ') : ''}`})`).join('; ')
  return new CpfsError('STEP_CONFLICT', `step ${u.step.n} (${u.step.label}) cannot be undone alone: ${shown}${u.conflicts.length > 5 ? ` and ${u.conflicts.length - 5} more` : ''}`, 'undo the later changes first, or pass --force to take the step\'s version back anyway (the later one stays in the history)')
}

/**
 * Make the undo through `overlay` (the live one, or offline a scratch one): each path restored
 * from the view before the step first changed it.
 */
export function applyStepUndo (session: Session, u: StepUndo, overlay: Overlay): string[] {
  const views = new Map<number, View>()
  const touched: string[] = []
  for (const { path, before } of u.paths) {
    const src = viewBefore(session, u.analysis, before, views)
    overlay.restore(path, src)
    touched.push(path)
  }
  return touched
}

/** What undoing a step did (or, with dryRun, would do). */
export interface StepUndone {
  step: number
  label: string
  /** Paths put back (or, with dryRun, that would be). */
  paths: string[]
  conflicts: StepConflict[]
  undone: boolean
}

/** Undo step `ref` while mounted: its paths put back in the head turn. */
export async function undoStepIn (session: Session, ref: string, opts: { force?: boolean, dryRun?: boolean }): Promise<StepUndone> {
  const u = await planStepUndo(session, ref)
  const base = { step: u.step.n, label: u.step.label, paths: u.paths.map(p => p.path), conflicts: u.conflicts }
  if (opts.dryRun) return { ...base, undone: false }
  if (u.conflicts.length && !opts.force) throw conflictError(u)
  const touched = new Set<string>()
  session.persister.collect(touched, () => applyStepUndo(session, u, session.overlay))
  session.onViewChange?.(touched)
  await session.persister.flushAll(true)
  return { ...base, undone: true }
}

