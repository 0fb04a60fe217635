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
import { Origin, type OriginStat } from '../overlay/origin.js'
import { Overlay } from '../overlay/overlay.js'
import { View } from '../overlay/view.js'
import { ChunkStore } from '../store/chunks.js'
import { decode, encode, encodeEntry } from '../store/codec.js'
import { chunkLen, inoOfKey, isInoKey, type Entry, type LiveEntry, type Whiteout } from '../store/entries.js'
import { entryKey, turnKey, type BatchOp } from '../store/keys.js'
import { walSeqOp } from '../store/wal.js'
import { Store, type TurnRecord } from '../store/store.js'
import { reserveBytes } from '../config.js'
import { fingerprintDrift, fingerprintOf, type Fingerprint, type RealStat } from '../store/fingerprints.js'
import { lstatReal, realContentSteps, realEntry } from '../overlay/real.js'
import { parentOf } from '../overlay/paths.js'
import { checkId, displayLine, neutralise } from './labels.js'
import type { UnderneathWrite } from '../store/underneath.js'

/**
 * Labels of a turn record. `prompt`: what the turn was opened for (the hook's prompt, exec's
 * command, cpfs's own notes). `summary`: what the turn did, given when it was sealed (cpfs turn
 * -m). Histories written before cpfs kept one `message`, given when the turn was opened (and
 * cpfs's own notes still use it): it is read as the prompt.
 */
interface Labels {
  prompt?: string
  summary?: string
}
type LabelledRecord = TurnRecord & Labels

/** What `cpfs turn` is told: a message for the turn it seals, a prompt and an id for the one it opens. */
export interface TurnOptions {
  message?: string
  prompt?: string
  id?: string
}

export interface TurnInfo {
  turn: number
  layer: number
  openedAt: number
  sealedAt: number | null
  /** What the turn was opened for (a prompt, a command). */
  prompt: string | null
  /** What the turn did, given when it was sealed (cpfs turn -m). */
  message: string | null
  id: string | null
  files: number
  bytes: number
  head: boolean
  /** The paths it changed: as `cpfs diff T` lists them when the log has lines, else as its layer recorded them. */
  changes: Array<{ path: string, change: 'added' | 'modified' | 'deleted' | 'mode' | 'type' | 'symlink' | 'moved' | 'owner' }>
  /** Lines added and removed in text files (cpfs log; not computed for hooks). */
  insertions?: number
  deletions?: number
  /** Changes made underneath the mount that this turn holds: how many, and who made the first (store/underneath.ts). */
  underneath?: { count: number, first: UnderneathWrite[] }
}

/** An offline restore, prepared (Session.prepareRestore): the target view, and the history change made when it is committed. */
export interface RestorePrepared {
  turn: number
  view: View
  touched: Set<string>
  commit: () => { change: StackChange, preOps: BatchOp[] }
}

/** A new stack, with what it replaces and the turn records it writes (see Session.rewindChange). */
export interface StackChange {
  stack: number[]
  redo: number[][]
  records: TurnRecord[]
  /** Layers this change creates (empty ones, or a restored head prepared in memory). */
  newLayers: number[]
  /** Set when the old stack is set aside by `unmount --discard`. */
  discarded?: DiscardedBranch
}

export interface DiscardedBranch {
  stack: number[]
  at: number
  /** Turns it held that the real directory did not. */
  pending: number
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
  /** Mounted: when a write was last refused because the store's disk is below the reserve (ms). */
  spaceRefusedAt?: number
  /** Mounted: big real files whose original bytes are being read into the store (background capture). */
  capturing?: number
}

const PERSIST_DELAY_MS = 20
/** Batches with more file data than this go to LevelDB directly, not through the log. */
const WAL_RECORD_BYTES = 1024 * 1024
/** Logged batches go on to LevelDB this many ms after the first, or at this many bytes. */
const WAL_SUBMIT_MS = Number(process.env.CPFS_WAL_SUBMIT_MS ?? 5)
const WAL_SUBMIT_BYTES = 8 * 1024 * 1024
/** The log's file is emptied once LevelDB has all of it; past this size, it is made to. */
const WAL_MAX_BYTES = 16 * 1024 * 1024
/** CPFS_WAL=0: every durable answer waits for LevelDB, as before the log (for measuring). */
const WAL_ON = process.env.CPFS_WAL !== '0'
/** Chunk bytes in flight to LevelDB above which writes wait (see backpressure()). */
const MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
/** Once this much was freed from the store, LevelDB compacts the chunks so the disk gets it back. */
const COMPACT_AFTER_BYTES = 32 * 1024 * 1024
/** How long a request refused for space waits for freed space to come back (spaceComing). */
const SPACE_WAIT_MS = 10_000
/** Real files up to this size have their original bytes kept at the first write (onCopyUp). */
const EAGER_CAPTURE_BYTES = Number(process.env.CPFS_EAGER_CAPTURE_BYTES ?? 1024 * 1024)
/** Chunks a capture of real files holds in memory before it writes them to the store. */
const SPILL_BYTES = 32 * 1024 * 1024
const PERSIST_BYTES = 16 * 1024 * 1024

export class Session {
  readonly store: Store
  readonly chunks: ChunkStore
  readonly origin: Origin
  readonly overlay: Overlay
  readonly workspace: string
  /** When this process opened the history (ms): the start of a mount. */
  readonly openedAt = Date.now()
  /** Layers loaded in memory: the stack's and any a redo may return to. */
  readonly layers = new Map<number, Map<string, Entry>>()
  private dirtyPaths = new Set<string>()
  private metaDirty = false
  private timer: NodeJS.Timeout | null = null
  private chain: Promise<void> = Promise.resolve()
  private retryOps: BatchOp[] = []
  private unflushedBytes = 0
  private storeFailure: Error | null = null
  private spaceCheckedAt = 0
  private spaceFree = Infinity
  /** Bytes the store's disk must keep free; writes in the mount fail with ENOSPC below it. */
  reserveBytes = reserveBytes()

  private constructor (store: Store, workspace: string, dirFd: number, base: Map<string, Entry>) {
    this.store = store
    this.workspace = workspace
    this.chunks = new ChunkStore(store)
    this.origin = new Origin(dirFd, base, this.chunks)
    const view = new View(this.origin)
    this.overlay = new Overlay(view, new Map(), this.origin, this.chunks, {
      onChange: (p) => this.changed(p),
      onData: (p) => this.changedData(p),
      allocIno: () => { this.metaDirty = true; return this.store.allocIno() },
      checkSpace: (bytes) => this.checkSpace(bytes),
      onWrite: () => this.onWrite(),
      onCopyUp: (p, size) => this.onCopyUp(p, size),
      // A chunk kept for an open file may be freed now (releaseHeadChunks).
      onLastClose: () => { if (this.unreferenced.size) this.schedule() }
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
      s.fingerprints = await store.loadFingerprints()
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

  // ---- space: chunks only the head turn ever held ------------------------------------------
  // A file written and deleted (or overwritten, or truncated) within one unsealed turn must not
  // keep its bytes in the store: after ENOSPC the user removes the culprit and goes on. Each
  // head path's persisted entry holds references to chunks first stored for the head
  // (ChunkStore.headOnly); when the last reference goes, the chunk is deleted in the same batch
  // and, once enough is freed, LevelDB compacts the range so the disk space really comes back.

  private readonly headRefs = new Map<string, string[]>()
  private readonly refCount = new Map<string, number>()
  private freedSinceCompaction = 0
  private compacting = false
  /** When writes were last refused for lack of space (ms), or 0. */
  spaceRefusedAt = 0

  private releaseHeadChunks (paths: Iterable<string>, ops: BatchOp[]): void {
    const headOnly = this.chunks.headOnly
    if (headOnly.size === 0 && this.headRefs.size === 0) return this.freeUnreferenced(ops)
    const dropped: string[] = []
    for (const p of paths) {
      const e = this.overlay.head.get(p)
      const after = e?.t === 'f' ? [...new Set([...e.chunks.values()].filter((h): h is Buffer => h !== null).map(h => h.toString('hex')).filter(h => headOnly.has(h)))] : []
      const before = this.headRefs.get(p) ?? []
      for (const h of after) this.refCount.set(h, (this.refCount.get(h) ?? 0) + 1)
      for (const h of before) dropped.push(h)
      if (after.length) this.headRefs.set(p, after)
      else this.headRefs.delete(p)
    }
    for (const h of dropped) {
      const n = (this.refCount.get(h) ?? 1) - 1
      if (n > 0) { this.refCount.set(h, n); continue }
      this.refCount.delete(h)
      this.unreferenced.add(h)
    }
    this.freeUnreferenced(ops)
  }

  /**
   * Head-only chunks no head path references any more. They are freed unless a file that is
   * still open reads them (unlinked, or replaced by a rename, while a process holds it: an
   * editor's atomic save under a reader, a deleted temporary file); then at a later batch,
   * once it is closed.
   */
  private readonly unreferenced = new Set<string>()

  private freeUnreferenced (ops: BatchOp[]): void {
    if (this.unreferenced.size === 0) return
    const open = this.overlay.openChunks()
    for (const h of this.unreferenced) {
      if (this.refCount.has(h) || !this.chunks.headOnly.has(h)) {
        this.unreferenced.delete(h) // referenced again, or pinned by history
        continue
      }
      if (open.has(h)) continue
      this.unreferenced.delete(h)
      this.freedSinceCompaction += this.chunks.free(h, ops)
    }
    if (this.freedSinceCompaction >= COMPACT_AFTER_BYTES && !this.compacting) {
      this.freedSinceCompaction = 0
      this.compactNext = true
      if (!this.compaction) {
        let resolve!: () => void
        const promise = new Promise<void>(res => { resolve = res })
        this.compaction = { promise, resolve }
      }
    }
  }

  private compactNext = false
  /** The error checkSpace threw last: what spaceComing may make a request wait out. */
  private spaceRefusal: Error | null = null
  /** Settles once the freed chunks' space is back on the disk (the compaction after their batch). */
  private compaction: { promise: Promise<void>, resolve: () => void } | null = null

  /** After the batch that deleted freed chunks: compact them away (in the background). */
  private compactAfter (batch: Promise<void>): void {
    if (!this.compactNext) return
    this.compactNext = false
    this.compacting = true
    const done = this.compaction
    batch.catch(() => {}).then(() => this.store.db.compactRange('c', 'c\uffff')).catch(() => {}).finally(() => {
      this.compacting = false
      this.spaceCheckedAt = 0 // look at the disk again on the next write
      if (this.compaction === done) this.compaction = null
      done?.resolve()
    })
  }

  /**
   * While freed chunks are on their way off the disk (rm of the file that filled it, then a
   * new write at once): what a request refused with ENOSPC waits for before it is tried again,
   * instead of failing a moment before the space is back.
   */
  spaceComing (refusal: unknown): Promise<void> | null {
    const c = this.compaction
    if (!c || refusal !== this.spaceRefusal) return null // not the space check (an xattr list that is full)
    // Bounded: a request never waits on LevelDB for more than SPACE_WAIT_MS; then it is tried
    // once more and gets its ENOSPC if the space is still not there.
    return new Promise<void>(resolve => {
      const timer = setTimeout(resolve, SPACE_WAIT_MS)
      void c.promise.then(() => { clearTimeout(timer); resolve() })
    })
  }

  /** The head turn's chunks now belong to history (sealed, rewound away, set aside). */
  private pinHeadChunks (): void {
    this.chunks.pinAll()
    this.headRefs.clear()
    this.refCount.clear()
    this.unreferenced.clear()
  }

  /** Rebuild the live view after the stack changed underneath (absorb); open handles stay. */
  reload (): void {
    this.rebuild(true)
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
    this.dataOnly.delete(p)
    this.collecting?.add(p)
    this.dirtyPaths.add(p)
    if (isInoKey(p)) {
      // An inode record: the real path it came from is what the history depends on.
      const rec = this.overlay.head.get(p)
      const o = rec && rec.t !== 'w' && rec.t !== 'h' ? rec.o : undefined
      if (o !== undefined && !this.fingerprints.has(o)) this.noteReal(o)
    } else if (!this.fingerprints.has(p)) {
      this.noteReal(p)
    }
    this.schedule()
  }

  /**
   * A write into a file: like `changed`, but if nothing else about p changed since the last
   * batch, a batch made for durability (Session.durable) may leave p for the next one, so that
   * a namespace change does not re-encode a big file being written (its data is promised at
   * close or fsync, which take everything).
   */
  private changedData (p: string): void {
    const meta = this.dirtyPaths.has(p) && !this.dataOnly.has(p)
    this.changed(p)
    if (!meta) this.dataOnly.add(p)
  }

  /** Dirty paths whose only changes since the last batch are written data (changedData). */
  private readonly dataOnly = new Set<string>()

  /**
   * Fingerprints of the real paths the history depends on (store/fingerprints.ts): recorded
   * the first time the mount changes a path, so that a plan can tell what changed outside.
   */
  fingerprints = new Map<string, Fingerprint>()
  private readonly fpDirty = new Set<string>()

  private noteReal (p: string): void {
    if (p.includes('\0')) return // exchange's temporary name: never a real path
    // Below a directory that did not exist, nothing does: no system call needed.
    const parent = this.fingerprints.get(parentOf(p))
    if (parent && parent.t === null) return this.setFingerprint(p, { ...parent, at: Date.now() })
    // What the mount showed of p, if it showed anything: a process outside the mount that
    // changed the real file since (a shell whose cwd was inside before the mount) made a
    // change cpfs never saw, and the plan that would overwrite it must find it.
    const served = this.origin.servedStat(p)
    this.setFingerprint(p, served !== undefined ? fingerprintOf(servedAsReal(served)) : fingerprintOf(lstatReal(this.origin, p)))
  }

  /** Record (or with null, forget) what cpfs knows of real path p; stored with the next batch. */
  setFingerprint (p: string, f: Fingerprint | null): void {
    if (f) this.fingerprints.set(p, f)
    else this.fingerprints.delete(p)
    this.fpDirty.add(p)
  }

  /**
   * Keep the real directory's current version of p as its base entry (once): from then on
   * the origin of p is that version, whatever happens to the real file. Returns the store op,
   * or null when p already has one.
   */
  captureBase (p: string): BatchOp | null {
    if (!this.origin.servedByReal(p)) return null
    const e = realEntry(this.origin, this.chunks, p)
    this.origin.setBase(p, e)
    if (!this.fingerprints.has(p)) this.setFingerprint(p, fingerprintOf(lstatReal(this.origin, p)))
    return this.store.baseOp(p, e)
  }

  /**
   * captureBase for plans, absorb and freeze, which may read files of any size: the chunks go
   * to the store as they are read (spill), so memory holds at most SPILL_BYTES of them.
   */
  async captureBaseAsync (p: string): Promise<BatchOp | null> {
    if (!this.origin.servedByReal(p)) return null
    const e = await this.realEntryAsync(p)
    this.origin.setBase(p, e)
    if (!this.fingerprints.has(p)) this.setFingerprint(p, fingerprintOf(lstatReal(this.origin, p)))
    return this.store.baseOp(p, e)
  }

  /** realEntry of real path p, its chunks written to the store as they are read. */
  async realEntryAsync (p: string): Promise<LiveEntry | Whiteout> {
    const st = lstatReal(this.origin, p)
    if (st.type !== 'f' || st.blockedBy) return realEntry(this.origin, this.chunks, p, undefined, st)
    const steps = realContentSteps(this.origin, p, this.chunks)
    let r = steps.next()
    for (; !r.done; r = steps.next()) if (this.chunks.pendingBytes() >= SPILL_BYTES) await this.spill()
    return realEntry(this.origin, this.chunks, p, r.value, st)
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
   * The first write to an untouched real file: keep its original bytes now if it is small (a
   * shell outside the mount could overwrite it before the session ends, and the history's
   * "before" would be lost). Big files keep pointing at the real file (copy-up stays O(1))
   * and are captured in the background (freezeLater); the session's end captures anything
   * still missing (plans/freeze.ts).
   */
  private onCopyUp (originPath: string, size: number): void {
    // The real file must still be what the mount showed: bytes the processes in the mount did
    // not see (another process wrote the real file, from outside) are never merged into their
    // edit. The write fails; the real file is left as it is, and the session's end refuses to
    // overwrite it (its fingerprint is what the mount showed).
    const served = this.origin.servedStat(originPath)
    if (served) {
      const now = lstatReal(this.origin, originPath)
      if (fingerprintDrift(fingerprintOf(servedAsReal(served)), now)) {
        process.stderr.write(`cpfs daemon: ${new Date().toISOString()} ${originPath.slice(1)} changed outside the mount after the mount showed it: writes to it fail with EIO (unmount, then mount again to see the new version)\n`)
        throw fsError('EIO', originPath, 'the real file changed outside the mount')
      }
    }
    if (size > EAGER_CAPTURE_BYTES) return this.freezeLater(originPath)
    const op = this.captureBase(originPath)
    if (op) this.retryOps.push(op)
  }

  // ---- background capture of big originals ----------------------------------------------
  // A turn that changed part of a big real file keeps pointing at the real file for the rest
  // (copy-up is O(1)). If the daemon is killed and someone edits the real file before the
  // next mount, that turn would show bytes it never had. So the original is read into the
  // store soon after the first write, a chunk at a time between requests; once it is a base
  // entry, the history no longer depends on the real file. It costs what the session's end
  // would have cost anyway (plans/freeze.ts captures what is still missing then).

  private readonly toFreeze = new Set<string>()
  private freezing: Promise<void> | null = null
  /** Set when the session stops serving the mount: the capture in progress gives up. */
  private quiet = false

  private freezeLater (p: string): void {
    if (this.quiet || !this.origin.servedByReal(p)) return
    this.toFreeze.add(p)
    this.freezing ??= this.freezeAll().finally(() => { this.freezing = null })
  }

  private async freezeAll (): Promise<void> {
    while (!this.quiet && this.toFreeze.size) {
      const p = this.toFreeze.values().next().value as string
      this.toFreeze.delete(p)
      try {
        await this.freezeOne(p)
      } catch (err: any) {
        process.stderr.write(`cpfs daemon: ${new Date().toISOString()} cannot keep the original of ${p.slice(1)} yet (${err?.message ?? err}); the session's end will\n`)
      }
    }
  }

  private async freezeOne (p: string): Promise<void> {
    const served = this.origin.servedStat(p)
    const before = lstatReal(this.origin, p)
    // Only the file the mount showed is the original; one changed from outside is drift.
    if (!this.origin.servedByReal(p) || before.type !== 'f' || (served && fingerprintDrift(fingerprintOf(servedAsReal(served)), before))) return
    if (!this.roomToSpare(before.size)) return
    const steps = realContentSteps(this.origin, p, this.chunks)
    let r = steps.next()
    for (let n = 1; !r.done; n++, r = steps.next()) {
      if (n % 16 !== 0) continue // 1 MiB between turns of the event loop
      await new Promise(resolve => setImmediate(resolve))
      if (this.quiet) return void steps.return(undefined as any)
      if (this.chunks.pendingBytes() >= PERSIST_BYTES) await this.persist(false)
      await this.backpressure()
    }
    const after = lstatReal(this.origin, p)
    if (fingerprintDrift(fingerprintOf(before), after) || !this.origin.servedByReal(p)) return
    const e = realEntry(this.origin, this.chunks, p, r.value, after)
    this.origin.setBase(p, e)
    if (!this.fingerprints.has(p)) this.setFingerprint(p, fingerprintOf(after))
    this.retryOps.push(this.store.baseOp(p, e))
    this.schedule()
  }

  /**
   * Room on the store's disk for `bytes` more that no write in the mount asked for (keeping
   * originals in the background or before an open underneath): never at the cost of the
   * writes in the mount, so only with twice the reserve to spare after them.
   */
  roomToSpare (bytes: number): boolean {
    const st = fs.statfsSync(this.store.path)
    return st.bavail * st.bsize - this.inflight - this.chunks.pendingBytes() - bytes >= 2 * this.reserveBytes
  }

  /** The mount stops: no new background work; waits for the capture in progress to give up. */
  async quiesce (): Promise<void> {
    this.quiet = true
    this.toFreeze.clear()
    await this.freezing
  }

  /** The store ops for fingerprints changed since the last batch. */
  /** Store ops for the fingerprints changed since the last call (at most `max` of them). */
  fingerprintOps (max = Infinity): BatchOp[] {
    const ops: BatchOp[] = []
    for (const p of this.fpDirty) {
      if (ops.length >= max) break
      ops.push(this.store.fingerprintOp(p, this.fingerprints.get(p) ?? null))
      this.fpDirty.delete(p)
    }
    return ops
  }

  private onWrite (): void {
    if (this.meta.redo.length > 0) {
      this.meta.redo = []
      this.metaDirty = true
    }
  }

  noteWritten (bytes: number): void {
    this.unflushedBytes += bytes
    if (this.unflushedBytes >= PERSIST_BYTES) this.persist(false)?.catch(() => {})
  }

  private schedule (): void {
    if (this.timer) return
    this.timer = setTimeout(() => {
      this.timer = null
      this.persist(false)?.catch(() => {})
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
    const ops: BatchOp[] = this.retryOps
    // After a failed batch (a full disk) its ops come first; the user's rm of the culprit
    // deletes what they put, and only then can the batch fit again.
    const retrying = ops.length > 0
    this.retryOps = []
    const layer = this.headLayer
    const head = this.overlay.head
    let paths: Iterable<string> = this.dirtyPaths
    if (metaOnly && this.dataOnly.size) {
      paths = [...this.dirtyPaths].filter(p => !this.dataOnly.has(p))
      this.dirtyPaths = new Set(this.dataOnly)
    } else {
      this.dirtyPaths = new Set()
      this.dataOnly.clear()
    }
    for (const p of paths) {
      const node = this.overlay.nodes.get(p)
      if (node) {
        this.overlay.flushNode(node)
        if (node.opens <= 0) this.overlay.nodes.delete(p)
      }
      const e = head.get(p)
      if (e) ops.push({ type: 'put', key: entryKey(layer, p), value: encodeEntry(e) })
      else ops.push({ type: 'del', key: entryKey(layer, p) })
    }
    this.releaseHeadChunks(paths, ops)
    // Never push(...list): a list of 100,000s of ops overflows the call stack.
    for (const op of this.fingerprintOps()) ops.push(op)
    const drained = this.chunks.drain(ops)
    const bytes = drained.bytes
    // Chunks of a batch that failed are retried with it, and readable until one lands.
    const hexes = this.retryHexes.concat(drained.hexes)
    this.retryHexes = []
    if (this.metaDirty) {
      ops.push(this.store.metaOp())
      this.metaDirty = false
    }
    if (retrying) lastOpPerKey(ops)
    this.unflushedBytes = 0
    // A log that keeps growing (LevelDB never caught up with it while busy) is drained by one
    // batch that is not logged: nothing is logged while it is on its way, so it empties the log.
    if (!sync && !retrying && this.unlogged === 0 && bytes <= WAL_RECORD_BYTES && this.store.wal.size < WAL_MAX_BYTES && WAL_ON) {
      if (ops.length === 0) return null
      try {
        this.store.wal.append(ops)
      } catch (err: any) {
        this.retryOps = ops
        this.retryHexes = hexes
        this.storeFailure = err
        return Promise.reject(storeWriteError(err))
      }
      for (const op of ops) this.walOps.push(op)
      for (const h of hexes) this.walHexes.push(h)
      this.walBytes += bytes
      this.inflight += bytes
      if (this.walBytes >= WAL_SUBMIT_BYTES) void this.submit([], [], 0, false).catch(() => {})
      else this.walTimer ??= setTimeout(() => { this.walTimer = null; void this.submit([], [], 0, false).catch(() => {}) }, WAL_SUBMIT_MS)
      return null
    }
    return this.submit(ops, hexes, bytes, sync)
  }

  // Logged batches not yet handed to LevelDB (persist), and the timer that hands them on.
  private walOps: BatchOp[] = []
  private walHexes: string[] = []
  private walBytes = 0
  private walTimer: NodeJS.Timeout | null = null
  /** LevelDB batches on their way that hold changes the log does not (persist). */
  private unlogged = 0

  /**
   * One LevelDB batch on the ordered chain: the logged batches not yet in LevelDB come first
   * (with the log's sequence number, so that replaying the log skips them), then `ops`.
   */
  private submit (ops: BatchOp[], hexes: string[], bytes: number, sync: boolean): Promise<void> {
    if (this.walTimer) {
      clearTimeout(this.walTimer)
      this.walTimer = null
    }
    const logged = this.walOps.length > 0
    const seq = this.store.wal.seq
    const all = logged ? [...this.walOps, ...ops, walSeqOp(seq)] : ops
    const allHexes = logged ? this.walHexes.concat(hexes) : hexes
    const allBytes = this.walBytes + bytes
    this.walOps = []
    this.walHexes = []
    this.walBytes = 0
    this.inflight += bytes
    const unlogged = ops.length > 0 || sync
    if (unlogged) this.unlogged++
    const run = async (): Promise<void> => {
      if (all.length === 0 && !sync) return
      try {
        await this.unwedge()
        await this.store.batch(all, sync)
        this.storeFailure = null
        this.levelFailed = false
        this.chunks.landed(allHexes)
        if (logged) this.store.wal.landed(seq)
      } catch (err: any) {
        // Keep the changes for the next attempt; new writes get ENOSPC meanwhile.
        this.retryOps = all.concat(this.retryOps)
        this.retryHexes = allHexes.concat(this.retryHexes)
        this.storeFailure = err
        this.levelFailed = true
        throw storeWriteError(err)
      }
    }
    const p = this.chain.then(run, run).finally(() => {
      this.inflight -= allBytes
      if (unlogged) this.unlogged--
    })
    this.chain = p.catch(() => {})
    this.compactAfter(p)
    return p
  }

  /** One synced batch of `ops` and every queued chunk (plans, absorb, freeze). */
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
    this.metaDirty = false
    await this.submit(ops, hexes, 0, true)
  }

  /** Chunks (hex) of failed batches, waiting in retryOps. */
  private retryHexes: string[] = []

  /** Chunk bytes handed to LevelDB and not written yet. */
  private inflight = 0

  /**
   * Writers faster than the store: once more than MAX_INFLIGHT_BYTES wait for LevelDB, a
   * WRITE is answered only when the queue has drained (the daemon's memory stays bounded).
   */
  backpressure (): Promise<void> | null {
    return this.inflight > MAX_INFLIGHT_BYTES ? this.chain : null
  }

  private soon: Promise<void> | null = null

  /**
   * Every change made so far made durable against kill -9 of the daemon: namespace and
   * metadata changes (create, rename, unlink, chmod...) are answered only then. null: it is
   * already (logged, see persist). Otherwise a promise; changes made while the current
   * wake-up's requests run then share one batch (it is cut after them, in setImmediate).
   */
  durable (): Promise<void> | null {
    // Logged at once (the usual case): durable now, answered now.
    if (this.unlogged === 0 && this.retryOps.length === 0 && !this.soon) return this.persist(false, true)
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
    for (const [p, node] of this.overlay.nodes) if (node.dirty.size > 0) this.dirtyPaths.add(p)
    return this.persist(sync)
  }

  // statfs does not see what is queued for LevelDB (pending chunks, batches in flight): both
  // count as used, so a burst of writes cannot run the disk past the reserve between checks.
  private checkSpace (bytes: number): void {
    this.refreshSpace(false)
    if (this.spaceShort(bytes)) {
      if (!this.compaction) this.spaceRefusedAt = Date.now() // else it is tried again (spaceComing)
      this.spaceRefusal = fsError('ENOSPC', this.store.path, 'the cpfs store is full')
      throw this.spaceRefusal
    }
    this.spaceFree -= bytes
  }

  /** statfs of the store's disk, at most every 250 ms unless `now` (or the store is failing). */
  private refreshSpace (now: boolean): void {
    const t = Date.now()
    if (!now && !this.storeFailure && t - this.spaceCheckedAt <= 250) return
    this.spaceCheckedAt = t
    try {
      const st = fs.statfsSync(this.store.path)
      this.spaceFree = st.bavail * st.bsize
    } catch {}
  }

  /** A LevelDB batch failed (not our log): LevelDB refuses every write until it is reopened. */
  private levelFailed = false

  /**
   * Before a batch that follows a failed one: once the disk has room again (whoever filled
   * it), reopen LevelDB, so that a shortage never outlasts itself. While the disk is still
   * short the batch fails at once, without touching LevelDB (no reopen per request).
   */
  private async unwedge (): Promise<void> {
    if (!this.levelFailed) return
    this.refreshSpace(true)
    if (this.spaceFree < this.reserveBytes) throw this.storeFailure ?? fsError('ENOSPC', this.store.path, 'the cpfs store is full')
    process.stderr.write(`cpfs daemon: ${new Date().toISOString()} the store's disk has room again; reopening the store after its failed write\n`)
    await this.store.reopen()
    this.levelFailed = false
  }

  private spaceShort (bytes: number): boolean {
    return this.spaceFree - this.chunks.pendingBytes() - this.inflight - bytes < this.reserveBytes || (this.storeFailure !== null && this.spaceFree < this.reserveBytes * 2)
  }

  // ---- turns ----------------------------------------------------------------------------

  // turn, rewind, undo and redo change the in-memory stack synchronously, right after
  // collecting the pending changes of the old head, so that no FUSE op can land between
  // the two; the store batch follows on the same ordered chain.

  /**
   * Records that seal the head turn and open a new, empty one (in memory now; ops to store).
   * `written`: turn records going into the same batch, not in the store yet — a restored head
   * prepared offline is one, and reading its record from the store would find none (it was
   * sealed with openedAt 0 and without its labels).
   */
  private sealHead (opts: TurnOptions = {}, written: TurnRecord[] = []): BatchOp[] {
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
    this.overlay.head = this.layers.get(layer)!
    this.pinHeadChunks()
    return [
      { type: 'put', key: turnKey(sealed.layer), value: encode(sealed) },
      { type: 'put', key: turnKey(layer), value: encode(rec) }
    ]
  }

  /**
   * Seal the head turn (`message` describes what it did) and open the next (`prompt` says what
   * for, `id` names it). An id must be new: two turns with one id would make `rewind ID`
   * ambiguous.
   */
  async turn (opts: TurnOptions = {}): Promise<number> {
    if (opts.id !== undefined) {
      const id = checkId(opts.id)
      const at = this.turnsWithId(id)
      if (at.length) throw new CpfsError('DUPLICATE_ID', `turn ${at[0]} already has the id "${id}"`, `give each turn its own id (cpfs rewind ${id} goes back to the start of turn ${at[0]})`)
      opts = { ...opts, id }
    }
    const flushed = this.flushAll(false)
    const ops = this.sealHead(opts)
    this.meta.redo = []
    const committed = this.commit(ops)
    await flushed
    await committed
    return this.head
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
      if ((this.layers.get(this.headLayer)?.size ?? 0) === 0) applied.pop()
      else for (const op of this.sealHead({}, written)) ops.push(op)
    }
    this.meta.applied = applied
    return ops
  }

  /**
   * A new stack (rewind, redo, discard, an offline restore) with what it replaces and the turn
   * records it writes. Computed first, applied by `applyChange` — in the same batch as a plan's
   * commit when the real directory must change with it, so a crash never separates the two.
   */
  rewindChange (t: number): StackChange {
    const old = this.meta.stack.slice()
    const target: LabelledRecord = this.store.turnRecord(old[t - 1])
    const layer = this.meta.nextLayer++
    // The turn starts again: it keeps what it was opened for, not what it had done.
    const rec: LabelledRecord = { layer, openedAt: Date.now(), rewound: t }
    if (target.prompt !== undefined) rec.prompt = target.prompt
    if (target.message !== undefined) rec.message = target.message
    if (target.id !== undefined) rec.id = target.id
    return { stack: old.slice(0, t - 1).concat(layer), redo: [...this.meta.redo, old], records: [rec], newLayers: [layer] }
  }

  /** Apply a stack change in memory; returns the store ops (the caller adds metaOp). */
  applyChange (c: StackChange): BatchOp[] {
    const old = this.meta.stack
    for (const id of c.newLayers) if (!this.layers.has(id)) this.layers.set(id, new Map())
    this.meta.stack = c.stack.slice()
    this.meta.redo = c.redo.map(r => r.slice())
    if (c.discarded) this.meta.discarded = [...(this.meta.discarded ?? []), c.discarded]
    this.rebuild(false)
    this.pinHeadChunks()
    this.onViewChange?.(this.stackDiff(old, this.meta.stack))
    return c.records.map(rec => ({ type: 'put' as const, key: turnKey(rec.layer), value: encode(rec) }))
  }

  /** Write ops plus the metadata in one synced batch, after everything queued before. */
  private async commit (ops: BatchOp[]): Promise<void> {
    ops.push(this.store.metaOp())
    this.metaDirty = false
    await this.submit(ops, [], 0, true)
  }

  /** The turns (numbers) of the stack that carry this id. */
  private turnsWithId (id: string): number[] {
    const out: number[] = []
    this.meta.stack.forEach((layer, i) => { if (this.store.turnRecord(layer).id === id) out.push(i + 1) })
    return out
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
   * The workspace is at the start of turn t already: t is the head and nothing was written in
   * it. A rewind there changes nothing, so it must not add a redo step (a second `rewind 2`
   * would otherwise need two `redo`s to get back).
   */
  atStartOf (t: number): boolean {
    return t === this.head && this.overlay.head.size === 0 && this.overlay.openNodes().every(n => n.dirty.size === 0)
  }

  async rewind (spec: string | number): Promise<{ head: number, dropped: number }> {
    const t = this.resolveTurn(spec)
    if (this.atStartOf(t)) return { head: this.head, dropped: 0 }
    const flushed = this.flushAll(false)
    const dropped = this.meta.stack.length - t + 1
    const committed = this.commit(this.applyChange(this.rewindChange(t)))
    await flushed
    await committed
    return { head: this.head, dropped }
  }

  /** The turn `undo` goes back to: the head's start, or the one before when the head is empty. */
  undoTarget (): number {
    const t = this.atStartOf(this.head) ? this.head - 1 : this.head
    if (t < 1) throw new CpfsError('NOTHING_TO_UNDO', 'nothing to undo: turn 1 has no changes', 'make a change first, or see cpfs log')
    return t
  }

  async undo (): Promise<{ head: number, dropped: number }> {
    return await this.rewind(this.undoTarget())
  }

  /** The change `redo` makes: back to the stack the last rewind (or discard) replaced. */
  async redoChange (): Promise<StackChange> {
    const prev = this.meta.redo.at(-1)
    if (!prev) throw new CpfsError('NOTHING_TO_REDO', 'nothing to redo', 'redo only follows a rewind, undo or discard, before any new write')
    if (this.overlay.head.size > 0) {
      throw new CpfsError('NOTHING_TO_REDO', 'cannot redo: the workspace changed since the rewind', 'rewind again to the turn you want')
    }
    for (const id of prev) if (!this.layers.has(id)) this.layers.set(id, await this.store.loadLayer(id))
    return { stack: prev, redo: this.meta.redo.slice(0, -1), records: [], newLayers: [] }
  }

  async redo (): Promise<{ head: number }> {
    const change = await this.redoChange()
    const flushed = this.flushAll(false)
    const committed = this.commit(this.applyChange(change))
    await flushed
    await committed
    return { head: this.head }
  }

  /**
   * `unmount --discard`: the next session starts from the real directory. What the real
   * directory does not hold (the pending turns) is set aside as a discarded branch: `cpfs
   * redo` brings it back until the next write, and it stays in the store (listed by cpfs log)
   * until pruned. Returns the number of turns set aside, 0 when nothing was pending.
   */
  async discard (): Promise<number> {
    await this.flushAll(false)
    const pending = this.pending()
    if (pending === 0) return 0
    for (const id of this.meta.applied) if (!this.layers.has(id)) this.layers.set(id, await this.store.loadLayer(id))
    const old = this.meta.stack.slice()
    const layer = this.meta.nextLayer++
    const rec: LabelledRecord = { layer, openedAt: Date.now(), prompt: 'after discarding' }
    const change: StackChange = {
      stack: [...this.meta.applied, layer],
      redo: [...this.meta.redo, old],
      records: [rec],
      newLayers: [layer],
      discarded: { stack: old, at: Date.now(), pending }
    }
    await this.commit(this.applyChange(change))
    return pending
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

  /** Store ops with the next batch, now: durable against kill -9 of the daemon when this returns. */
  async storeNow (ops: BatchOp[]): Promise<void> {
    for (const op of ops) this.retryOps.push(op)
    await this.persist(false)
  }

  /**
   * An offline restore: the head layer with the restore applied, prepared as a new layer that
   * replaces the head only when the plan that writes it to the real directory commits (same
   * batch), so a refused restore leaves the history as it was. Returns the target view, the
   * paths it touches, the stack change and the store ops for the new layer's entries.
   */
  async prepareRestore (spec: string | number, paths: string[]): Promise<RestorePrepared> {
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
    // The new layer is made only when the caller commits it: a restore that changes nothing
    // leaves the history as it was (no layer, no sealed head, redo kept).
    const commit = (): { change: StackChange, preOps: BatchOp[] } => {
      const layer = this.meta.nextLayer++
      this.layers.set(layer, copy)
      const rec: TurnRecord = { ...this.store.turnRecord(this.headLayer), layer }
      const preOps: BatchOp[] = [...copy].map(([p, e]) => ({ type: 'put' as const, key: entryKey(layer, p), value: encodeEntry(e) }))
      return { change: { stack: [...stack.slice(0, -1), layer], redo: [], records: [rec], newLayers: [layer] }, preOps }
    }
    return { turn: t, view, touched, commit }
  }

  /** Say what a turn was opened for (fork: where the new history came from). */
  async labelTurn (turn: number, prompt: string): Promise<void> {
    const rec: LabelledRecord = this.store.turnRecord(this.meta.stack[turn - 1])
    rec.prompt = neutralise(prompt)
    await this.store.batch([{ type: 'put', key: turnKey(rec.layer), value: encode(rec) }], true)
  }

  // ---- reporting ------------------------------------------------------------------------

  /**
   * The turns of the stack. `changed[i]`, when given, holds the paths turn i+1 really changed
   * (as `cpfs diff` counts them): its bytes are then those of these paths only. A file
   * written again with the bytes it had (tsc rewriting its outputs, a restore to what is
   * there) is in the layer, but changed nothing: "0 paths ... 21 KiB" said otherwise.
   */
  log (changed?: Array<Set<string>>): TurnInfo[] {
    const out: TurnInfo[] = []
    this.meta.stack.forEach((layer, i) => {
      const rec: LabelledRecord = this.store.turnRecord(layer)
      const entries: Map<string, Entry> = this.layers.get(layer) ?? new Map()
      const keep = changed?.[i]
      let files = 0
      let bytes = 0
      const changes: TurnInfo['changes'] = []
      const listed = new Set<string>()
      const records: Array<[number, Entry, number]> = []
      for (const [p, e] of entries) {
        let b = 0
        if (e.t === 'f') for (const [idx, c] of e.chunks) if (c) b += chunkLen(e.size, idx)
        if (isInoKey(p)) {
          records.push([inoOfKey(p), e, b])
          continue
        }
        if (!keep || keep.has(p)) bytes += b
        if (e.t === 'd' && e.n !== 1 && !e.redirect) continue
        files++
        listed.add(p)
        changes.push({ path: p, change: e.t === 'w' ? 'deleted' : e.n === 1 ? 'added' : 'modified' })
      }
      // An inode record changed (a write through a hard link): its names changed.
      if (records.length) {
        const view = View.build(this.origin, this.meta.stack.slice(0, i + 1).map(id => this.layers.get(id) ?? new Map()))
        for (const [ino, e, b] of records) {
          const names = view.namesOf(ino)
          const o = e.t !== 'w' && e.t !== 'h' ? e.o : undefined
          if (o !== undefined && view.resolve(o)?.key === '#' + ino) names.push(o)
          if (!keep || names.some(p => keep.has(p))) bytes += b
          for (const p of names) {
            if (listed.has(p)) continue
            listed.add(p)
            files++
            changes.push({ path: p, change: 'modified' })
          }
        }
      }
      changes.sort((a, b) => a.path < b.path ? -1 : 1)
      out.push({
        turn: i + 1,
        layer,
        openedAt: rec.openedAt,
        sealedAt: rec.sealedAt ?? null,
        prompt: rec.prompt ?? rec.message ?? null,
        message: rec.summary ?? null,
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
      skipped: (() => { const raw = this.store.getSync('k'); return raw ? decode<string[]>(raw) : [] })(),
      ...(this.spaceRefusedAt ? { spaceRefusedAt: this.spaceRefusedAt } : {}),
      ...(this.freezing ? { capturing: this.toFreeze.size + 1 } : {})
    }
  }

  async close (): Promise<void> {
    await this.quiesce()
    try {
      await this.flushAll(true)
      this.store.wal.landed(this.store.wal.seq, true) // LevelDB has everything: the log starts over
    } finally {
      this.origin.closeFds()
      await this.store.close()
    }
  }
}

/**
 * Keep only the last op for each key, in place and in order: a put followed by a delete of the
 * same key (a chunk written, its batch refused for space, then its file removed) writes nothing.
 */
export function lastOpPerKey (ops: BatchOp[]): void {
  const seen = new Set<string>()
  let w = ops.length
  for (let i = ops.length - 1; i >= 0; i--) {
    const op = ops[i]
    if (seen.has(op.key)) continue
    seen.add(op.key)
    ops[--w] = op
  }
  ops.splice(0, w)
}

/** An origin stat in the shape fingerprints take (a cached null: nothing was there). */
function servedAsReal (st: OriginStat | null): RealStat {
  if (st === null) return { type: null, ino: 0, size: 0, mode: 0, mtime: 0, mtimeNs: 0, ctime: 0, ctimeNs: 0 }
  return { type: st.t, ino: st.ino, size: st.size, mode: st.mode & 0o7777, mtime: st.mtime, mtimeNs: st.mtimeNs, ctime: st.ctime, ctimeNs: st.ctimeNs }
}

function storeWriteError (err: any): CpfsError {
  return new CpfsError('STORE_WRITE', `cannot write to the store: ${err?.cause?.message ?? err?.message}`, 'free space on the store disk', { cause: err })
}
