// What one step changed (steps.ts): the keys its processes changed in the layers from
// its first part on, each with the layer it first changed it in (the state before that layer
// is what undoing the step restores), whether another process changed it too or again later,
// and the changes other processes made while the step was open. Read-only.
//
// A change belongs to the step when it was made
//  - by the step's owner (the agent, the shell) in one of the step's own parts, or
//  - by a process started while the step was open, in the owner's tree (or orphaned: a
//    background process whose parent has exited), in any layer: a background process the step
//    started is the step's also when it writes after the step ended.
// A process running before the step began is not the step's, even in the owner's tree: a
// watcher an earlier tool call started writes for that call.
import { View } from '../overlay/view.js'
import { decode, entryBy } from '../store/codec.js'
import type { Entry } from '../store/entries.js'
import { entryKey, processKey } from '../store/keys.js'
import { PARENT_DEPTH, parseProcessId, type ProcessRecord } from './processes.js'
import type { Session } from './session.js'
import type { StepRecord } from './steps.js'

/** One key the step changed. */
export interface StepKey {
  /** Index in `layers` of the first layer where the step changed it. */
  first: number
  /** Index of the last. */
  last: number
  /** Another process changed it in a layer where the step did too (the two cannot be told apart). */
  shared: boolean
  /** Processes ('' for cpfs itself) that changed it after the step first did, in layers of their own. */
  laterBy: string[]
}

export interface StepAnalysis {
  step: StepRecord
  /** The layers of the current history, in order (History.expand). */
  layers: number[]
  /** The turn (number) each layer belongs to. */
  turnOf: number[]
  /** False when the step's parts are not in the current history (rewound away, pruned). */
  inHistory: boolean
  keys: Map<string, StepKey>
  /** Keys other processes changed in the step's parts: key → their process ids ('' for cpfs). */
  others: Map<string, string[]>
  /** The processes counted as the step's (the owner, and those it started). */
  members: Set<string>
  /** Who belongs to the step, with the process records it has read (reports reuse them). */
  who: Membership
}

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'fish', 'ash', 'ksh'])

/** The processes that changed `key` in `layer`: the head's from the mount's memory, others' from their records. */
export function byOf (session: Session, layer: number, key: string): string[] {
  if (layer === session.headLayer) return session.attribution.byOf(key) ?? []
  return entryBy(session.store.getSync(entryKey(layer, key))) ?? []
}

/** Who belongs to a step (see the top of this file); answers are cached per process. */
export class Membership {
  private readonly cache = new Map<string, boolean>()
  private readonly records = new Map<string, ProcessRecord | null>()
  constructor (private readonly session: Session, readonly step: StepRecord) {}

  /** Is a change by process `id` the step's, made in one of its parts (`inPart`) or elsewhere? */
  member (id: string, inPart: boolean): boolean {
    const { owner, ticks } = this.step
    if (owner === null || id === owner) return inPart
    if (id === '') return false
    let known = this.cache.get(id)
    if (known === undefined) {
      const p = parseProcessId(id)
      const o = parseProcessId(owner)
      known = p !== null && o !== null && p.boot === o.boot && p.start >= ticks[0] && (ticks[1] === null || p.start <= ticks[1]) && this.underOwner(id)
      this.cache.set(id, known)
    }
    // A shell of the owner's that runs its commands (an agent's persistent shell, started
    // before the step) writes for the step it runs in: `echo x > f` is the shell's own write.
    return known || (inPart && this.isOwnersShell(id))
  }

  private isOwnersShell (id: string): boolean {
    const rec = this.record(id)
    if (rec === null || rec.parent === null) return false
    const first = rec.command.split(' ')[0]
    return SHELLS.has(first.slice(first.lastIndexOf('/') + 1).replace(/^-/, '')) && this.underOwner(id)
  }

  record (id: string): ProcessRecord | null {
    if (!this.records.has(id)) {
      const raw = this.session.store.getSync(processKey(id))
      this.records.set(id, raw ? decode<ProcessRecord>(raw) : null)
    }
    return this.records.get(id)!
  }

  /** In the owner's tree, or orphaned (its parent gone before it was met), or not recorded yet. */
  private underOwner (id: string): boolean {
    const rec = this.record(id)
    if (rec === null || rec.parent === null) return true
    let up: string | null = rec.parent
    for (let depth = 0; up !== null && depth <= PARENT_DEPTH; depth++) {
      if (up === this.step.owner) return true
      up = this.record(up)?.parent ?? null
    }
    return false
  }
}

/** What step `step` changed, in the current history. */
export async function analyseStep (session: Session, step: StepRecord): Promise<StepAnalysis> {
  await session.persister.flushAll(false)
  const { history } = session
  await history.load(session.meta.stack)
  const layers: number[] = []
  const turnOf: number[] = []
  session.meta.stack.forEach((id, i) => {
    for (const l of history.expand([id])) {
      layers.push(l)
      turnOf.push(i + 1)
    }
  })
  const parts = new Set(step.parts)
  // Its first layer: where its first changes went (a step that changed nothing itself may
  // still have started a process that writes later).
  const firstPart = layers.findIndex(l => parts.has(l) || l === step.from)
  const who = new Membership(session, step)
  const out: StepAnalysis = { step, layers, turnOf, inHistory: firstPart >= 0, keys: new Map(), others: new Map(), members: new Set(), who }
  if (firstPart < 0) return out
  for (let i = firstPart; i < layers.length; i++) {
    const layer = layers[i]
    // An open step's changes since its last part are in the head.
    const inPart = parts.has(layer) || (layer === session.headLayer && session.steps.open.includes(step.n))
    // Two steps of one owner open at once (parallel tool calls of one agent): what the owner's
    // tree changed then cannot be told apart, and is marked shared.
    const twin = inPart && sameOwnerOpen(session, layer, step)
    for (const key of history.layers.get(layer)?.keys() ?? []) {
      // '' stands for no process recorded (cpfs itself, or attribution off).
      const by = byOf(session, layer, key)
      const ids = by.length === 0 ? [''] : by
      const mine = ids.filter(id => who.member(id, inPart))
      for (const id of mine) if (id !== '') out.members.add(id)
      const rest = ids.filter(id => !mine.includes(id))
      const known = out.keys.get(key)
      if (mine.length > 0) {
        if (known === undefined) out.keys.set(key, { first: i, last: i, shared: rest.length > 0 || twin, laterBy: [] })
        else {
          known.last = i
          if (rest.length > 0 || twin) known.shared = true
        }
      } else if (known !== undefined) {
        for (const id of rest) if (!known.laterBy.includes(id)) known.laterBy.push(id)
      }
      if (inPart && rest.length > 0 && !(mine.length > 0)) out.others.set(key, rest)
    }
  }
  return out
}

/** Was another step of the same owner open while `layer` was the head? */
function sameOwnerOpen (session: Session, layer: number, step: StepRecord): boolean {
  const open = layer === session.headLayer ? session.steps.open : session.store.turnRecord(layer).steps ?? []
  return open.some(n => n !== step.n && session.steps.record(n)?.owner === step.owner)
}

/** The view before layer index `i` of an analysis (the lower and every layer below it). */
export function viewBefore (session: Session, a: StepAnalysis, i: number, cache = new Map<number, View>()): View {
  let v = cache.get(i)
  if (v === undefined) {
    v = View.build(session.lower, a.layers.slice(0, i).map(l => session.history.layers.get(l) ?? new Map<string, Entry>()))
    cache.set(i, v)
  }
  return v
}
