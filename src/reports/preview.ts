// Read-only questions about a history: what a turn (or a range) changed, and what a rewind
// would change — answered with the same planner that the real run uses, so a dry run says
// exactly what the rewind then does.
import { CpfsError, isCpfsError } from '../errors.js'
import { isWithin } from '../paths/paths.js'
import type { Session, TurnInfo } from '../session/session.js'
import { underneathOf } from '../store/underneath.js'
import { describeChanges, totals, type Change } from './changes.js'
import { planViews, touchedPaths } from '../plans/planner.js'
import { findDrift } from '../plans/drift.js'
import { layersOf, realToStack, viewOf } from '../plans/views.js'
import { resolveRef, type TurnRef } from '../session/tree.js'
import { sharedTurns } from '../store/branches.js'

export interface RewindPreview {
  canRewind: boolean
  error?: string
  filesChanged: string[]
  insertions: number
  deletions: number
  changes: Change[]
  drift: string[]
}

/**
 * Parse "T", "A..B" or nothing (the head turn) into an inclusive range of turns of a stack:
 * the head's, or a branch's for a single bN:T (or bN, its tip's turn).
 */
export function parseRange (session: Session, spec: string | undefined): { a: number, b: number, stack: number[] } {
  const stack = session.meta.stack
  if (spec === undefined || spec === '') return { a: session.head, b: session.head, stack }
  const m = /^(.*)\.\.(.*)$/.exec(spec)
  if (!m) {
    const r = resolveRef(session.history, spec)
    const t = r.turn ?? r.stack.length
    return { a: t, b: t, stack: r.stack }
  }
  const a = m[1] === '' ? 1 : session.resolveTurn(m[1])
  const b = m[2] === '' ? session.head : session.resolveTurn(m[2])
  if (a > b) throw new CpfsError('BAD_RANGE', `turn range ${spec} is backwards`, 'write the older turn first, e.g. 2..5')
  return { a, b, stack }
}

/** Is path p one of `paths` or below one (no filter: everything)? */
function selected (c: Change, paths: string[] | undefined): boolean {
  if (!paths || paths.length === 0) return true
  return paths.some(f => isWithin(c.path, f) || (c.from !== undefined && isWithin(c.from, f)))
}

/**
 * What turns a..b changed: from the view at the start of a to the view at the end of b. With
 * `paths` (workspace paths), only the changes at or below them.
 */
export async function diffTurns (session: Session, spec: string | undefined, opts: { patches?: boolean, paths?: string[] } = {}): Promise<{ a: number, b: number, changes: Change[] }> {
  await session.persister.flushAll(false)
  const { a, b, stack } = parseRange(session, spec)
  await session.history.load(stack)
  const from = await viewOf(session, stack.slice(0, a - 1))
  const to = await viewOf(session, stack.slice(0, b))
  const touched = touchedPaths(await layersOf(session, stack.slice(a - 1, b)), [])
  const changes = describeChanges(from, to, touched, session.chunks, { patches: opts.patches })
  return { a, b, changes: changes.filter(c => selected(c, opts.paths)) }
}

/** What `rewind spec` would change; never throws for a turn that does not exist. */
export async function previewRewind (session: Session, spec: string, mounted: boolean): Promise<RewindPreview> {
  const empty = { filesChanged: [], insertions: 0, deletions: 0, changes: [], drift: [] }
  let ref: TurnRef
  try {
    ref = resolveRef(session.history, spec) // any branch's turn (bN:T) or tip (bN) too
  } catch (err) {
    if (isCpfsError(err)) return { canRewind: false, error: err.message, ...empty }
    throw err
  }
  await session.persister.flushAll(false)
  const stack = session.meta.stack
  const targetStack = ref.turn === null ? ref.stack.slice() : ref.stack.slice(0, ref.turn - 1)
  const shared = sharedTurns(stack, targetStack)
  let changes: Change[]
  let drift: string[] = []
  if (mounted) {
    const from = await viewOf(session, stack)
    const to = await viewOf(session, targetStack)
    changes = describeChanges(from, to, touchedPaths(await layersOf(session, stack.slice(shared)), await layersOf(session, targetStack.slice(shared))), session.chunks)
  } else {
    const { expected, target, touched } = await realToStack(session, targetStack)
    changes = describeChanges(expected, target, touched, session.chunks)
    drift = findDrift(session, expected, planViews(expected, target, touched).ops)
  }
  const { insertions, deletions } = totals(changes)
  const out: RewindPreview = { canRewind: drift.length === 0, filesChanged: changes.map(c => c.path.slice(1)), insertions, deletions, changes, drift }
  if (drift.length) out.error = `the real directory changed outside cpfs: ${drift.slice(0, 5).join(', ')} (use --force to replace)`
  return out
}

/**
 * What each turn of the stack changed, counted as `cpfs diff T` counts it (paths, text lines),
 * from the data here: in a lazy clone, a file whose data is still on the remote counts without
 * lines (a log must not download the history it lists).
 */
export async function turnChanges (session: Session): Promise<Change[][]> {
  await session.persister.flushAll(false)
  const stack = session.meta.stack
  const out: Change[][] = []
  let from = await viewOf(session, [])
  for (let i = 0; i < stack.length; i++) {
    const to = await viewOf(session, stack.slice(0, i + 1))
    const layer = await layersOf(session, [stack[i]])
    out.push(session.chunks.withoutFetching(() => describeChanges(from, to, touchedPaths(layer, []), session.chunks)))
    from = to
  }
  return out
}

/**
 * The log; with `lines`, each turn's paths and +/- lines are those `cpfs diff T` shows (one
 * count for both commands), else the paths its layer recorded (cheap: no file is read).
 */
export async function logWithLines (session: Session, lines: boolean): Promise<TurnInfo[]> {
  if (!lines) return session.log()
  const all = await turnChanges(session)
  // Bytes of the paths counted as changed only, so that the columns agree with each other.
  const turns = session.log(all.map(changes => new Set(changes.flatMap(c => c.from === undefined ? [c.path] : [c.path, c.from]))))
  const out: TurnInfo[] = []
  for (const [i, t] of turns.entries()) {
    const under = await underneathOf(session.store, t.layer)
    out.push({
      ...t,
      files: all[i].length,
      changes: all[i].map(c => ({ path: c.path, change: c.change })),
      ...totals(all[i]),
      ...(under.count ? { underneath: under } : {})
    })
  }
  return out
}

/** Keep at most `paths` of each turn's listed paths (`files` still counts them all). */
export function cutPaths (turns: TurnInfo[], paths: number | undefined): TurnInfo[] {
  if (paths !== undefined) for (const t of turns) if (t.changes.length > paths) t.changes = t.changes.slice(0, paths)
  return turns
}
