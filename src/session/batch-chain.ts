// The ordered chain of batches to the store. Small batches go to cpfs's write-ahead log first
// (store/wal.ts), which makes them durable against kill -9 with one write(2), and reach
// LevelDB a few milliseconds later, several at a time, with the log's sequence number (so
// that replaying the log skips them). Other batches go to LevelDB directly, after every one
// before them. A batch that fails (a full disk) keeps its changes for the next attempt.
import { CpfsError } from '../errors.js'
import type { ChunkStore } from '../store/chunks.js'
import type { BatchOp } from '../store/keys.js'
import type { Store } from '../store/store.js'
import { walSeqOp } from '../store/wal.js'
import type { HeadChunks } from './head-chunks.js'
import type { Space } from './space.js'

/** Logged batches go on to LevelDB this many ms after the first, or at this many bytes. */
const WAL_SUBMIT_MS = Number(process.env.CPFS_WAL_SUBMIT_MS ?? 5)
const WAL_SUBMIT_BYTES = 8 * 1024 * 1024

export class BatchChain {
  /** Chunk bytes handed to LevelDB and not written yet. */
  inflight = 0
  /** Ops of failed batches, to go first in the next one. */
  retryOps: BatchOp[] = []
  /** Chunks (hex) of failed batches, waiting in retryOps. */
  retryHexes: string[] = []
  /** LevelDB batches on their way that hold changes the log does not (see Persister.persist). */
  unlogged = 0
  private chain: Promise<void> = Promise.resolve()
  // Logged batches not yet handed to LevelDB, and the timer that hands them on.
  private walOps: BatchOp[] = []
  private walHexes: string[] = []
  private walBytes = 0
  private walTimer: NodeJS.Timeout | null = null

  constructor (
    private readonly store: Store,
    private readonly chunks: ChunkStore,
    private readonly headChunks: HeadChunks,
    private readonly space: Space
  ) {}

  /** Settles once every batch handed on so far has landed (or failed). */
  get settled (): Promise<void> {
    return this.chain
  }

  /** A batch that could not be made (a pack write failed): new writes get ENOSPC until one lands. */
  failed (err: Error): Promise<void> {
    this.space.failed(err, false)
    return Promise.reject(storeWriteError(err))
  }

  /** A batch into the write-ahead log: durable now; LevelDB gets it with the next submit. */
  log (ops: BatchOp[], hexes: string[], bytes: number): Promise<void> | null {
    if (ops.length === 0) return null
    try {
      this.store.wal.append(ops)
    } catch (err: any) {
      this.retryOps = ops
      this.retryHexes = hexes
      this.space.failed(err, false)
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

  /**
   * One LevelDB batch on the ordered chain: the logged batches not yet in LevelDB come first
   * (with the log's sequence number, so that replaying the log skips them), then `ops`.
   */
  submit (ops: BatchOp[], hexes: string[], bytes: number, sync: boolean): Promise<void> {
    if (this.walTimer) {
      clearTimeout(this.walTimer)
      this.walTimer = null
    }
    const logged = this.walOps.length > 0
    const seq = this.store.wal.seq
    const all = logged ? [...this.walOps, ...ops, walSeqOp(seq)] : ops
    // Logged batches repeat keys (a file's entry at its create, again at its close; its
    // directory's at every create in it): LevelDB needs only the last op of each.
    if (logged) lastOpPerKey(all)
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
        await this.space.unwedge()
        await this.store.batch(all, sync)
        this.space.landed()
        this.chunks.landed(allHexes)
        if (logged) this.store.wal.landed(seq)
      } catch (err: any) {
        // Keep the changes for the next attempt; new writes get ENOSPC meanwhile.
        this.retryOps = all.concat(this.retryOps)
        this.retryHexes = allHexes.concat(this.retryHexes)
        this.space.failed(err, true)
        throw storeWriteError(err)
      }
    }
    const p = this.chain.then(run, run).finally(() => {
      this.inflight -= allBytes
      if (unlogged) this.unlogged--
    })
    this.chain = p.catch(() => {})
    this.headChunks.compactAfter(p)
    return p
  }
}

function storeWriteError (err: any): CpfsError {
  return new CpfsError('STORE_WRITE', `cannot write to the store: ${err?.cause?.message ?? err?.message}`, 'free space on the store disk', { cause: err })
}

/**
 * Keep only the last op for each key, in place and in order: a put followed by a delete of the
 * same key (a chunk written, its batch refused for space, then its file removed) writes nothing.
 * Within one LevelDB batch (applied atomically) only the last op of a key has any effect.
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
