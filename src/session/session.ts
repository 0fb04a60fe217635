// A session: one workspace's history opened by one process (the mount daemon, or a CLI
// command while nothing is mounted). It wires five parts, each with one job, and implements
// turns, rewind, redo, undo, discard and restore on top of them:
//  - History (history.ts): the layer stack, redo stack and turn records; loads layers.
//  - Persister (persister.ts): head-layer changes to the store in ordered, atomic batches.
//  - RealCapture (capture.ts): fingerprints and original bytes of the real directory.
//  - Space (space.ts) and HeadChunks (head-chunks.ts): the store's disk and what frees it.
//  - reports.ts: the log.
// Data flows one way: the overlay reports changes (OverlayHooks) to the persister, which
// writes them to the store; nothing here reaches back up.
//  - `turn` seals the head layer with one synced batch and opens an empty one: O(1) in the
//    size of the tree (it flushes only what is dirty).
//  - `rewind T` is one synced batch that replaces the stack with turns 1..T-1 plus a fresh
//    head, and pushes the old stack onto the redo stack; the old stack is kept as a branch
//    (tree.ts) when it holds changes of its own, also after later writes. Layers stay in the
//    store until retention drops their branch; physical deletion is housekeeping's job.
import { CpfsError } from '../errors.js'
import { Lower } from '../real/lower.js'
import { Overlay } from '../overlay/overlay.js'
import { View } from '../overlay/view.js'
import { ChunkStore } from '../store/chunks.js'
import { memoryBudgets, type MemoryBudgets } from '../store/memory.js'
import { entryBy } from '../store/codec.js'
import type { Entry } from '../store/entries.js'
import { entryKey, type BatchOp } from '../store/keys.js'
import { Store, type TurnRecord } from '../store/store.js'
import { RealCapture } from './capture.js'
import { Attribution } from './attribution.js'
import { HeadChunks } from './head-chunks.js'
import { History, type StackChange, type TurnOptions } from './history.js'
import { Persister } from './persister.js'
import { sessionStatus, turnLog, type SessionStatus, type TurnInfo } from './reports.js'
import { prepareRestore, restoreSource, type RestorePrepared } from './restore.js'
import { Space } from './space.js'
import { Steps, headSealer } from './steps.js'
import { sharedTurns, type LeftBy } from '../store/branches.js'
import { branchRef, resolveRef } from './tree.js'

export type { StackChange, TurnOptions } from './history.js'
export type { SessionStatus, TurnInfo } from './reports.js'
export type { RestorePrepared } from './restore.js'
export type { StepOptions, StepRecord } from './steps.js'


export class Session {
  readonly store: Store
  readonly chunks: ChunkStore
  /** Who changed what: the mount sets its caller for each request (daemon.ts). */
  readonly attribution: Attribution
  readonly lower: Lower
  readonly overlay: Overlay
  readonly workspace: string
  readonly history: History
  /** Labelled spans of turns: tool calls, commands (steps.ts). */
  readonly steps: Steps
  readonly persister: Persister
  readonly capture: RealCapture
  readonly space: Space
  /** When this process opened the history (ms): the start of a mount. */
  readonly openedAt = Date.now()
  private readonly headChunks: HeadChunks
  /** The memory budgets this session was opened with (store/memory.ts). */
  readonly budgets: MemoryBudgets = memoryBudgets()

  /**
   * Called after the session changed the view on its own (rewind, redo, undo, restore) with
   * every path whose state may differ: the mount invalidates the kernel's caches for them.
   */
  onViewChange: ((touched: Set<string>) => void) | null = null

  private constructor (store: Store, workspace: string, dirFd: number, base: Map<string, Entry>) {
    this.store = store
    this.workspace = workspace
    this.chunks = new ChunkStore(store, this.budgets.chunkCache, this.budgets.dirty)
    this.attribution = new Attribution((key) => entryBy(store.getSync(entryKey(this.headLayer, key))))
    this.lower = new Lower(dirFd, base, this.chunks)
    this.history = new History(store)
    this.overlay = new Overlay(new View(this.lower), new Map(), this.lower, this.chunks, {
      onChange: (p) => { this.capture.changed(p); this.persister.changed(p); this.attribution.note(p) },
      onData: (p) => { this.capture.changed(p); this.persister.changedData(p); this.attribution.note(p) },
      allocIno: () => { this.persister.metaChanged(); return this.store.allocIno() },
      checkSpace: (bytes) => this.space.check(bytes),
      onCopyUp: (p, size) => this.capture.onCopyUp(p, size),
      // A chunk kept for an open file may be freed now (HeadChunks.release).
      onLastClose: () => { if (this.headChunks.waiting) this.persister.schedule() }
    })
    this.headChunks = new HeadChunks(store, this.chunks, () => this.overlay.openChunks(), () => this.space.forget())
    this.space = new Space(store, this.chunks, () => this.persister.inflight, () => this.headChunks.freeing())
    this.persister = new Persister(store, this.chunks, this.overlay, this.headChunks, this.space, {
      headLayer: () => this.history.headLayer,
      fingerprintOps: () => this.capture.fingerprintOps(),
      attribution: this.attribution
    }, this.budgets)
    this.capture = new RealCapture(store, this.chunks, this.lower, this.overlay, this.persister, this.space)
    this.steps = new Steps(store, {
      flushAll: (sync) => this.persister.flushAll(sync),
      commit: async (ops) => await this.persister.commit(ops),
      exclusive: (fn) => this.exclusive(fn)
    }, headSealer(this.history, this.overlay, this.attribution, () => this.headChunks.pin()))
  }

  static async open (opts: { storePath: string, workspace: string, dirFd: number, create: boolean }): Promise<Session> {
    const store = await Store.open(opts.storePath, { workspace: opts.workspace, create: opts.create })
    try {
      if (store.meta.workspace !== opts.workspace) {
        throw new CpfsError('STORE_MISMATCH', `store ${opts.storePath} belongs to ${store.meta.workspace}, not ${opts.workspace}`, 'pass the --store of this workspace, or omit --store')
      }
      const base = await store.loadBase()
      const s = new Session(store, opts.workspace, opts.dirFd, base)
      s.capture.fingerprints = await store.loadFingerprints()
      await s.history.load(store.meta.stack)
      s.rebuild(true)
      s.attribution.newHead(s.overlay.head.keys())
      return s
    } catch (err) {
      await store.close()
      throw err
    }
  }

  get meta () {
    return this.store.meta
  }

  get headLayer (): number {
    return this.history.headLayer
  }

  get head (): number {
    return this.history.head
  }

  /** Rebuild the live view after the stack changed underneath (absorb); open handles stay. */
  reload (): void {
    this.rebuild(true)
  }

  private rebuild (keepHandles: boolean): void {
    const view = View.build(this.lower, this.history.entriesOf(this.meta.stack))
    this.overlay.reset(view, this.history.layers.get(this.headLayer)!, keepHandles)
  }

  // ---- turns ----------------------------------------------------------------------------
  // turn, rewind, undo and redo change the in-memory stack synchronously, right after
  // collecting the pending changes of the old head, so that no FUSE op can land between
  // the two; the store batch follows on the same ordered chain.

  /** Seal the head turn and open the next; returns the new head turn's number. */
  async turn (opts: TurnOptions = {}): Promise<number> {
    if (opts.id !== undefined) opts = { ...opts, id: this.history.newId(opts.id) }
    return await this.exclusive(async () => {
      // Steps open across the new turn keep what they changed in this one as a part of it.
      await this.steps.sealForTurn()
      return await this.sealNow(opts)
    })
  }

  /**
   * Seal the head as a turn at once: nothing before the seal awaits, so a caller inside
   * `exclusive` that just changed the head synchronously (a merge) seals exactly its change,
   * with no FUSE write landing between. The caller has sealed the steps (steps.sealForTurn).
   */
  async sealNow (opts: TurnOptions = {}): Promise<number> {
    const flushed = this.persister.flushAll(false)
    const ops = this.sealHead(opts)
    const committed = this.persister.commit(ops)
    await flushed
    await committed
    return this.head
  }

  private serial: Promise<unknown> = Promise.resolve()

  /** Changes of the stack and its records one at a time (turns, steps, rewinds): each reads what the one before wrote. */
  exclusive<T> (fn: () => Promise<T>): Promise<T> {
    const p = this.serial.then(fn, fn)
    this.serial = p.catch(() => {})
    return p
  }

  /** History.sealHead, and the overlay writes into the new head from now on. */
  private sealHead (opts: TurnOptions = {}, written: TurnRecord[] = []): BatchOp[] {
    const ops = this.history.sealHead(opts, written)
    this.overlay.head = this.history.layers.get(this.headLayer)!
    this.headChunks.pin()
    this.attribution.newHead([])
    return ops
  }

  /**
   * The real directory now holds the view of `stack` (a plan just verified it): record that,
   * in memory, and return the store ops. The applied stack must never include a layer that
   * can still change, or later writes would count as applied: when `stack` ends with the head
   * layer, an empty head is left out and a non-empty one is sealed (the next write opens a
   * new turn).
   */
  appliedOps (stack: number[], written: TurnRecord[] = []): BatchOp[] {
    const applied = stack.slice()
    const ops: BatchOp[] = []
    if (applied.length && applied[applied.length - 1] === this.headLayer) {
      if ((this.history.layers.get(this.headLayer)?.size ?? 0) === 0 && this.history.partsOf(this.headLayer).length === 0) applied.pop()
      else for (const op of this.sealHead({}, written)) ops.push(op)
    }
    this.meta.applied = applied
    return ops
  }

  /** See History.rewindChange. */
  rewindChange (t: number): StackChange {
    return this.history.rewindChange(t)
  }

  /** Apply a stack change in memory and in the live view; returns the store ops (the caller adds metaOp). */
  applyChange (c: StackChange): BatchOp[] {
    const old = this.meta.stack
    // Open steps end where the history changes under them.
    const ops = this.steps.endAll()
    for (const op of this.history.apply(c)) ops.push(op)
    this.rebuild(false)
    this.headChunks.pin()
    this.attribution.newHead(this.overlay.head.keys())
    this.onViewChange?.(this.history.stackDiff(old, this.meta.stack))
    return ops
  }

  /** Turn number for a user-supplied TURN: a number in 1..head or an external id. */
  resolveTurn (spec: string | number): number {
    return this.history.resolveTurn(spec)
  }

  /**
   * The workspace is at the start of turn t already: t is the head and nothing was written in
   * it. A rewind there changes nothing, so it must not add a redo step (a second `rewind 2`
   * would otherwise need two `redo`s to get back).
   */
  atStartOf (t: number): boolean {
    return t === this.head && this.overlay.head.size === 0 && this.history.partsOf(this.headLayer).length === 0 && this.overlay.unsettled()[Symbol.iterator]().next().done === true
  }

  /** Go to the start of a turn of any branch (tree.ts: N, -N, an id, bN:T), or to a branch's tip (bN). */
  async rewind (spec: string | number, by: LeftBy = 'rewind'): Promise<{ head: number, dropped: number }> {
    const ref = resolveRef(this.history, spec)
    if (ref.branch === null && ref.turn !== null && this.atStartOf(ref.turn)) return { head: this.head, dropped: 0 }
    const old = this.meta.stack.slice()
    await this.history.load(ref.stack)
    await this.changeStack(() => this.history.rewindChange(ref, by))
    return { head: this.head, dropped: old.length - sharedTurns(old, this.meta.stack) }
  }

  /** The turn `undo` goes back to: the head's start, or the one before when the head is empty. */
  undoTarget (): number {
    const t = this.atStartOf(this.head) ? this.head - 1 : this.head
    if (t < 1) throw new CpfsError('NOTHING_TO_UNDO', 'nothing to undo: turn 1 has no changes', 'make a change first, or see cpfs log')
    return t
  }

  async undo (): Promise<{ head: number, dropped: number }> {
    return await this.rewind(this.undoTarget(), 'undo')
  }

  /** Back to the stack the last rewind left (History.redoChange), or to a branch's tip (`bN`). */
  async redo (branch?: string): Promise<{ head: number }> {
    if (branch !== undefined) return await this.rewind(branchRef(branch), 'redo')
    await this.changeStack(async () => await this.history.redoChange())
    return { head: this.head }
  }

  /**
   * `unmount --discard`: the next session starts from the real directory. What the real
   * directory does not hold (the pending turns) is kept as a branch: `cpfs redo` brings it
   * back, and it stays in the store (cpfs log --all) until retention drops it. Returns the
   * number of turns set aside, 0 when nothing was pending.
   */
  async discard (): Promise<number> {
    await this.persister.flushAll(false)
    const pending = this.history.pending()
    if (pending === 0) return 0
    await this.persister.commit(this.applyChange(await this.history.discardChange()))
    return pending
  }

  /** The head's pending changes first, then the stack change, in one ordered chain. */
  private async changeStack (make: () => StackChange | Promise<StackChange>): Promise<void> {
    await this.exclusive(async () => {
      // Made inside: a step sealed just before changes the head layer the change replaces.
      const change = await make()
      const flushed = this.persister.flushAll(false)
      const committed = this.persister.commit(this.applyChange(change))
      await flushed
      await committed
    })
  }

  /** Restore paths to their state at the start of turn `spec`, as a change in the head turn. */
  async restore (spec: string | number, paths: string[]): Promise<{ turn: number, paths: string[] }> {
    const { turn, src } = await restoreSource(this, spec, paths, this.overlay.view)
    const touched = new Set(paths)
    this.persister.collect(touched, () => { for (const p of paths) this.overlay.restore(p, src) })
    this.onViewChange?.(touched)
    await this.persister.flushAll(true)
    return { turn, paths }
  }

  /** See restore.ts: an offline restore, prepared as a new head layer committed with its plan. */
  async prepareRestore (spec: string | number, paths: string[]): Promise<RestorePrepared> {
    return await prepareRestore(this, spec, paths)
  }

  // ---- reporting ------------------------------------------------------------------------

  /** The turns of the stack (see reports.ts). */
  log (changed?: Array<Set<string>>): TurnInfo[] {
    return turnLog(this.history, this.lower, changed)
  }

  /** Turns whose changes the real directory does not hold yet. */
  pending (): number {
    return this.history.pending()
  }

  status (): SessionStatus {
    return sessionStatus(this)
  }

  async close (): Promise<void> {
    await this.capture.quiesce()
    try {
      await this.persister.flushAll(true)
      this.store.wal.landed(this.store.wal.seq, true) // LevelDB has everything: the log starts over
    } finally {
      this.lower.closeFds()
      await this.store.close()
    }
  }
}
