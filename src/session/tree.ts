// The history as a tree: naming turns of any branch (bN:T), and keeping the stacks the
// workspace leaves. Branches are kept in the metadata (store/branches.ts); History.apply keeps
// what a stack change leaves, so no rewind, undo, discard or redo makes a turn unreachable.
import { CpfsError } from '../errors.js'
import { sameStack, type Branch, type LeftBy } from '../store/branches.js'
import type { Entry } from '../store/entries.js'
import type { StoreMeta, TurnRecord } from '../store/store.js'
import { displayLine } from './labels.js'

/** A turn anywhere in the tree: turn `turn` of `stack` (the head's or a branch's), or the tip of a branch. */
export interface TurnRef {
  stack: number[]
  /** 1-based; null for a branch's tip (its state when it was left, head turn included). */
  turn: number | null
  /** The branch's number, or null for the head's own stack. */
  branch: number | null
}

/** A stack a change leaves behind: kept as a branch when it holds changes of its own. */
export interface Left {
  stack: number[]
  by: LeftBy
}

const BRANCH_REF = /^b(\d+)(?::(.+))?$/

/** What of the history (history.ts) the tree reads: kept apart so that the history can use the tree. */
export interface TreeHistory {
  readonly meta: StoreMeta
  readonly layers: Map<number, Map<string, Entry>>
  readonly store: { turnRecord: (layer: number) => TurnRecord & { prompt?: string, summary?: string } }
  partsOf: (layer: number) => number[]
  resolveTurn: (spec: string | number) => number
  turnsWithId: (id: string, stack: number[]) => number[]
}

export function branchName (b: Branch | number): string {
  return `b${typeof b === 'number' ? b : b.n}`
}

/**
 * A user's TURN: a turn of the head's stack (number, -N or id), `bN` (the tip of branch N),
 * `bN:T` (turn T of branch N: a number, -N or an id), or an id only a branch has.
 */
export function resolveRef (history: TreeHistory, spec: string | number): TurnRef {
  const s = String(spec).trim()
  try {
    return { stack: history.meta.stack, turn: history.resolveTurn(s), branch: null }
  } catch (err) {
    if (!(err instanceof CpfsError) || err.code !== 'UNKNOWN_TURN') throw err
    const m = BRANCH_REF.exec(s)
    if (m) return onBranch(history, findBranch(history, Number(m[1])), m[2])
    const found = (history.meta.branches ?? []).flatMap(b => history.turnsWithId(s, b.stack).map(t => ({ b, t })))
    if (found.length === 1) return { stack: found[0].b.stack, turn: found[0].t, branch: found[0].b.n }
    if (found.length > 1) throw new CpfsError('AMBIGUOUS_ID', `the id "${displayLine(s)}" names turns ${found.map(f => `${branchName(f.b)}:${f.t}`).join(' and ')}`, 'use bN:T from cpfs log --all')
    if (/^\d+$|^-\d+$/.test(s) || (history.meta.branches ?? []).length === 0) throw err
    throw new CpfsError('UNKNOWN_TURN', `no turn has the number or id "${displayLine(s)}" on the head's branch or any other`, 'see cpfs log --all for every branch and its turns (bN:T)')
  }
}

function findBranch (history: TreeHistory, n: number): Branch {
  const b = (history.meta.branches ?? []).find(x => x.n === n)
  if (b) return b
  const have = (history.meta.branches ?? []).map(branchName)
  throw new CpfsError('UNKNOWN_BRANCH', `there is no branch b${n}${have.length ? ` (branches: ${have.join(', ')})` : ' (the history has no other branch)'}`, 'see cpfs log --all')
}

function onBranch (history: TreeHistory, b: Branch, t: string | undefined): TurnRef {
  if (t === undefined) return { stack: b.stack, turn: null, branch: b.n }
  const len = b.stack.length
  const bad = (): never => { throw new CpfsError('UNKNOWN_TURN', `branch ${branchName(b)} has no turn "${displayLine(t)}" (its turns are 1..${len})`, 'see cpfs log --all') }
  if (/^-\d+$/.test(t)) {
    const n = len + 1 + Number(t)
    return Number(t) !== 0 && n >= 1 ? { stack: b.stack, turn: n, branch: b.n } : bad()
  }
  if (/^\d+$/.test(t)) {
    const n = Number(t)
    return n >= 1 && n <= len ? { stack: b.stack, turn: n, branch: b.n } : bad()
  }
  const named = history.turnsWithId(t, b.stack)
  return named.length === 1 ? { stack: b.stack, turn: named[0], branch: b.n } : bad()
}

/**
 * Whether a layer holds something worth a branch: changes, steps, or a record saying what it
 * was opened for. A fresh head a rewind opened and nothing wrote is not (a second `rewind`
 * right after a first must not leave a branch of nothing). Layers not loaded count as held.
 */
export function holdsSomething (history: TreeHistory, layer: number): boolean {
  const entries = history.layers.get(layer)
  if (entries === undefined || entries.size > 0 || history.partsOf(layer).length > 0) return true
  const rec = history.store.turnRecord(layer)
  if (rec.rewound !== undefined) return false
  return rec.prompt !== undefined || rec.message !== undefined || rec.summary !== undefined || rec.id !== undefined
}

/**
 * Keep what a change leaves: each left stack becomes a branch unless every layer it has that
 * `now` and the branches do not is an empty, unlabelled head. A branch that is now the head's
 * stack stops being one (its tip becomes the head again, which writes go to).
 */
export function keepLeft (history: TreeHistory, left: Left[], now: number[], at = Date.now()): void {
  const meta = history.meta
  const branches = (meta.branches ?? []).filter(b => !sameStack(b.stack, now) && b.stack.at(-1) !== now.at(-1))
  for (const l of left) {
    if (sameStack(l.stack, now) || branches.some(b => sameStack(b.stack, l.stack))) continue
    const held = new Set<number>(now)
    for (const b of branches) for (const id of b.stack) held.add(id)
    if (!l.stack.some(id => !held.has(id) && holdsSomething(history, id))) continue
    meta.nextBranch ??= branches.reduce((n, b) => Math.max(n, b.n + 1), 1)
    branches.push({ n: meta.nextBranch++, stack: l.stack.slice(), leftAt: at, by: l.by })
  }
  meta.branches = branches
}

/** `cpfs redo BRANCH`: the branch's tip; only bN is a branch. */
export function branchRef (spec: string): string {
  const s = String(spec).trim()
  if (/^b\d+$/.test(s)) return s
  throw new CpfsError('BAD_BRANCH', `"${displayLine(s)}" is not a branch (branches are named b1, b2, ...)`, 'see cpfs log --all; cpfs rewind T goes to the start of a turn')
}
