// The persister: head-layer changes reach the store in atomic batches, in order, a few
// milliseconds after they happen; fsync and turns wait for theirs with sync=true. It collects
// what changed into batches; BatchChain (batch-chain.ts) delivers them, through the
// write-ahead log or straight to LevelDB.
import type { Overlay } from '../overlay/overlay.js'
import type { ChunkStore } from '../store/chunks.js'
import { encodeEntry } from '../store/codec.js'
import { entryKey, type BatchOp } from '../store/keys.js'
import type { Store } from '../store/store.js'
import { BatchChain, lastOpPerKey } from './batch-chain.js'
import type { Attribution } from './attribution.js'
import type { HeadChunks } from './head-chunks.js'
import type { Space } from './space.js'
import { DEFAULT_BUDGETS, type MemoryBudgets } from '../store/memory.js'

/** What the persister reads of the overlay: the head layer, and its entries with open files' data hashed in. */
export type HeadSource = Pick<Overlay, 'head' | 'settled' | 'unsettled' | 'hashIn'>

const PERSIST_DELAY_MS = 20
/**
 * Batches bigger than this go to LevelDB directly, not through the log. File data is in pack
 * files before its batch is made (store/packs.ts): a batch holds references, ~100 bytes a chunk.
 */
const WAL_RECORD_BYTES = 1024 * 1024
/** The log's file is emptied once LevelDB has all of it; past this size, it is made to. */
const WAL_MAX_BYTES = 16 * 1024 * 1024
/** CPFS_WAL=0: every durable answer waits for LevelDB, as before the log (for measuring). */
const WAL_ON = process.env.CPFS_WAL !== '0'

/** What the persister writes besides the head's entries, from the parts that own it. */
export interface PersistSources {
  /** The head layer's id: where entries go. */
  headLayer: () => number
  /** Store ops for the fingerprints changed since the last call (RealCapture.fingerprintOps). */
  fingerprintOps: () => BatchOp[]
  /** Who changed what: the records that go with a key's entry, and those of processes met (Attribution). */
  attribution: Pick<Attribution, 'byOf' | 'processOps'>
}

export class Persister {
  private dirtyPaths = new Set<string>()
  /** Dirty paths whose only changes since the last batch are written data (changedData). */
  private readonly dataOnly = new Set<string>()
  private metaDirty = false
  /** While set, every head-layer path that changes is added here too (restore). */
  private collecting: Set<string> | null = null
  private timer: NodeJS.Timeout | null = null
  private unflushedBytes = 0

  /** Written bytes not yet in a batch (bounded by the dirty budget). */
  get unflushed (): number {
    return this.unflushedBytes
  }
  private readonly chain: BatchChain
  private soon: Promise<void> | null = null

  constructor (
    private readonly store: Store,
    private readonly chunks: ChunkStore,
    private readonly overlay: HeadSource,
    private readonly headChunks: HeadChunks,
    space: Space,
    private readonly sources: PersistSources,
    /**
     * dirty: written bytes that make a batch at once instead of after PERSIST_DELAY_MS (each
     * write's chunks wait in its node until a batch hashes them in, so this bounds them);
     * inflight: chunk bytes in flight to LevelDB above which writes wait (see backpressure()).
     * Both from store/memory.ts.
     */
    readonly budgets: Pick<MemoryBudgets, 'dirty' | 'inflight'> = DEFAULT_BUDGETS
  ) {
    this.chain = new BatchChain(store, chunks, headChunks, space)
  }

  /** Batch bytes handed to LevelDB and not written yet. */
  get inflight (): number {
    return this.chain.inflight
  }

  /** Head path p changed (its entry, or an open file's node): it goes with the next batch. */
  changed (p: string): void {
    this.dataOnly.delete(p)
    this.collecting?.add(p)
    this.dirtyPaths.add(p)
    this.schedule()
  }

  /**
   * A write into a file: like `changed`, but if nothing else about p changed since the last
   * batch, a batch made for durability (durable()) may leave p for the next one, so that a
   * namespace change does not re-encode a big file being written (its data is promised at
   * close or fsync, which take everything).
   */
  changedData (p: string): void {
    const meta = this.dirtyPaths.has(p) && !this.dataOnly.has(p)
    this.changed(p)
    if (!meta) this.dataOnly.add(p)
  }

  /** The history's metadata (stack, redo, inode counter) changed: it goes with the next batch. */
  metaChanged (): void {
    this.metaDirty = true
  }

  /** The metadata goes with a batch the caller is making (commit, commitLive). */
  private takeMeta (): void {
    this.metaDirty = false
  }

  /** Run fn with every head path it changes collected into `into` (restore). */
  collect<T> (into: Set<string>, fn: () => T): T {
    this.collecting = into
    try {
      return fn()
    } finally {
      this.collecting = null
    }
  }

  /** Store ops that go with the next batch, before the head's changes (a base entry kept). */
  queue (op: BatchOp): void {
    this.chain.retryOps.push(op)
  }

  noteWritten (bytes: number): void {
    this.unflushedBytes += bytes
    if (this.unflushedBytes >= this.budgets.dirty) this.persistData()?.catch(() => {})
  }

  /**
   * The dirty budget is reached: every file's written chunks go to the chunk store, but a file
   * whose only change is written data keeps its entry out of the batch until its close or
   * fsync (stored at every budget, a 256 MiB file's entry, every chunk's hash, was stored 32
   * times over); until then its chunks count as its references (HeadChunks.stage). A file
   * rewritten in place goes in the batch as before, so what each pass replaced is freed.
   */
  private persistData (): Promise<void> | null {
    for (const p of this.dataOnly) {
      const stored: Buffer[] = []
      if (this.overlay.hashIn(p, stored)) this.dataOnly.delete(p)
      else this.headChunks.stage(p, stored)
    }
    const batch = this.persist(false, true)
    this.unflushedBytes = 0
    return batch
  }

  /**
   * A batch soon (PERSIST_DELAY_MS), for changes that came without one. Files whose only
   * change is written data stay out of it while their bytes are within the dirty budget: their
   * data is promised at close or fsync, which take everything, and a file being written would
   * otherwise have its whole entry (every chunk's hash) encoded and stored every 20 ms — a
   * 256 MiB `dd` spent a third of the daemon's time re-encoding its own growing entry.
   */
  schedule (): void {
    if (this.timer) return
    this.timer = setTimeout(() => {
      this.timer = null
      this.persist(false, this.unflushedBytes < this.budgets.dirty)?.catch(() => {})
    }, PERSIST_DELAY_MS)
  }

  /**
   * Collect every pending change into one batch, synchronously, and hand it on. Returns null
   * when the batch is durable already (against kill -9 of the daemon): it went to the
   * write-ahead log (store/wal.ts) and reaches LevelDB a few milliseconds later with others.
   * Otherwise it returns a promise for its LevelDB batch: `sync` (fsync, sealed turns), file
   * data over WAL_RECORD_BYTES, a retry after a failed batch, or while such a batch is still
   * on its way (a logged batch must never reach LevelDB, on replay, without one before it).
   */
  persist (sync: boolean, metaOnly = false): Promise<void> | null {
    if (this.timer && !metaOnly) {
      clearTimeout(this.timer)
      this.timer = null
    }
    const ops: BatchOp[] = this.chain.retryOps
    // After a failed batch (a full disk) its ops come first; the user's rm of the culprit
    // deletes what they put, and only then can the batch fit again.
    const retrying = ops.length > 0
    this.chain.retryOps = []
    const paths = this.takeDirty(metaOnly)
    this.entryOps(paths, ops)
    this.headChunks.release(paths, this.overlay.head, ops)
    // Never push(...list): a list of 100,000s of ops overflows the call stack.
    for (const op of this.sources.fingerprintOps()) ops.push(op)
    let drained
    try {
      drained = this.chunks.drain(ops)
    } catch (err: any) {
      // A pack write failed (a full disk): this batch waits, whole, for the next attempt.
      this.chain.retryOps = ops
      return this.chain.failed(err)
    }
    const bytes = drained.bytes
    // Chunks of a batch that failed are retried with it, and readable until one lands.
    const hexes = this.chain.retryHexes.concat(drained.hexes)
    this.chain.retryHexes = []
    if (this.metaDirty) {
      ops.push(this.store.metaOp())
      this.metaDirty = false
    }
    if (retrying) lastOpPerKey(ops)
    // A batch for durability only (metaOnly) leaves files being written for the next one: their
    // written bytes still count against the dirty budget.
    if (!metaOnly || this.dataOnly.size === 0) this.unflushedBytes = 0
    // A log that keeps growing (LevelDB never caught up with it while busy) is drained by one
    // batch that is not logged: nothing is logged while it is on its way, so it empties the log.
    if (!sync && !retrying && this.chain.unlogged === 0 && bytes <= WAL_RECORD_BYTES && this.store.wal.size < WAL_MAX_BYTES && WAL_ON) {
      return this.chain.log(ops, hexes, bytes)
    }
    return this.chain.submit(ops, hexes, bytes, sync)
  }

  /** The dirty paths a batch takes: all of them, or (metaOnly) those with more than written data. */
  private takeDirty (metaOnly: boolean): Iterable<string> {
    let paths: Iterable<string> = this.dirtyPaths
    if (metaOnly && this.dataOnly.size) {
      paths = [...this.dirtyPaths].filter(p => !this.dataOnly.has(p))
      this.dirtyPaths = new Set(this.dataOnly)
    } else {
      this.dirtyPaths = new Set()
      this.dataOnly.clear()
    }
    return paths
  }

  /** The head entries of `paths` as store ops; open files' data is flushed into their entries first. */
  private entryOps (paths: Iterable<string>, ops: BatchOp[]): void {
    const layer = this.sources.headLayer()
    const { attribution } = this.sources
    for (const p of paths) {
      const e = this.overlay.settled(p)
      if (e) ops.push({ type: 'put', key: entryKey(layer, p), value: encodeEntry(e, attribution.byOf(p)) })
      else ops.push({ type: 'del', key: entryKey(layer, p) })
    }
    attribution.processOps(ops)
  }

  /** Write ops plus the metadata in one synced batch, after everything queued before. */
  async commit (ops: BatchOp[]): Promise<void> {
    ops.push(this.store.metaOp())
    this.takeMeta()
    await this.chain.submit(ops, [], 0, true)
  }

  /** One synced batch of `ops` and every queued chunk (plans, absorb, freeze; nothing mounted). */
  async syncBatch (ops: BatchOp[]): Promise<void> {
    const { hexes } = this.chunks.drain(ops)
    try {
      if (ops.length) await this.store.batch(ops, true)
    } finally {
      this.chunks.landed(hexes)
    }
  }

  /**
   * syncBatch while mounted: after every batch the mount queued before it (a metadata record
   * of theirs landing later would undo this one's), with every queued chunk.
   */
  async commitLive (ops: BatchOp[]): Promise<void> {
    await this.persist(false)
    const { hexes } = this.chunks.drain(ops)
    this.takeMeta()
    await this.chain.submit(ops, hexes, 0, true)
  }

  /** Store ops with the next batch, now: durable against kill -9 of the daemon when this returns. */
  async storeNow (ops: BatchOp[]): Promise<void> {
    for (const op of ops) this.chain.retryOps.push(op)
    await this.persist(false)
  }

  /**
   * Write the queued chunks now, in a batch of their own: a chunk in the store that nothing
   * references yet is harmless (a crash leaves it for garbage collection), and the batch that
   * references it comes later in the same log.
   */
  async spill (): Promise<void> {
    const ops: BatchOp[] = []
    const { hexes } = this.chunks.drain(ops)
    try {
      if (ops.length) await this.store.batch(ops, false)
    } finally {
      this.chunks.landed(hexes)
    }
  }

  /**
   * Writers faster than the store: once more than the inflight budget waits for LevelDB, a
   * WRITE is answered only when the queue has drained (the daemon's memory stays bounded).
   */
  backpressure (): Promise<void> | null {
    return this.inflight > this.budgets.inflight ? this.chain.settled : null
  }

  /**
   * Every change made so far made durable against kill -9 of the daemon: namespace and
   * metadata changes (create, rename, unlink, chmod...) are answered only then. null: it is
   * already (logged, see persist). Otherwise a promise; changes made while the current
   * wake-up's requests run then share one batch (it is cut after them, in setImmediate).
   */
  durable (): Promise<void> | null {
    // Logged at once (the usual case): durable now, answered now.
    if (this.chain.unlogged === 0 && this.chain.retryOps.length === 0 && !this.soon) return this.persist(false, true)
    if (!this.soon) {
      this.soon = new Promise<void>((resolve, reject) => {
        setImmediate(() => {
          this.soon = null
          const p = this.persist(false)
          if (p) p.then(resolve, reject)
          else resolve()
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
  flushAll (sync: boolean): Promise<void> | null {
    for (const p of this.overlay.unsettled()) this.dirtyPaths.add(p)
    return this.persist(sync)
  }

  /**
   * close(2) of one file: its data and every other change but other files' written data (a
   * batch like durable()'s, with this file in it). Flushing every open file at every close
   * hashed and stored the half-written files of concurrent writers (npm's four extract
   * threads: 1.5 files per close), which their own close then did again.
   */
  flushFile (key: string): Promise<void> | null {
    this.dataOnly.delete(key)
    this.dirtyPaths.add(key)
    return this.persist(false, true)
  }
}
