// Steps (issue 22): labelled spans inside a turn — one tool call of an agent, one command —
// whose changes can be told apart, reported and undone. A step does not cut the history into
// more turns: when one begins or ends, the head layer is sealed as a *part* of the head turn
// (History.sealPart) and a fresh layer goes on taking the turn's changes. So what a step's
// span changed is a layer of its own, with the exact state before it underneath, and the
// turn's number, view and rewind stay as they were. Both seals are skipped when nothing
// changed since the last one: a tool call that reads costs one small record.
//
// Who belongs to a step is decided by processes, not only by time, so that two agents (or a
// background process) writing at once are told apart: the step's *owner* is the process that
// runs it (an agent for a hook's step, the shell for `cpfs step begin`, cpfs for exec), and a
// change belongs to the step when it was made by the owner during the step, or by a process
// the owner's tree started during it (step-analysis.ts) — also after the step ended, which is
// how a background process's late writes are found.
import { CpfsError } from '../errors.js'
import { decode, encode } from '../store/codec.js'
import { stepIdKey, stepKey, type BatchOp } from '../store/keys.js'
import type { Store } from '../store/store.js'
import { checkId, displayLine, neutralise } from './labels.js'
import { uptimeTicks } from './processes.js'
import type { Attribution } from './attribution.js'
import type { History } from './history.js'
import type { Entry } from '../store/entries.js'

export interface StepRecord {
  /** Its number: steps count from 1 per workspace. */
  n: number
  /** Its external id (a tool call's tool_use_id), when it was given one. */
  id?: string
  /** What it is: the tool and its command or file, or what `cpfs step begin` was told. */
  label: string
  /** The agent's tool (Bash, Edit, Write...), for a step opened by a hook. */
  tool?: string
  /** Workspace paths the tool call named (file_path, paths in a command): changes elsewhere are flagged. */
  paths?: string[]
  /** The agent's session, for a step opened by a hook. */
  session?: string
  /** The process that runs the step (its id, session/processes.ts); null: any process. */
  owner: string | null
  openedAt: number
  closedAt?: number
  /** When it began and ended in clock ticks since boot, the clock of processes' start times. */
  ticks: [number, number | null]
  /** The parts (layers) sealed while it was open, oldest first: where its changes are. */
  parts: number[]
  /** The part sealed when it began, if no step was open then: what changed between steps. */
  between?: number
  /** The layer that took its first changes (the head when it began): nothing of it is older. */
  from: number
}

export interface StepOptions {
  label?: string
  id?: string
  tool?: string
  paths?: string[]
  session?: string
  /** The owner's pid; absent or gone: any process belongs to the step. */
  ownerPid?: number
}

/** What the session does for the steps: seal the head as a part (null: nothing to seal), and its records. */
export interface StepSealer {
  seal: (open: number[]) => { part: number, ops: BatchOp[] } | null
  ownerId: (pid: number) => string | null
  headLayer: () => number
}

const LABEL_MAX = 200

/** An agent's session id as a step records it. */
function sessionLabel (session: string): string {
  return displayLine(session).slice(0, 80)
}

/**
 * How a session's steps seal its head layer as a part of the head turn (the overlay then
 * writes into the new head; its chunks are pinned and its processes start over, as at a
 * turn), and name their owner.
 */
export function headSealer (history: History, overlay: { head: Map<string, Entry> }, attribution: Attribution, pin: () => void): StepSealer {
  return {
    seal: (open) => {
      if (overlay.head.size === 0) return null
      const sealed = history.sealPart(open)
      overlay.head = history.layers.get(history.headLayer)!
      pin()
      attribution.newHead([])
      return sealed
    },
    // No process recorded (attribution off, no mount): every change in its span is the step's.
    ownerId: (pid) => attribution.recording ? attribution.processOf(pid) : null,
    headLayer: () => history.headLayer
  }
}

/** What the steps write through: the session's persister (pending changes first, then a synced batch). */
export interface StepWriter {
  flushAll: (sync: boolean) => Promise<void> | null
  commit: (ops: BatchOp[]) => Promise<void>
  /** Run a change of the stack's records after the ones before it (Session.exclusive). */
  exclusive: <T>(fn: () => Promise<T>) => Promise<T>
}

export class Steps {
  constructor (private readonly store: Store, private readonly writer: StepWriter, private readonly sealer: StepSealer) {}

  /** Begin a step. */
  async begin (opts: StepOptions): Promise<StepRecord> {
    return await this.writer.exclusive(async () => await this.change(() => this.beginOps(opts, this.sealer)))
  }

  /** End a step, the newest open one by default. */
  async end (ref?: string | number): Promise<StepRecord> {
    return await this.writer.exclusive(async () => await this.change(() => this.endOps(ref, this.sealer)))
  }

  /** End the steps a stopped daemon left open: what changed since their last part is theirs. */
  async endStopped (): Promise<void> {
    if (this.open.length) await this.writer.exclusive(async () => await this.change(() => ({ step: null, ops: this.endAll(this.sealer) })))
  }

  /**
   * A turn is about to be sealed (inside its exclusive run): what the open steps changed in
   * it becomes a part of it.
   */
  async sealForTurn (): Promise<void> {
    if (this.open.length) await this.change(() => ({ step: null, ops: this.partOps(this.sealer) }))
  }

  /** Seal and record: the head's pending changes go into the layer being sealed, first. */
  private async change<T> (make: () => { step: T, ops: BatchOp[] }): Promise<T> {
    const flushed = this.writer.flushAll(false)
    const { step, ops } = make()
    const committed = this.writer.commit(ops)
    await flushed
    await committed
    return step
  }

  private get meta () {
    return this.store.meta
  }

  /** Open steps, oldest first. */
  get open (): number[] {
    return this.meta.openSteps ?? []
  }

  record (n: number): StepRecord | null {
    const raw = this.store.getSync(stepKey(n))
    return raw ? decode<StepRecord>(raw) : null
  }

  /** A step by its number or external id. */
  resolve (ref: string | number): StepRecord {
    const s = String(ref).trim()
    let n: number | null = null
    if (/^\d+$/.test(s)) n = Number(s)
    else {
      const raw = s === '' ? undefined : this.store.getSync(stepIdKey(s))
      if (raw) n = decode<number>(raw)
    }
    const rec = n === null ? null : this.record(n)
    if (!rec) {
      const last = (this.meta.nextStep ?? 1) - 1
      throw new CpfsError('UNKNOWN_STEP', `no step has the number or id "${displayLine(s)}"${last > 0 ? ` (steps are 1..${last})` : ' (no step was recorded yet)'}`, 'see cpfs log --steps')
    }
    return rec
  }

  /**
   * Begin a step: seal what changed since the last seal as a part of the open steps (or of
   * none: `between`), then record the step. Returns the record and the store ops (the caller
   * commits them with the metadata, after the head's pending changes).
   */
  private beginOps (opts: StepOptions, sealer: StepSealer): { step: StepRecord, ops: BatchOp[] } {
    const id = opts.id === undefined ? undefined : checkId(opts.id)
    if (id !== undefined && this.store.getSync(stepIdKey(id)) !== undefined) {
      throw new CpfsError('DUPLICATE_STEP', `a step already has the id "${id}"`, 'give each step its own id (see cpfs log --steps)')
    }
    const owner = opts.ownerPid === undefined ? null : sealer.ownerId(opts.ownerPid)
    this.pending.clear()
    const ops: BatchOp[] = []
    const open = this.open
    const sealed = sealer.seal(open)
    if (sealed) for (const op of this.partSealed(sealed, open)) ops.push(op)
    const n = this.meta.nextStep ?? 1
    this.meta.nextStep = n + 1
    const step: StepRecord = {
      n,
      label: neutralise(displayLine(opts.label ?? `step ${n}`)).slice(0, LABEL_MAX),
      owner,
      openedAt: Date.now(),
      ticks: [uptimeTicks(), null],
      parts: [],
      from: sealer.headLayer()
    }
    if (id !== undefined) step.id = id
    if (opts.tool !== undefined) step.tool = displayLine(opts.tool).slice(0, 40)
    if (opts.paths?.length) step.paths = opts.paths.slice(0, 20)
    if (opts.session !== undefined) step.session = sessionLabel(opts.session)
    if (sealed && open.length === 0) step.between = sealed.part
    this.meta.openSteps = [...open, n]
    ops.push({ type: 'put', key: stepKey(n), value: encode(step) })
    if (id !== undefined) ops.push({ type: 'put', key: stepIdKey(id), value: encode(n) })
    return { step, ops }
  }

  /**
   * End a step (the newest open one when ref is undefined): seal what changed as a part of
   * the open steps, and close it. Returns its record and the store ops.
   */
  private endOps (ref: string | number | undefined, sealer: StepSealer): { step: StepRecord, ops: BatchOp[] } {
    const open = this.open
    if (open.length === 0) throw new CpfsError('NO_OPEN_STEP', 'no step is open', 'begin one with cpfs step begin')
    const n = ref === undefined ? open[open.length - 1] : this.resolve(ref).n
    if (!open.includes(n)) throw new CpfsError('STEP_ENDED', `step ${n} has ended already`, 'see cpfs log --steps')
    this.pending.clear()
    const ops: BatchOp[] = []
    const sealed = sealer.seal(open)
    // (the records of the open steps are rewritten there, this one's with them)
    const records = sealed ? this.partSealed(sealed, open) : []
    let step = this.pending.get(n) ?? this.record(n)!
    step = { ...step, closedAt: Date.now(), ticks: [step.ticks[0], uptimeTicks()] }
    for (const op of records) if (op.key !== stepKey(n)) ops.push(op)
    this.pending.clear()
    this.meta.openSteps = open.filter(x => x !== n)
    ops.push({ type: 'put', key: stepKey(n), value: encode(step) })
    return { step, ops }
  }

  /**
   * The history changed under the open steps (a rewind, redo, discard): they end there, and
   * what they did stays in their parts. With a sealer (a new mount after a crash), what
   * changed since the last seal is theirs.
   */
  endAll (sealer?: StepSealer): BatchOp[] {
    return this.closeOps(this.open, sealer)
  }

  /**
   * End the open steps an agent's session began (a new prompt, or the agent stopped: a tool
   * call it interrupted never had its PostToolUse). Returns how many ended.
   */
  async endSession (session: string): Promise<number> {
    return await this.writer.exclusive(async () => {
      const which = this.open.filter(n => this.record(n)?.session === sessionLabel(session))
      if (which.length) await this.change(() => ({ step: null, ops: this.closeOps(which, this.sealer) }))
      return which.length
    })
  }

  /** Close steps `which` (open ones), after sealing what changed as a part of every open step. */
  private closeOps (which: number[], sealer?: StepSealer): BatchOp[] {
    this.pending.clear()
    const open = this.open
    const sealed = sealer && open.length ? sealer.seal(open) : null
    const ops: BatchOp[] = sealed ? this.partSealed(sealed, open) : []
    for (const n of which) {
      const step = this.pending.get(n) ?? this.record(n)
      if (step) ops.push({ type: 'put', key: stepKey(n), value: encode({ ...step, closedAt: Date.now(), ticks: [step.ticks[0], uptimeTicks()] }) })
    }
    this.pending.clear()
    if (which.length) this.meta.openSteps = open.filter(n => !which.includes(n))
    return ops
  }

  /** What the open steps changed in the head becomes a part of every one of them. */
  private partOps (sealer: StepSealer): BatchOp[] {
    this.pending.clear()
    const open = this.open
    const sealed = sealer.seal(open)
    return sealed ? this.partSealed(sealed, open) : []
  }

  /** Records of open steps changed in this batch and not stored yet (end reads them). */
  private readonly pending = new Map<number, StepRecord>()

  /** A part was sealed while `open` were open: each of them holds it now. */
  private partSealed (sealed: { part: number, ops: BatchOp[] }, open: number[]): BatchOp[] {
    const ops = sealed.ops.slice()
    for (const n of open) {
      const step = this.record(n)
      if (!step) continue
      const next = { ...step, parts: [...step.parts, sealed.part] }
      this.pending.set(n, next)
      ops.push({ type: 'put', key: stepKey(n), value: encode(next) })
    }
    return ops
  }
}
