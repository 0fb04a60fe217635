// The layer store: one LevelDB per workspace (classic-level). Everything that must change
// together goes through `batch`, which LevelDB applies atomically — a rewind is one batch
// that moves the stack pointer, a sealed turn is one synced batch.
import { ClassicLevel } from 'classic-level'
import { mkdirSync, statSync } from 'node:fs'
import { INTEGRITY_KEY, checkOnOpen, closeWitness, writeWitness, type StoreProblem } from './integrity.js'
import { corruptHint, decodeStored, levelError } from './damage.js'
import { join } from 'node:path'
import { memoryBudgets } from './memory.js'
import { CpfsError, isCpfsError } from '../errors.js'
import { makePrivate } from './locate.js'
import { decode, decodeEntry, encode, encodeEntry } from './codec.js'
import type { Entry } from './entries.js'
import { LEGACY_CHUNK_PREFIX, META_KEY, baseKey, entryPrefix, prefixEnd, refKey, turnKey, type BatchOp } from './keys.js'
import { FINGERPRINT_PREFIX, fingerprintKey, storedFingerprint, type Fingerprint } from './fingerprints.js'
import { Wal } from './wal.js'
import { PackSet } from './packs.js'
import { replayWal } from './wal-replay.js'
import { decodeRef } from './chunk-ref.js'
import type { ChunkRef } from './pack-format.js'
import { keepAsBranches, type Branch } from './branches.js'

/** The store version this cpfs writes. */
export const STORE_VERSION = 7

export type { BatchOp } from './keys.js'
export { encodeRef, decodeRef } from './chunk-ref.js'

export interface StoreMeta {
  /**
   * 2: sparse chunk maps, nanosecond times, xattrs, fingerprints (cpfs 0.2).
   * 3: hard links — inode records (`#<ino>` keys) and name entries ('h'), see entries.ts.
   * 4: readable field names in records (kind, newInTurn, xattrs, realPath, chunkRefs; the
   *    fingerprints' type, mtime, mtimeNs, ctime, ctimeNs): docs/decisions.md.
   * 5: chunk bytes in pack files (store/packs.ts), LevelDB holds where they are (r<hex>).
   * 6: steps (session/steps.ts): a turn may be made of several layers (`parts`), which an
   *    older cpfs would not see.
   * 7: branches (store/branches.ts): stacks a rewind left are kept after writes; an older cpfs
   *    would collect them. Migrated on open: redo stacks and discarded stacks become branches.
   * Stores of versions 1 to 4 are read (records are converted as they load; their chunks stay
   * in LevelDB's c<hex> keys and are read there) and become version 5 with their next write, so
   * that an older cpfs refuses them instead of misreading them.
   */
  version: 1 | 2 | 3 | 4 | 5 | 6 | 7
  /** Chunks may be in LevelDB's c<hex> keys (the store was written by version 4 or before). */
  legacyChunks?: boolean
  workspace: string
  /** Layer ids of turns 1..head; the last one is the head layer. */
  stack: number[]
  /** Stacks that `redo` returns to, most recent last (each is kept as a branch too when it holds changes of its own). */
  redo: number[][]
  /** The stack whose view the real directory holds (its layers are never collected). */
  applied: number[]
  /** Stacks set aside by `unmount --discard`, oldest first (kept until pruned). */
  discarded?: Array<{ stack: number[], at: number, pending: number }>
  nextLayer: number
  nextIno: number
  createdAt: number
  /**
   * Turns made of several layers (version 6): a turn's layer id → the sealed layers below it
   * that belong to the same turn, oldest first. A step (session/steps.ts) seals the head layer
   * as a part at its start and its end, so that what it changed is a layer of its own; the
   * turn's view is its parts then its layer. Set once the layer stops being the head, never
   * changed after.
   */
  parts?: Record<string, number[]>
  /** The next step's number (steps count from 1 per workspace). */
  nextStep?: number
  /** Steps begun and not ended yet, by number. */
  openSteps?: number[]
  /** Stacks the workspace left, kept (version 7, store/branches.ts). */
  branches?: Branch[]
  /** The next branch's number. */
  nextBranch?: number
  /** When retention last ran (session/retention.ts); the interval counts from there. */
  retainedAt?: number
}

export interface TurnRecord {
  layer: number
  openedAt: number
  sealedAt?: number
  message?: string
  id?: string
  /** Set when this layer was opened by a rewind rather than by `cpfs turn`. */
  rewound?: number
  /** A part of a turn (meta.parts): the steps that were open while it was the head. */
  steps?: number[]
  /** A turn's layer that replaced a sealed part as the head: when it did (its part's openedAt). */
  since?: number
}

// New files get inode numbers from here up; lower files keep their real inode numbers, so the
// two ranges must not meet: 2^52 is far above what ext4 or xfs hand out, and every number up
// to 2^53 is exact in JavaScript. (Stores made by cpfs 0.1 started at 2^31 and keep going.)
export const FIRST_INO = 2 ** 52

/**
 * LevelDB's memtable: LevelDB's own default, 4 MiB. It was 8 MiB (with a reserve of 64 MiB or
 * more) while chunk bytes were LevelDB values: a big write filled level 0 with small tables
 * faster than compaction merged them and LevelDB stalled the writer. Chunk bytes are in pack
 * files now (packs.ts) and LevelDB gets entries and ~20-byte references, which a 4 MiB memtable
 * takes as well; and a memtable is resident memory of the daemon, two of them while one is
 * written (docs/decisions.md, "Daemon memory, second pass"). Stores with a reserve under
 * 64 MiB had 4 MiB already: a merge's transient disk need, about 4 × memtable + 10 MiB, is what
 * the reserve (config.ts) must hold.
 */
export const LEVEL_WRITE_BUFFER = 4 * 1024 * 1024

export class Store {
  readonly path: string
  /**
   * Damage found while opening (integrity.ts). Opening refuses with the first one unless
   * `tolerate` was asked for (cpfs fsck, which reports and repairs them).
   */
  problems: StoreProblem[] = []
  /** Synced batches so far (INTEGRITY_KEY); the witness file outside LevelDB follows it. */
  syncCount = 0
  private syncChain: Promise<unknown> = Promise.resolve()
  readonly db: ClassicLevel<string, Buffer>
  meta!: StoreMeta
  /** Batches answered before LevelDB has them (wal.ts). */
  wal!: Wal
  /** Where chunk bytes live (packs.ts). */
  packs!: PackSet

  /** An older store's metadata as read, as version 5: goes with the first batch (before new records). */
  private upgradeOp: BatchOp | null = null

  /** The workspace the caller named (for hints before the metadata is read). */
  private workspace = ''

  private constructor (path: string) {
    this.path = path
    this.db = new ClassicLevel<string, Buffer>(join(path, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer', writeBufferSize: LEVEL_WRITE_BUFFER, cacheSize: memoryBudgets().levelCache })
  }

  /** Open (and with `create`, initialise) the store at `path`. */
  static async open (path: string, opts: { workspace: string, create: boolean, tolerate?: boolean }): Promise<Store> {
    let st
    try {
      st = statSync(path)
    } catch {
      st = null
    }
    if (st && !st.isDirectory()) {
      throw new CpfsError('STORE_NOT_DIR', `store path ${path} is not a directory`, 'pass --store a directory path, or remove that file')
    }
    if (!st) {
      if (!opts.create) throw new CpfsError('NO_HISTORY', `no cpfs history for ${opts.workspace}`, `run cpfs mount ${opts.workspace} first`)
      mkdirSync(path, { recursive: true, mode: 0o700 })
    }
    makePrivate(path)
    const store = new Store(path)
    store.workspace = opts.workspace
    await store.openLevel(opts)
    try {
      store.packs = PackSet.open(path)
    } catch (err: any) {
      await store.close()
      throw isCpfsError(err) ? err : new CpfsError('STORE_OPEN', `cannot open the pack files of store ${path}: ${err?.message ?? err}`, 'check the store directory and its permissions', { cause: err })
    }
    try {
      await replayWal(store, opts.tolerate === true, store.walProblems)
    } catch (err: any) {
      await store.close()
      if (isCpfsError(err)) throw err
      throw new CpfsError('STORE_OPEN', `cannot replay the write-ahead log of store ${path}: ${err?.message ?? err}`, 'free space on the store disk and run the command again; nothing was lost', { cause: err })
    }
    await store.loadMeta(opts)
    return store
  }

  /** Open LevelDB, each failure as the one line that names it. */
  private async openLevel (opts: { workspace: string, create: boolean }): Promise<void> {
    const path = this.path
    // What LevelDB creates now (its log, manifest, LOG) is private from the start.
    const mask = process.umask(0o077)
    try {
      await this.db.open({ createIfMissing: opts.create })
    } catch (err: any) {
      const cause = err?.cause
      const code = cause?.code ?? err?.code
      if (code === 'LEVEL_LOCKED') {
        throw new CpfsError('STORE_LOCKED', `store ${path} is locked by another cpfs process`, 'wait for it to finish, or stop the daemon with cpfs unmount', { cause: err })
      }
      if (code === 'LEVEL_CORRUPTION') {
        throw new CpfsError('STORE_CORRUPT', `store ${path} is corrupt: ${cause?.message ?? err?.message}`, corruptHint(opts.workspace), { cause: err })
      }
      if (!opts.create && /does not exist/.test(String(cause?.message ?? err?.message))) {
        throw new CpfsError('NO_HISTORY', `no cpfs history for ${opts.workspace}`, `run cpfs mount ${opts.workspace} first`)
      }
      throw new CpfsError('STORE_OPEN', `cannot open store ${path}: ${cause?.message ?? err?.message}`, 'check the path and its permissions', { cause: err })
    } finally {
      process.umask(mask)
    }
  }

  /** The history's metadata: read and checked (an older version is upgraded), or made for a new store. */
  private async loadMeta (opts: { workspace: string, create: boolean, tolerate?: boolean }): Promise<void> {
    const { path } = this
    const store = this
    const raw = store.db.getSync(META_KEY)
    if (raw) {
      // (version checked below; an older store is upgraded in memory and saved as 7 with its next batch)
      try {
        store.meta = decode<StoreMeta>(raw)
      } catch (err) {
        await store.close()
        throw new CpfsError('STORE_CORRUPT', `store ${path} has unreadable metadata`, 'move it aside and mount again; the real directory is unchanged', { cause: err })
      }
      if (![1, 2, 3, 4, 5, 6, 7].includes(store.meta.version) || !Array.isArray(store.meta.stack)) {
        await store.close()
        throw new CpfsError('STORE_CORRUPT', `store ${path} has metadata this version does not understand`, 'upgrade cpfs, or move the store aside')
      }
      if (store.meta.version !== STORE_VERSION) {
        // Chunks of an older store stay where it wrote them, in LevelDB (read there, collected
        // there): moving them all to packs would make the first opening as slow as the store is big.
        // Version 5 differs from 6 only by what it cannot hold (parts): nothing to convert.
        if (store.meta.version < 5) store.meta.legacyChunks = true
        if (store.meta.version < 7) keepAsBranches(store.meta)
        store.upgradeOp = { type: 'put', key: META_KEY, value: encode({ ...store.meta, version: STORE_VERSION }) }
      }
      store.meta.version = STORE_VERSION
      try {
        store.problems.push(...store.walProblems, ...checkOnOpen(store))
      } catch (err) {
        await store.close()
        throw err
      }
      if (store.problems.length && !opts.tolerate) {
        await store.close()
        throw store.problems[0].error
      }
    } else {
      if (!opts.create) {
        await store.close()
        throw new CpfsError('NO_HISTORY', `no cpfs history for ${opts.workspace}`, `run cpfs mount ${opts.workspace} first`)
      }
      const now = Date.now()
      store.meta = { version: STORE_VERSION, workspace: opts.workspace, stack: [1], redo: [], applied: [], branches: [], nextBranch: 1, nextLayer: 2, nextIno: FIRST_INO, createdAt: now }
      const turn: TurnRecord = { layer: 1, openedAt: now }
      await store.db.batch([
        { type: 'put', key: META_KEY, value: encode(store.meta) },
        { type: 'put', key: turnKey(1), value: encode(turn) }
      ], { sync: true })
    }
  }

  /** Damage the write-ahead log showed while opening (tolerated for fsck). */
  readonly walProblems: StoreProblem[] = []

  metaOp (): BatchOp {
    return { type: 'put', key: META_KEY, value: encode(this.meta) }
  }

  async batch (ops: BatchOp[], sync = false): Promise<void> {
    if (ops.length === 0 && !sync) return
    if (!sync) return await this.write(ops, false)
    // Synced batches (sealed turns, rewinds, fsync, plans) are numbered, one after the other,
    // and the number also goes to a file outside LevelDB once the batch is on disk: a store
    // whose LevelDB holds a smaller number has lost synced batches (integrity.ts).
    const n = ++this.syncCount
    const all = [...ops, { type: 'put' as const, key: INTEGRITY_KEY, value: encode(n) }]
    // The pack bytes these batches refer to reach the disk first (packs.ts).
    const p = this.syncChain.then(async () => { await this.packs.sync(); await this.write(all, true) })
    this.syncChain = p.catch(() => {})
    await p
    writeWitness(this, n)
  }

  private async write (ops: BatchOp[], sync: boolean): Promise<void> {
    const upgrade = this.upgradeOp
    this.upgradeOp = null
    if (upgrade && !ops.some(op => op.key === META_KEY)) ops = [upgrade, ...ops]
    try {
      await this.db.batch(ops as any, { sync })
    } catch (err) {
      this.upgradeOp ??= upgrade // LevelDB takes no later write until reopened: the retry carries it
      throw levelError(this.path, err) ?? err
    }
  }

  getSync (key: string): Buffer | undefined {
    try {
      return this.db.getSync(key)
    } catch (err) {
      throw levelError(this.path, err) ?? err
    }
  }

  /** Where a chunk's bytes are in the packs, if they are there. */
  chunkRef (hex: string): ChunkRef | undefined {
    const raw = this.getSync(refKey(hex))
    if (raw === undefined) return undefined
    const ref = decodeStored(this, refKey(hex), () => decodeRef(raw))
    return ref
  }

  /** Does the store hold this chunk (in a pack, or as an older store's LevelDB value)? */
  hasChunk (hex: string): boolean {
    if (this.getSync(refKey(hex)) !== undefined) return true
    return this.meta?.legacyChunks === true && this.getSync(LEGACY_CHUNK_PREFIX + hex) !== undefined
  }

  /**
   * A chunk's stored bytes, unchecked (the caller hashes them), or undefined if the store has
   * none. Read into `into` when it is big enough (Packs.read).
   */
  readChunk (hex: string, into?: Buffer): Buffer | undefined {
    const ref = this.chunkRef(hex)
    if (ref) return this.packs.read(ref, into)
    return this.meta?.legacyChunks === true ? this.getSync(LEGACY_CHUNK_PREFIX + hex) : undefined
  }

  /** Where `cpfs fsck` should be pointed to check this store. */
  workspaceHint (): string {
    return this.meta?.workspace ?? (this.workspace || this.path)
  }

  /** A range of the store; a LevelDB corruption met on the way becomes STORE_CORRUPT. */
  async * entries (range: { gte: string, lt: string }): AsyncGenerator<[string, Buffer]> {
    try {
      for await (const kv of this.db.iterator(range)) yield kv
    } catch (err) {
      throw levelError(this.path, err) ?? err
    }
  }

  /**
   * The ids of every turn record the store holds: the stack's, and those rewound away or set
   * aside (kept until pruned). The hook numbers a session's prompts past all of them, so an id
   * is never given to a second prompt. Records still in the write-ahead log are not seen here:
   * the caller adds the stack's own ids.
   */
  async turnIds (): Promise<string[]> {
    const out: string[] = []
    for await (const [key, raw] of this.entries({ gte: 't', lt: prefixEnd('t') })) {
      const id = decodeStored(this, key, () => decode<TurnRecord>(raw)).id
      if (typeof id === 'string') out.push(id)
    }
    return out
  }

  turnRecord (layer: number): TurnRecord {
    const key = turnKey(layer)
    const raw = this.getSync(key)
    return raw ? decodeStored(this, key, () => decode<TurnRecord>(raw)) : { layer, openedAt: 0 }
  }

  async loadLayer (layer: number): Promise<Map<string, Entry>> {
    const prefix = entryPrefix(layer)
    const out = new Map<string, Entry>()
    for await (const [key, value] of this.entries({ gte: prefix, lt: prefixEnd(prefix) })) {
      out.set(key.slice(prefix.length), decodeStored(this, key, () => decodeEntry(value)))
    }
    return out
  }

  async loadBase (): Promise<Map<string, Entry>> {
    const out = new Map<string, Entry>()
    for await (const [key, value] of this.entries({ gte: 'b', lt: prefixEnd('b') })) {
      out.set(key.slice(1), decodeStored(this, key, () => decodeEntry(value)))
    }
    return out
  }

  async loadFingerprints (): Promise<Map<string, Fingerprint>> {
    const out = new Map<string, Fingerprint>()
    const prefix = FINGERPRINT_PREFIX
    for await (const [key, value] of this.entries({ gte: prefix, lt: prefixEnd(prefix) })) {
      out.set(key.slice(prefix.length), decodeStored(this, key, () => storedFingerprint(decode(value))))
    }
    return out
  }

  fingerprintOp (path: string, f: Fingerprint | null): BatchOp {
    return f ? { type: 'put', key: fingerprintKey(path), value: encode(f) } : { type: 'del', key: fingerprintKey(path) }
  }

  baseOp (path: string, e: Entry): BatchOp {
    return { type: 'put', key: baseKey(path), value: encodeEntry(e) }
  }

  allocIno (): number {
    return this.meta.nextIno++
  }

  /**
   * LevelDB takes no write after one that failed (a full disk): its background error stays
   * until the database is opened again. Reopen it in place (same object, path and options);
   * what its own log holds is recovered, the data already in its tables is untouched.
   */
  async reopen (): Promise<void> {
    if (this.db.status === 'open') await this.db.close()
    await this.db.open({ createIfMissing: false })
  }

  async close (): Promise<void> {
    if (this.db.status === 'open') await this.db.close()
    this.wal?.close()
    this.packs?.close()
    makePrivate(this.path) // tables and logs LevelDB created while open
    closeWitness(this)
  }
}

/** Decode a stored record; one that does not decode is damage, named by its key. */
