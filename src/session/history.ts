// The history: the stack of layers (one per turn), the redo stack, the branches kept (tree.ts),
// the turn records, and the layers loaded in memory. It is the one place that loads layers from the store, and the
// only writer of the stack: plans and the session change the history through it.
import { CpfsError } from '../errors.js'
import { encode } from '../store/codec.js'
import type { Entry } from '../store/entries.js'
import { turnKey, type BatchOp } from '../store/keys.js'
import type { Store, TurnRecord } from '../store/store.js'
import { checkId, displayLine, neutralise } from './labels.js'
import type { LeftBy } from '../store/branches.js'
import { keepLeft, type Left, type TurnRef } from './tree.js'

/**
 * Labels of a turn record. `prompt`: what the turn was opened for (the hook's prompt, exec's
 * command, cpfs's own notes). `summary`: what the turn did, given when it was sealed (cpfs turn
 * -m). Histories written before cpfs kept one `message`, given when the turn was opened (and
 * cpfs's own notes still use it): it is read as the prompt.
 */
export interface Labels {
  prompt?: string
  summary?: string
}
export type LabelledRecord = TurnRecord & Labels

/** What `cpfs turn` is told: a message for the turn it seals, a prompt and an id for the one it opens. */
export interface TurnOptions {
  message?: string
  prompt?: string
  id?: string
}

/** A new stack, with what it replaces and the turn records it writes (see History.rewindChange). */
export interface StackChange {
  stack: number[]
  redo: number[][]
  records: TurnRecord[]
  /** Layers this change creates (empty ones, or a restored head prepared in memory). */
  newLayers: number[]
  /** Stacks the change leaves: each is kept as a branch when it holds changes of its own (tree.ts). */
  left?: Left[]
}

const NO_PARTS: number[] = []

export class History {
  /** Layers loaded in memory: the stack's and any a redo may return to. */
  readonly layers = new Map<number, Map<string, Entry>>()

  constructor (readonly store: Store) {}

  get meta () {
    return this.store.meta
  }

  get headLayer (): number {
    return this.meta.stack[this.meta.stack.length - 1]
  }

  /** The head turn's number (turns count from 1). */
  get head (): number {
    return this.meta.stack.length
  }

  /** The sealed parts of a turn's layer (steps.ts), oldest first; none for most turns. */
  partsOf (layer: number): number[] {
    return this.meta.parts?.[layer] ?? NO_PARTS
  }

  /** Every layer a stack of turns is made of, in order: each turn's parts, then its layer. */
  expand (stack: number[]): number[] {
    if (this.meta.parts === undefined) return stack
    const out: number[] = []
    for (const id of stack) {
      for (const p of this.partsOf(id)) out.push(p)
      out.push(id)
    }
    return out
  }

  /** Load the layers of the given turns (their parts too) that are not in memory yet (the one place that reads layers). */
  async load (ids: number[]): Promise<void> {
    for (const id of this.expand(ids)) if (!this.layers.has(id)) this.layers.set(id, await this.store.loadLayer(id))
  }

  /** A layer made outside the stack's own changes (outside changes absorbed) joins the loaded ones. */
  adopt (id: number, entries: Map<string, Entry>): void {
    this.layers.set(id, entries)
  }

  /** Layers `old` were merged into layer `id` (prune): only the merged one stays loaded. */
  replace (old: number[], id: number, merged: Map<string, Entry>): void {
    this.layers.set(id, merged)
    for (const o of old) this.layers.delete(o)
  }

  /** The layers of the turns `ids` (their parts too), in order; each must be loaded (see load). */
  entriesOf (ids: number[]): Array<Map<string, Entry>> {
    return this.expand(ids).map(id => this.layers.get(id)!)
  }

  /** Paths whose state may differ between two stacks: what their non-shared layers recorded. */
  stackDiff (sa: number[], sb: number[]): Set<string> {
    const a = this.expand(sa)
    const b = this.expand(sb)
    let cp = 0
    while (cp < a.length && cp < b.length && a[cp] === b[cp]) cp++
    const out = new Set<string>()
    for (const id of [...a.slice(cp), ...b.slice(cp)]) for (const p of this.layers.get(id)?.keys() ?? []) out.add(p)
    return out
  }

  /** Turns whose changes the real directory does not hold yet. */
  pending (): number {
    const stack = this.expand(this.meta.stack)
    const applied = this.expand(this.meta.applied)
    let cp = 0
    while (cp < stack.length && cp < applied.length && stack[cp] === applied[cp]) cp++
    const nonEmpty = (id: number): boolean => (this.layers.get(id)?.size ?? 1) > 0
    return stack.slice(cp).filter(nonEmpty).length + applied.slice(cp).filter(nonEmpty).length
  }

  /** An id for a new turn, checked: ids must be new, or `rewind ID` would be ambiguous. */
  newId (id: string): string {
    const checked = checkId(id)
    const at = this.turnsWithId(checked)
    if (at.length) throw new CpfsError('DUPLICATE_ID', `turn ${at[0]} already has the id "${checked}"`, `give each turn its own id (cpfs rewind ${checked} goes back to the start of turn ${at[0]})`)
    return checked
  }

  /** Turn number for a user-supplied TURN: a number in 1..head or an external id. */
  resolveTurn (spec: string | number): number {
    const s = String(spec).trim()
    // -N counts back from the head, as negative indexes do: -1 is the head turn (its start is
    // the last checkpoint), -2 the turn before. Ids can never look like this (checkId).
    if (/^-\d+$/.test(s)) {
      const n = this.head + 1 + Number(s)
      if (Number(s) !== 0 && n >= 1) return n
      throw new CpfsError('UNKNOWN_TURN', `turn ${s} does not exist: there ${this.head === 1 ? 'is 1 turn' : `are ${this.head} turns`} (-1 is the head turn, ${this.head}; -${this.head} is turn 1)`, 'see cpfs log')
    }
    if (/^\d+$/.test(s)) {
      const n = Number(s)
      if (n >= 1 && n <= this.head) return n
      throw new CpfsError('UNKNOWN_TURN', `turn ${s} does not exist (turns are 1..${this.head})`, 'see cpfs log')
    }
    const named = this.turnsWithId(s)
    if (named.length === 1) return named[0]
    if (named.length > 1) throw new CpfsError('AMBIGUOUS_ID', `the id "${displayLine(s)}" names turns ${named.join(' and ')}`, 'use the turn number')
    if (s === '') throw new CpfsError('BAD_TURN', 'no turn given', 'pass a turn number or an external id from cpfs log')
    throw new CpfsError('UNKNOWN_TURN', `no turn has the number or id "${s}"`, 'see cpfs log for turn numbers and ids')
  }

  /**
   * Seal the head turn and open a new, empty one (in memory now; the records' ops to store).
   * `written`: turn records going into the same batch, not in the store yet — a restored head
   * prepared offline is one, and reading its record from the store would find none (it was
   * sealed with openedAt 0 and without its labels).
   */
  sealHead (opts: TurnOptions = {}, written: TurnRecord[] = []): BatchOp[] {
    const now = Date.now()
    const pending = written.find(r => r.layer === this.headLayer)
    const sealed: LabelledRecord = pending ? { ...pending } : this.store.turnRecord(this.headLayer)
    sealed.sealedAt = now
    if (opts.message !== undefined) sealed.summary = neutralise(opts.message)
    const layer = this.meta.nextLayer++
    const rec: LabelledRecord = { layer, openedAt: now }
    if (opts.prompt !== undefined) rec.prompt = neutralise(opts.prompt)
    if (opts.id !== undefined) rec.id = opts.id
    this.meta.stack.push(layer)
    this.layers.set(layer, new Map())
    return [
      { type: 'put', key: turnKey(sealed.layer), value: encode(sealed) },
      { type: 'put', key: turnKey(layer), value: encode(rec) }
    ]
  }

  /**
   * Seal the head layer as a part of the head turn (a step began or ended, steps.ts) and make
   * a new, empty layer the head, carrying the turn's record; `steps`: the steps open while the
   * sealed layer was the head. The turn's number, labels and view stay what they were: only
   * where its changes are kept changes. Returns the sealed part and the store ops (the caller
   * adds metaOp).
   */
  sealPart (steps: number[]): { part: number, ops: BatchOp[] } {
    const now = Date.now()
    const part = this.headLayer
    const turn: LabelledRecord = this.store.turnRecord(part)
    const sealed: TurnRecord = { layer: part, openedAt: turn.since ?? turn.openedAt, sealedAt: now, steps }
    const layer = this.meta.nextLayer++
    const rec: LabelledRecord = { ...turn, layer, since: now }
    const parts = this.meta.parts ?? (this.meta.parts = {})
    parts[layer] = [...this.partsOf(part), part]
    delete parts[part]
    this.meta.stack[this.meta.stack.length - 1] = layer
    this.layers.set(layer, new Map())
    return {
      part,
      ops: [
        { type: 'put', key: turnKey(part), value: encode(sealed) },
        { type: 'put', key: turnKey(layer), value: encode(rec) }
      ]
    }
  }

  /**
   * The stack of a rewind to the start of turn t (of the head's stack, or of the stack `ref`
   * names: a branch's turn, or its tip), with what it replaces and the turn records it writes.
   * The stack left is kept (as a branch) and redo returns to it. Computed first, applied by
   * `apply` — in the same batch as a plan's commit when the real directory must change with
   * it, so a crash never separates the two. Layers of `ref.stack` must be loaded.
   */
  rewindChange (t: number | TurnRef, by: LeftBy = 'rewind'): StackChange {
    const ref: TurnRef = typeof t === 'number' ? { stack: this.meta.stack, turn: t, branch: null } : t
    const old = this.meta.stack.slice()
    const left: Left[] = [{ stack: old, by }]
    if (ref.turn === null) return { stack: ref.stack.slice(), redo: [...this.meta.redo, old], records: [], newLayers: [], left }
    const target: LabelledRecord = this.store.turnRecord(ref.stack[ref.turn - 1])
    const layer = this.meta.nextLayer++
    // The turn starts again: it keeps what it was opened for, not what it had done.
    const rec: LabelledRecord = { layer, openedAt: Date.now(), rewound: ref.turn }
    if (target.prompt !== undefined) rec.prompt = target.prompt
    if (target.message !== undefined) rec.message = target.message
    if (target.id !== undefined) rec.id = target.id
    return { stack: ref.stack.slice(0, ref.turn - 1).concat(layer), redo: [...this.meta.redo, old], records: [rec], newLayers: [layer], left }
  }

  /**
   * `redo`: back to the stack the last rewind (or discard) replaced. What was written since
   * (the head's stack now) is left as a branch of its own: both are kept.
   */
  async redoChange (): Promise<StackChange> {
    const prev = this.meta.redo.at(-1)
    if (!prev) {
      const hint = (this.meta.branches ?? []).length ? 'cpfs log --all lists the branches; cpfs rewind bN goes to one\'s tip' : 'redo follows a rewind, undo or discard'
      throw new CpfsError('NOTHING_TO_REDO', 'nothing to redo', hint)
    }
    await this.load(prev)
    return { stack: prev, redo: this.meta.redo.slice(0, -1), records: [], newLayers: [], left: [{ stack: this.meta.stack.slice(), by: 'redo' }] }
  }

  /**
   * `unmount --discard`: back to the applied stack plus a new head; the old stack, which held
   * turns the real directory does not, is kept as a branch (redo brings it back).
   */
  async discardChange (): Promise<StackChange> {
    await this.load(this.meta.applied)
    const old = this.meta.stack.slice()
    const layer = this.meta.nextLayer++
    const rec: LabelledRecord = { layer, openedAt: Date.now(), prompt: 'after discarding' }
    return { stack: [...this.meta.applied, layer], redo: [...this.meta.redo, old], records: [rec], newLayers: [layer], left: [{ stack: old, by: 'discard' }] }
  }

  /** Make a stack change in memory; returns the store ops of its records (the caller adds metaOp). */
  apply (c: StackChange): BatchOp[] {
    for (const id of c.newLayers) if (!this.layers.has(id)) this.layers.set(id, new Map())
    this.meta.stack = c.stack.slice()
    this.meta.redo = c.redo.map(r => r.slice())
    keepLeft(this, c.left ?? [], this.meta.stack)
    return c.records.map(rec => ({ type: 'put' as const, key: turnKey(rec.layer), value: encode(rec) }))
  }

  /** Say what a turn was opened for (fork: where the new history came from). */
  async labelTurn (turn: number, prompt: string): Promise<void> {
    const rec: LabelledRecord = this.store.turnRecord(this.meta.stack[turn - 1])
    rec.prompt = neutralise(prompt)
    await this.store.batch([{ type: 'put', key: turnKey(rec.layer), value: encode(rec) }], true)
  }

  /** The turns (numbers) of a stack (default: the head's) that carry this id. */
  turnsWithId (id: string, stack = this.meta.stack): number[] {
    const out: number[] = []
    stack.forEach((layer, i) => { if (this.store.turnRecord(layer).id === id) out.push(i + 1) })
    return out
  }
}
