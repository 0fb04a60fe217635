// A session: one workspace's history opened by one process (the mount daemon, or a CLI
// command while nothing is mounted). It owns the store, the in-memory layers and the live
// overlay, and implements turns, rewind, redo and undo:
//  - `turn` seals the head layer with one synced batch and opens an empty one: O(1) in the
//    size of the tree (it flushes only what is dirty).
//  - `rewind T` is one synced batch that replaces the stack with turns 1..T-1 plus a fresh
//    head, and pushes the old stack onto the redo stack. Dropped layers stay in the store
//    (redo needs them); physical deletion is housekeeping's job.
//  - Head-layer changes are persisted in atomic batches, in order, a few milliseconds after
//    they happen; `fsync` and `turn` wait for theirs with sync=true.
import * as fs from 'node:fs'
import { CpfsError, fsError } from '../errors.js'
import { Origin } from '../overlay/origin.js'
import { Overlay } from '../overlay/overlay.js'
import { View } from '../overlay/view.js'
import { ChunkStore } from '../store/chunks.js'
import { decode, encode } from '../store/codec.js'
import { CHUNK_SIZE, type Entry } from '../store/entries.js'
import { entryKey, turnKey, type BatchOp } from '../store/keys.js'
import { Store, type TurnRecord } from '../store/store.js'

export interface TurnInfo {
  turn: number
  layer: number
  openedAt: number
  sealedAt: number | null
  message: string | null
  id: string | null
  files: number
  bytes: number
  head: boolean
  changes: Array<{ path: string, change: 'added' | 'modified' | 'deleted' }>
  /** Lines added and removed in text files (cpfs log; not computed for hooks). */
  insertions?: number
  deletions?: number
}

export interface SessionStatus {
  workspace: string
  store: string
  head: number
  turns: number
  pending: number
  redo: number
  headChanges: number
  /** Paths the last plan left alone because another process changed them meanwhile. */
  skipped: string[]
}

const PERSIST_DELAY_MS = 20
const PERSIST_BYTES = 16 * 1024 * 1024

export class Session {
  readonly store: Store
  readonly chunks: ChunkStore
  readonly origin: Origin
  readonly overlay: Overlay
  readonly workspace: string
  /** Layers loaded in memory: the stack's and any a redo may return to. */
  readonly layers = new Map<number, Map<string, Entry>>()
  private readonly dirtyPaths = new Set<string>()
  private metaDirty = false
  private timer: NodeJS.Timeout | null = null
  private chain: Promise<void> = Promise.resolve()
  private retryOps: BatchOp[] = []
  private unflushedBytes = 0
  private storeFailure: Error | null = null
  private spaceCheckedAt = 0
  private spaceFree = Infinity
  /** Bytes the store's disk must keep free; writes in the mount fail with ENOSPC below it. */
  reserveBytes = Number(process.env.CPFS_RESERVE_BYTES ?? 64 * 1024 * 1024)

  private constructor (store: Store, workspace: string, dirFd: number, base: Map<string, Entry>) {
    this.store = store
    this.workspace = workspace
    this.chunks = new ChunkStore(store)
    this.origin = new Origin(dirFd, base, this.chunks)
    const view = new View(this.origin)
    this.overlay = new Overlay(view, new Map(), this.origin, this.chunks, {
      onChange: (p) => this.changed(p),
      allocIno: () => { this.metaDirty = true; return this.store.allocIno() },
      checkSpace: (bytes) => this.checkSpace(bytes),
      onWrite: () => this.onWrite()
    })
  }

  static async open (opts: { storePath: string, workspace: string, dirFd: number, create: boolean }): Promise<Session> {
    const store = await Store.open(opts.storePath, { workspace: opts.workspace, create: opts.create })
    try {
      if (store.meta.workspace !== opts.workspace) {
        throw new CpfsError('STORE_MISMATCH', `store ${opts.storePath} belongs to ${store.meta.workspace}, not ${opts.workspace}`, 'pass the --store of this workspace, or omit --store')
      }
      const base = await store.loadBase()
      const s = new Session(store, opts.workspace, opts.dirFd, base)
      for (const id of store.meta.stack) s.layers.set(id, await store.loadLayer(id))
      s.rebuild(true)
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
    return this.meta.stack[this.meta.stack.length - 1]
  }

  get head (): number {
    return this.meta.stack.length
  }

  private rebuild (keepHandles: boolean): void {
    const view = View.build(this.origin, this.meta.stack.map(id => this.layers.get(id)!))
    this.overlay.reset(view, this.layers.get(this.headLayer)!, keepHandles)
  }

  /**
   * Called after the session changed the view on its own (rewind, redo, undo, restore) with
   * every path whose state may differ: the mount invalidates the kernel's caches for them.
   */
  onViewChange: ((touched: Set<string>) => void) | null = null

  /** Paths whose state may differ between two stacks: what their non-shared layers recorded. */
  private stackDiff (a: number[], b: number[]): Set<string> {
    let cp = 0
    while (cp < a.length && cp < b.length && a[cp] === b[cp]) cp++
    const out = new Set<string>()
    for (const id of [...a.slice(cp), ...b.slice(cp)]) for (const p of this.layers.get(id)?.keys() ?? []) out.add(p)
    return out
  }

  // ---- persistence ----------------------------------------------------------------------

  /** While set, every head-layer path that changes is added here too (restore). */
  private collecting: Set<string> | null = null

  private changed (p: string): void {
    this.collecting?.add(p)
    this.dirtyPaths.add(p)
    this.schedule()
  }

  private onWrite (): void {
    if (this.meta.redo.length > 0) {
      this.meta.redo = []
      this.metaDirty = true
    }
  }

  noteWritten (bytes: number): void {
    this.unflushedBytes += bytes
    if (this.unflushedBytes >= PERSIST_BYTES) void this.persist(false)
  }

  private schedule (): void {
    if (this.timer) return
    this.timer = setTimeout(() => {
      this.timer = null
      this.persist(false).catch(() => {})
    }, PERSIST_DELAY_MS)
  }

  /** Collect every pending change into one batch (synchronously) and queue it. */
  persist (sync: boolean): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer)
      this.timer = null
    }
    const ops: BatchOp[] = this.retryOps
    this.retryOps = []
    const layer = this.headLayer
    const head = this.overlay.head
    for (const p of this.dirtyPaths) {
      const node = this.overlay.nodes.get(p)
      if (node) {
        this.overlay.flushNode(node)
        if (node.opens <= 0) this.overlay.nodes.delete(p)
      }
      const e = head.get(p)
      if (e) ops.push({ type: 'put', key: entryKey(layer, p), value: encode(e) })
      else ops.push({ type: 'del', key: entryKey(layer, p) })
    }
    this.dirtyPaths.clear()
    this.chunks.drain(ops)
    if (this.metaDirty) {
      ops.push(this.store.metaOp())
      this.metaDirty = false
    }
    this.unflushedBytes = 0
    const run = async (): Promise<void> => {
      if (ops.length === 0 && !sync) return
      try {
        await this.store.batch(ops, sync)
        this.storeFailure = null
      } catch (err: any) {
        // Keep the changes for the next attempt; new writes get ENOSPC meanwhile.
        this.retryOps = ops.concat(this.retryOps)
        this.storeFailure = err
        throw new CpfsError('STORE_WRITE', `cannot write to the store: ${err?.cause?.message ?? err?.message}`, 'free space on the store disk', { cause: err })
      }
    }
    const p = this.chain.then(run, run)
    this.chain = p.catch(() => {})
    return p
  }

  private soon: Promise<void> | null = null

  /**
   * A promise for the batch that will hold every change made so far: namespace and metadata
   * changes (create, rename, unlink, chmod...) answer only once LevelDB has them, so an
   * operation that returned survives kill -9 of the daemon. Changes made while the current
   * wake-up's requests run share one batch (it is cut after them, in setImmediate).
   */
  durable (): Promise<void> {
    if (!this.soon) {
      this.soon = new Promise<void>((resolve, reject) => {
        setImmediate(() => {
          this.soon = null
          this.persist(false).then(resolve, reject)
        })
      })
    }
    return this.soon
  }

  /**
   * Flush every open file's dirty data into one batch. The batch is collected synchronously
   * (so callers can change the stack right after, before any other op runs) and the promise
   * resolves once the store has it (durably with sync).
   */
  flushAll (sync: boolean): Promise<void> {
    for (const [p, node] of this.overlay.nodes) if (node.dirty.size > 0) this.dirtyPaths.add(p)
    return this.persist(sync)
  }

  private checkSpace (bytes: number): void {
    const now = Date.now()
    if (this.storeFailure || now - this.spaceCheckedAt > 250) {
      this.spaceCheckedAt = now
      try {
        const st = fs.statfsSync(this.store.path)
        this.spaceFree = st.bavail * st.bsize
      } catch {}
    }
    if (this.spaceFree - this.chunks.pendingBytes() - bytes < this.reserveBytes || (this.storeFailure && this.spaceFree < this.reserveBytes * 2)) {
      throw fsError('ENOSPC', this.store.path, 'the cpfs store is full')
    }
    this.spaceFree -= bytes
  }

  // ---- turns ----------------------------------------------------------------------------

  // turn, rewind, undo and redo change the in-memory stack synchronously, right after
  // collecting the pending changes of the old head, so that no FUSE op can land between
  // the two; the store batch follows on the same ordered chain.

  async turn (opts: { message?: string, id?: string } = {}): Promise<number> {
    const flushed = this.flushAll(false)
    const now = Date.now()
    const sealed = this.store.turnRecord(this.headLayer)
    sealed.sealedAt = now
    const layer = this.meta.nextLayer++
    const rec: TurnRecord = { layer, openedAt: now }
    if (opts.message !== undefined) rec.message = opts.message
    if (opts.id !== undefined) rec.id = opts.id
    this.meta.stack.push(layer)
    this.meta.redo = []
    this.layers.set(layer, new Map())
    this.overlay.head = this.layers.get(layer)!
    const committed = this.commit([
      { type: 'put', key: turnKey(sealed.layer), value: encode(sealed) },
      { type: 'put', key: turnKey(layer), value: encode(rec) }
    ])
    await flushed
    await committed
    return this.head
  }

  /** Write ops plus the metadata in one synced batch, after everything queued before. */
  private async commit (ops: BatchOp[]): Promise<void> {
    ops.push(this.store.metaOp())
    this.metaDirty = false
    const run = () => this.store.batch(ops, true)
    const p = this.chain.then(run, run)
    this.chain = p.catch(() => {})
    await p
  }

  /** Turn number for a user-supplied TURN: a number in 1..head or an external id. */
  resolveTurn (spec: string | number): number {
    const s = String(spec).trim()
    if (/^\d+$/.test(s)) {
      const n = Number(s)
      if (n >= 1 && n <= this.head) return n
      throw new CpfsError('UNKNOWN_TURN', `turn ${s} does not exist (turns are 1..${this.head})`, 'see cpfs log')
    }
    for (let i = this.meta.stack.length - 1; i >= 0; i--) {
      if (this.store.turnRecord(this.meta.stack[i]).id === s) return i + 1
    }
    if (s === '') throw new CpfsError('BAD_TURN', 'no turn given', 'pass a turn number or an external id from cpfs log')
    throw new CpfsError('UNKNOWN_TURN', `no turn has the number or id "${s}"`, 'see cpfs log for turn numbers and ids')
  }

  async rewind (spec: string | number): Promise<{ head: number, dropped: number }> {
    const t = this.resolveTurn(spec)
    const flushed = this.flushAll(false)
    const old = this.meta.stack.slice()
    const target = this.store.turnRecord(old[t - 1])
    const layer = this.meta.nextLayer++
    const rec: TurnRecord = { layer, openedAt: Date.now(), rewound: t }
    if (target.message !== undefined) rec.message = target.message
    if (target.id !== undefined) rec.id = target.id
    this.meta.stack = old.slice(0, t - 1).concat(layer)
    this.meta.redo.push(old)
    this.layers.set(layer, new Map())
    this.rebuild(false)
    this.onViewChange?.(this.stackDiff(old, this.meta.stack))
    const committed = this.commit([{ type: 'put', key: turnKey(layer), value: encode(rec) }])
    await flushed
    await committed
    return { head: this.head, dropped: old.length - t + 1 }
  }

  async undo (): Promise<{ head: number, dropped: number }> {
    const empty = this.overlay.head.size === 0 && this.overlay.openNodes().every(n => n.dirty.size === 0)
    const t = empty ? this.head - 1 : this.head
    if (t < 1) throw new CpfsError('NOTHING_TO_UNDO', 'nothing to undo: turn 1 has no changes', 'make a change first, or see cpfs log')
    return await this.rewind(t)
  }

  async redo (): Promise<{ head: number }> {
    for (const id of this.meta.redo.at(-1) ?? []) if (!this.layers.has(id)) this.layers.set(id, await this.store.loadLayer(id))
    const flushed = this.flushAll(false)
    const prev = this.meta.redo.pop()
    if (!prev) throw new CpfsError('NOTHING_TO_REDO', 'nothing to redo', 'redo only follows a rewind or undo, before any new write')
    if (this.overlay.head.size > 0) {
      this.meta.redo.push(prev)
      throw new CpfsError('NOTHING_TO_REDO', 'cannot redo: the workspace changed since the rewind', 'rewind again to the turn you want')
    }
    const old = this.meta.stack
    this.meta.stack = prev
    this.rebuild(false)
    this.onViewChange?.(this.stackDiff(old, prev))
    const committed = this.commit([])
    await flushed
    await committed
    return { head: this.head }
  }

  /** Restore paths to their state at the start of turn `spec`, as a change in the head turn. */
  /** The view at the start of turn `spec`, after checking that every path exists now or then. */
  private async restoreSource (spec: string | number, paths: string[], now: View): Promise<{ turn: number, src: View }> {
    const t = this.resolveTurn(spec)
    const stack = this.meta.stack.slice(0, t - 1)
    for (const id of stack) if (!this.layers.has(id)) this.layers.set(id, await this.store.loadLayer(id))
    const src = View.build(this.origin, stack.map(id => this.layers.get(id)!))
    for (const p of paths) {
      if (!now.resolve(p) && !src.resolve(p)) {
        throw new CpfsError('NO_SUCH_PATH', `${p.slice(1)} exists neither now nor at the start of turn ${t}`, 'check the path (relative to the workspace) with cpfs diff')
      }
    }
    return { turn: t, src }
  }

  /** Restore paths to their state at the start of turn `spec`, as a change in the head turn. */
  async restore (spec: string | number, paths: string[]): Promise<{ turn: number, paths: string[] }> {
    const { turn, src } = await this.restoreSource(spec, paths, this.overlay.view)
    const touched = new Set(paths)
    this.collecting = touched
    try {
      for (const p of paths) this.overlay.restore(p, src)
    } finally {
      this.collecting = null
    }
    this.onViewChange?.(touched)
    await this.flushAll(true)
    return { turn, paths }
  }

  /**
   * Restore on a copy of the head layer (for a restore that must first pass a plan): returns
   * the view it would produce, the paths it touches, and `commit` to make it the head.
   */
  async prepareRestore (spec: string | number, paths: string[]): Promise<{ turn: number, view: View, touched: Set<string>, commit: () => Promise<void> }> {
    const stack = this.meta.stack
    const head = this.overlay.head
    const copy = new Map(head)
    const view = View.build(this.origin, [...stack.slice(0, -1).map(id => this.layers.get(id)!), copy])
    const { turn: t, src } = await this.restoreSource(spec, paths, view)
    const scratch = new Overlay(view, copy, this.origin, this.chunks, {
      onChange: () => {},
      allocIno: () => { this.metaDirty = true; return this.store.allocIno() },
      checkSpace: () => {},
      onWrite: () => {}
    })
    for (const p of paths) scratch.restore(p, src)
    const touched = new Set<string>(paths)
    for (const k of new Set([...head.keys(), ...copy.keys()])) if (head.get(k) !== copy.get(k)) touched.add(k)
    const commit = async (): Promise<void> => {
      for (const k of touched) this.dirtyPaths.add(k)
      head.clear()
      for (const [k, v] of copy) head.set(k, v)
      this.rebuild(true)
      await this.persist(true)
    }
    return { turn: t, view, touched, commit }
  }

  async labelTurn (turn: number, message: string): Promise<void> {
    const rec = this.store.turnRecord(this.meta.stack[turn - 1])
    rec.message = message
    await this.store.batch([{ type: 'put', key: turnKey(rec.layer), value: encode(rec) }], true)
  }

  // ---- reporting ------------------------------------------------------------------------

  log (): TurnInfo[] {
    const out: TurnInfo[] = []
    this.meta.stack.forEach((layer, i) => {
      const rec = this.store.turnRecord(layer)
      const entries: Map<string, Entry> = this.layers.get(layer) ?? new Map()
      let files = 0
      let bytes = 0
      const changes: TurnInfo['changes'] = []
      for (const [p, e] of entries) {
        if (e.t === 'd' && e.n !== 1 && !e.redirect) continue
        files++
        changes.push({ path: p, change: e.t === 'w' ? 'deleted' : e.n === 1 ? 'added' : 'modified' })
        if (e.t === 'f') {
          e.chunks.forEach((c: unknown, idx: number) => {
            if (Buffer.isBuffer(c)) bytes += Math.min(CHUNK_SIZE, e.size - idx * CHUNK_SIZE)
          })
        }
      }
      changes.sort((a, b) => a.path < b.path ? -1 : 1)
      out.push({
        turn: i + 1,
        layer,
        openedAt: rec.openedAt,
        sealedAt: rec.sealedAt ?? null,
        message: rec.message ?? null,
        id: rec.id ?? null,
        files,
        bytes,
        head: i === this.meta.stack.length - 1,
        changes
      })
    })
    return out
  }

  /** Turns whose changes the real directory does not hold yet. */
  pending (): number {
    const { stack, applied } = this.meta
    let cp = 0
    while (cp < stack.length && cp < applied.length && stack[cp] === applied[cp]) cp++
    const nonEmpty = (id: number) => (this.layers.get(id)?.size ?? 1) > 0
    return stack.slice(cp).filter(nonEmpty).length + applied.slice(cp).filter(nonEmpty).length
  }

  status (): SessionStatus {
    return {
      workspace: this.workspace,
      store: this.store.path,
      head: this.head,
      turns: this.meta.stack.length,
      pending: this.pending(),
      redo: this.meta.redo.length,
      headChanges: this.overlay.head.size,
      skipped: (() => { const raw = this.store.getSync('k'); return raw ? decode<string[]>(raw) : [] })()
    }
  }

  async close (): Promise<void> {
    try {
      await this.flushAll(true)
    } finally {
      this.origin.closeFds()
      await this.store.close()
    }
  }
}
