// The tree at a turn of any branch, as a read-only View: what `cpfs view` serves and what
// `cpfs bisect` runs its command in. A view is built once, from layers that never change
// again (sealed turns, or a snapshot of the head read back from the store), so it shows the
// same tree for as long as it is open, whatever the workspace does meanwhile (writes, turns,
// a rewind).
import { CpfsError, isCpfsError } from '../errors.js'
import { View } from '../overlay/view.js'
import { hexName } from '../store/chunks.js'
import { viewOf } from './views.js'
import type { Session } from '../session/session.js'
import { displayLine } from '../session/labels.js'
import { resolveRef, type TurnRef } from '../session/tree.js'

/** Which state of the turn: when it began (`cpfs view T`), or what it left (its end). */
export type TurnEdge = 'start' | 'end'

export interface TurnState {
  /** The turn's number on its line (the head's stack, or its branch). */
  turn: number
  /** The turn as the user can name it again: T, bN:T, or bN (a branch's tip). */
  ref: string
  at: TurnEdge
  /** The branch's number, or null for the head's own stack. */
  branch: number | null
  /** The turn's message, prompt or id, on one line ('' when it has none). */
  label: string
  view: View
}

/** The ref as typed, resolved; an unknown turn names `cpfs log --all`, where every turn of every branch is. */
function resolveTurnRef (session: Session, spec: string): TurnRef {
  try {
    return resolveRef(session.history, spec)
  } catch (err) {
    if (isCpfsError(err) && /^UNKNOWN_(TURN|BRANCH)$/.test(err.code)) throw new CpfsError(err.code, err.message, 'see cpfs log --all for the turns of every branch (N, bN:T)')
    throw err
  }
}

/** The label of turn `turn` of `stack`: its message, else its prompt, else its id. */
export function turnLabel (session: Session, stack: number[], turn: number): string {
  const layer = stack[turn - 1]
  if (layer === undefined) return ''
  // As cpfs log shows them: `summary` is what `cpfs turn -m` said the turn did; `prompt`
  // (or, in older records, `message`) what it was opened for.
  const rec = session.store.turnRecord(layer) as { summary?: string, message?: string, prompt?: string, id?: string }
  return displayLine(rec.summary ?? rec.prompt ?? rec.message ?? rec.id ?? '')
}

/**
 * The tree at turn `spec` (N, an id, bN:T, or bN for a branch's tip): at its start, or with
 * `end` at its end — the start of the next turn, or for the head turn the tree as it is now.
 */
export async function turnState (session: Session, spec: string, end = false): Promise<TurnState> {
  const r = resolveTurnRef(session, spec)
  const name = r.branch === null ? '' : `b${r.branch}`
  if (r.turn === null) {
    const turn = r.stack.length
    return { turn, ref: name, at: 'end', branch: r.branch, label: turnLabel(session, r.stack, turn), view: await viewOf(session, r.stack) }
  }
  const ref = r.branch === null ? String(r.turn) : `${name}:${r.turn}`
  const base = { turn: r.turn, ref, branch: r.branch, label: turnLabel(session, r.stack, r.turn) }
  if (!end) return { ...base, at: 'start', view: await viewOf(session, r.stack.slice(0, r.turn - 1)) }
  if (r.branch === null && r.turn === session.head) return { ...base, at: 'end', view: await headNow(session) }
  return { ...base, at: 'end', view: await viewOf(session, r.stack.slice(0, r.turn)) }
}

/**
 * The tree as it is now, frozen: the head layer's live map keeps changing, so its entries are
 * read back from the store (after a flush) into a map of their own.
 */
async function headNow (session: Session): Promise<View> {
  await session.persister.flushAll(false)
  const h = session.history
  const stack = h.meta.stack.slice()
  const headLayer = stack[stack.length - 1]
  await h.load(stack)
  const head = await session.store.loadLayer(headLayer)
  // The head's chunks are deleted again when its files change before the turn is sealed: the
  // snapshot refers to them now, so they are pinned (garbage collection takes what nothing keeps).
  for (const e of head.values()) {
    if (e.kind === 'f') for (const ref of e.chunks.values()) if (ref) session.chunks.pin(hexName(ref))
  }
  return View.build(session.lower, [...h.entriesOf(stack.slice(0, -1)), ...h.partsOf(headLayer).map(id => h.layers.get(id)!), head])
}
