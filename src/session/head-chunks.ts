// Chunks only the head turn ever held. A file written and deleted (or overwritten, or
// truncated) within one unsealed turn must not keep its bytes in the store: after ENOSPC the
// user removes the culprit and goes on. Each head path's persisted entry holds references to
// chunks first stored for the head (ChunkStore.headOnly); when the last reference goes, the
// chunk's reference is deleted in the same batch and, once enough is freed, the pack files
// (store/packs.ts) this session wrote whose every chunk is freed are deleted, so the disk space
// really comes back. (Dead bytes in packs that still hold a live chunk wait for cpfs prune/gc.)
import { hexName, type ChunkStore } from '../store/chunks.js'
import type { Entry } from '../store/entries.js'
import type { BatchOp } from '../store/keys.js'
import type { Store } from '../store/store.js'

/** Once this much was freed from the store, LevelDB compacts the chunks so the disk gets it back. */
const COMPACT_AFTER_BYTES = 32 * 1024 * 1024

const NONE: string[] = []

/** The distinct head-only chunks (hex) among a file's chunk hashes (one pass: this runs for every file in every batch). */
function headOnlyHexes (hashes: Iterable<Buffer | null>, headOnly: Set<string>): string[] {
  let out: Set<string> | null = null
  for (const h of hashes) {
    if (h === null) continue
    const hex = hexName(h)
    if (headOnly.has(hex)) (out ??= new Set()).add(hex)
  }
  return out ? [...out] : NONE
}

export class HeadChunks {
  private readonly headRefs = new Map<string, string[]>()
  private readonly refCount = new Map<string, number>()
  /**
   * Head-only chunks no head path references any more. They are freed unless a file that is
   * still open reads them (unlinked, or replaced by a rename, while a process holds it: an
   * editor's atomic save under a reader, a deleted temporary file); then at a later batch,
   * once it is closed.
   */
  private readonly unreferenced = new Set<string>()
  private freedSinceCompaction = 0
  private compacting = false
  private compactNext = false
  /** Settles once the freed chunks' space is back on the disk (the compaction after their batch). */
  private compaction: { promise: Promise<void>, resolve: () => void } | null = null

  /**
   * `openChunks()`: the chunks open files still read (the overlay's). `compacted()`: called
   * once freed space is back on the disk.
   */
  constructor (
    private readonly store: Store,
    private readonly chunks: ChunkStore,
    private readonly openChunks: () => Set<string>,
    private readonly compacted: () => void
  ) {}

  /** Space on its way back to the disk (a compaction to come or running), or null. */
  freeing (): Promise<void> | null {
    return this.compaction?.promise ?? null
  }

  /** Chunks wait for their open files to close before they are freed. */
  get waiting (): boolean {
    return this.unreferenced.size > 0
  }

  /**
   * Chunks just hashed into p's entry, which is stored by a later batch (Persister.persistData):
   * they count as p's references until then, and that batch's `release` drops them with the
   * rest of p's old references, so a chunk overwritten before it is freed as usual.
   */
  stage (p: string, hashes: Buffer[]): void {
    const headOnly = this.chunks.headOnly
    let refs = this.headRefs.get(p)
    for (const h of hashes) {
      const hex = hexName(h)
      if (!headOnly.has(hex)) continue
      if (!refs) this.headRefs.set(p, refs = [])
      refs.push(hex)
      this.refCount.set(hex, (this.refCount.get(hex) ?? 0) + 1)
    }
  }

  /** The head entries of `paths` were just persisted: count their references, free what lost its last. */
  release (paths: Iterable<string>, head: Map<string, Entry>, ops: BatchOp[]): void {
    const headOnly = this.chunks.headOnly
    if (headOnly.size === 0 && this.headRefs.size === 0) return this.freeUnreferenced(ops)
    const dropped: string[] = []
    for (const p of paths) {
      const e = head.get(p)
      const after = e?.kind === 'f' ? headOnlyHexes(e.chunks.values(), headOnly) : NONE
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
   * After the batch that deleted freed chunks: delete the packs nothing refers to any more (in
   * the background). Their references' deletes are made durable first (one synced batch), so no
   * crash can bring back a reference to a deleted pack.
   */
  compactAfter (batch: Promise<void>): void {
    if (!this.compactNext) return
    this.compactNext = false
    this.compacting = true
    const done = this.compaction
    const reclaim = async (): Promise<void> => {
      const dead = this.store.packs.reclaimable()
      if (dead.length === 0) return
      await this.store.batch([], true)
      // Those still dead (nothing appended to them meanwhile) go; the sync covered their deletes.
      const still = new Set(this.store.packs.reclaimable())
      for (const id of dead) if (still.has(id)) this.store.packs.remove(id)
    }
    batch.then(reclaim, () => {}).catch(() => {}).finally(() => {
      this.compacting = false
      this.compacted()
      if (this.compaction === done) this.compaction = null
      done?.resolve()
    })
  }

  /** The head turn's chunks now belong to history (sealed, rewound away, set aside). */
  pin (): void {
    this.chunks.pinAll()
    this.headRefs.clear()
    this.refCount.clear()
    this.unreferenced.clear()
  }

  private freeUnreferenced (ops: BatchOp[]): void {
    if (this.unreferenced.size === 0) return
    const open = this.openChunks()
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
}
