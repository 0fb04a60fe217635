// Restoring paths to their state at the start of a turn: where they come from, and the
// offline form, prepared as a new head layer that the plan writing the real directory commits.
import { CpfsError } from '../errors.js'
import { Overlay } from '../overlay/overlay.js'
import { View } from '../overlay/view.js'
import { encodeEntry } from '../store/codec.js'
import { entryKey, type BatchOp } from '../store/keys.js'
import type { Lower } from '../real/lower.js'
import type { ChunkStore } from '../store/chunks.js'
import type { Store, TurnRecord } from '../store/store.js'
import type { History, StackChange } from './history.js'
import type { Persister } from './persister.js'

/** What a restore works with: the session's parts (a Session is one). */
export interface RestoreParts {
  history: History
  lower: Lower
  chunks: ChunkStore
  store: Store
  overlay: Overlay
  persister: Persister
}

/** An offline restore, prepared (prepareRestore): the target view, and the history change made when it is committed. */
export interface RestorePrepared {
  turn: number
  view: View
  touched: Set<string>
  commit: () => { change: StackChange, preOps: BatchOp[] }
}

/** The view at the start of turn `spec`, after checking that every path exists now or then. */
export async function restoreSource (session: RestoreParts, spec: string | number, paths: string[], now: View): Promise<{ turn: number, src: View }> {
  const { history } = session
  const t = history.resolveTurn(spec)
  const stack = history.meta.stack.slice(0, t - 1)
  await history.load(stack)
  const src = View.build(session.lower, history.entriesOf(stack))
  for (const p of paths) {
    if (!now.resolve(p) && !src.resolve(p)) {
      throw new CpfsError('NO_SUCH_PATH', `${p.slice(1)} exists neither now nor at the start of turn ${t}`, 'check the path (relative to the workspace) with cpfs diff')
    }
  }
  return { turn: t, src }
}

/**
 * An offline restore: the head layer with the restore applied, prepared as a new layer that
 * replaces the head only when the plan that writes it to the real directory commits (same
 * batch), so a refused restore leaves the history as it was. Returns the target view, the
 * paths it touches, and `commit`, which makes the stack change and the store ops for the new
 * layer's entries.
 */
export async function prepareRestore (session: RestoreParts, spec: string | number, paths: string[]): Promise<RestorePrepared> {
  let t = 0
  const prepared = await prepareHeadChange(session, async (scratch, view) => {
    const { turn, src } = await restoreSource(session, spec, paths, view)
    t = turn
    for (const p of paths) scratch.restore(p, src)
    return paths
  })
  return { ...prepared, turn: t }
}

/**
 * A change of the head layer made offline (restore, undo of a step), prepared on a copy of
 * the head: `change` makes it through a scratch overlay over the current view and returns the
 * paths it meant to change. Committed as restore's is (see prepareRestore).
 */
export async function prepareHeadChange (session: RestoreParts, change: (scratch: Overlay, view: View) => Promise<Iterable<string>>): Promise<Omit<RestorePrepared, 'turn'>> {
  const { history, lower, chunks, store } = session
  const stack = history.meta.stack
  const head = session.overlay.head
  const copy = new Map(head)
  // The head turn's parts (steps) are below its layer: the copy replaces only the layer.
  const view = View.build(lower, [...history.entriesOf(stack.slice(0, -1)), ...history.partsOf(history.headLayer).map(id => history.layers.get(id)!), copy])
  const scratch = new Overlay(view, copy, lower, chunks, {
    onChange: () => {},
    allocIno: () => { session.persister.metaChanged(); return store.allocIno() },
    checkSpace: () => {}
  })
  const touched = new Set<string>(await change(scratch, view))
  for (const k of new Set([...head.keys(), ...copy.keys()])) if (head.get(k) !== copy.get(k)) touched.add(k)
  // The new layer is made only when the caller commits it: a restore that changes nothing
  // leaves the history as it was (no layer, no sealed head).
  const commit = (): { change: StackChange, preOps: BatchOp[] } => {
    const old = history.headLayer
    const layer = history.meta.nextLayer++
    history.adopt(layer, copy)
    const rec: TurnRecord = { ...store.turnRecord(old), layer }
    // The new layer takes the head's place in its turn, after the head's parts.
    const parts = history.partsOf(old)
    if (parts.length) history.meta.parts![layer] = parts
    const preOps: BatchOp[] = [...copy].map(([p, e]) => ({ type: 'put' as const, key: entryKey(layer, p), value: encodeEntry(e) }))
    return { change: { stack: [...stack.slice(0, -1), layer], redo: history.meta.redo, records: [rec], newLayers: [layer] }, preOps }
  }
  return { view, touched, commit }
}
