// The store's disk space, as the session sees it: the reserve that writes in the mount must
// leave free, the shortage that refuses them (ENOSPC), the wait for space that is on its way
// back, and reopening LevelDB once a shortage is over.
//
// statfs does not see what is queued for LevelDB (chunks not drained yet, batches in flight):
// both count as used, so a burst of writes cannot run the disk past the reserve between checks.
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import { reserveBytes } from '../store/config.js'
import type { ChunkStore } from '../store/chunks.js'
import type { Store } from '../store/store.js'

/** How long a request refused for space waits for freed space to come back (comingBack). */
const SPACE_WAIT_MS = 10_000
/** statfs is asked at most this often while nothing fails. */
const STATFS_EVERY_MS = 250

export class Space {
  /** Bytes the store's disk must keep free; writes in the mount fail with ENOSPC below it. */
  reserveBytes = reserveBytes()
  /** When writes were last refused for lack of space (ms), or 0. */
  refusedAt = 0
  /** The last failed LevelDB batch's error, until one lands (see unwedge). */
  storeFailure: Error | null = null
  private checkedAt = 0
  private free = Infinity
  /** The error check() threw last: what comingBack may make a request wait out. */
  private refusal: Error | null = null
  /** A LevelDB batch failed (not our log): LevelDB refuses every write until it is reopened. */
  private levelFailed = false

  /**
   * `queued()`: bytes handed to the store and not on its disk yet (the persister's batches in
   * flight and the chunks waiting for one). `freeing()`: the promise of space on its way back
   * (HeadChunks' compaction), if any.
   */
  constructor (
    private readonly store: Store,
    private readonly chunks: ChunkStore,
    private readonly inflight: () => number,
    private readonly freeing: () => Promise<void> | null
  ) {}

  /** Refuse `bytes` more with ENOSPC when they would take the disk below the reserve. */
  check (bytes: number): void {
    this.refresh(false)
    if (this.short(bytes)) {
      if (!this.freeing()) this.refusedAt = Date.now() // else it is tried again (comingBack)
      this.refusal = fsError('ENOSPC', this.store.path, 'the cpfs store is full')
      throw this.refusal
    }
    this.free -= bytes
  }

  /** Look at the disk again on the next check (space was just given back). */
  forget (): void {
    this.checkedAt = 0
  }

  /**
   * While freed chunks are on their way off the disk (rm of the file that filled it, then a
   * new write at once): what a request refused with ENOSPC waits for before it is tried again,
   * instead of failing a moment before the space is back.
   */
  comingBack (refusal: unknown): Promise<void> | null {
    const freeing = this.freeing()
    if (!freeing || refusal !== this.refusal) return null // not the space check (an xattr list that is full)
    // Bounded: a request never waits on LevelDB for more than SPACE_WAIT_MS; then it is tried
    // once more and gets its ENOSPC if the space is still not there.
    return new Promise<void>(resolve => {
      const timer = setTimeout(resolve, SPACE_WAIT_MS)
      void freeing.then(() => { clearTimeout(timer); resolve() })
    })
  }

  /**
   * Room on the store's disk for `bytes` more that no write in the mount asked for (keeping
   * originals in the background or before an open underneath): never at the cost of the
   * writes in the mount, so only with twice the reserve to spare after them.
   */
  roomToSpare (bytes: number): boolean {
    const st = fs.statfsSync(this.store.path)
    return st.bavail * st.bsize - this.inflight() - this.chunks.pendingBytes() - bytes >= 2 * this.reserveBytes
  }

  /** A batch reached LevelDB. */
  landed (): void {
    this.storeFailure = null
    this.levelFailed = false
  }

  /** A LevelDB batch failed: new writes get ENOSPC until one lands. */
  failed (err: Error, level: boolean): void {
    this.storeFailure = err
    if (level) this.levelFailed = true
  }

  /**
   * Before a batch that follows a failed one: once the disk has room again (whoever filled
   * it), reopen LevelDB, so that a shortage never outlasts itself. While the disk is still
   * short the batch fails at once, without touching LevelDB (no reopen per request).
   */
  async unwedge (): Promise<void> {
    if (!this.levelFailed) return
    this.refresh(true)
    if (this.free < this.reserveBytes) throw this.storeFailure ?? fsError('ENOSPC', this.store.path, 'the cpfs store is full')
    process.stderr.write(`cpfs daemon: ${new Date().toISOString()} the store's disk has room again; reopening the store after its failed write\n`)
    await this.store.reopen()
    this.levelFailed = false
  }

  /** statfs of the store's disk, at most every STATFS_EVERY_MS unless `now` (or the store is failing). */
  private refresh (now: boolean): void {
    const t = Date.now()
    if (!now && !this.storeFailure && t - this.checkedAt <= STATFS_EVERY_MS) return
    this.checkedAt = t
    try {
      const st = fs.statfsSync(this.store.path)
      this.free = st.bavail * st.bsize
    } catch {}
  }

  private short (bytes: number): boolean {
    return this.free - this.chunks.pendingBytes() - this.inflight() - bytes < this.reserveBytes || (this.storeFailure !== null && this.free < this.reserveBytes * 2)
  }
}
