// A sandboxed run's work, copied into the workspace's shared store as a branch (issue 23):
// `cpfs exec --sandbox` runs with a store of its own, and `cpfs merge bN` can only merge what
// the shared history holds. The run's own store has already made its layers stand alone
// (sandbox-branch.ts: no `src` or `redirect` into the real directory, a `found` layer pinning
// what the run found), so this is a copy from store to store: chunks one by one, entries with
// fresh layer ids and fresh inode numbers, one synced batch. A failure leaves the shared
// store as it was (only unreferenced pack bytes, which garbage collection takes, and gaps in
// the layer and inode counters).
import { CpfsError, isCpfsError } from '../errors.js'
import { encode, encodeEntry } from '../store/codec.js'
import { ChunkStore, hashChunk, hexName } from '../store/chunks.js'
import { FIRST_INO, Store, type StoreMeta, type TurnRecord } from '../store/store.js'
import { inoKey, inoOfKey, isInoKey, type Entry } from '../store/entries.js'
import { META_KEY, entryKey, turnKey, type BatchOp } from '../store/keys.js'
import { keptStacks, sameStack, type Branch } from '../store/branches.js'
import type { Session } from '../session/session.js'

/** What a sandboxed run hands over (sandbox-branch.ts writes it; the daemon gets it as its command's arguments). */
export interface SandboxRun {
  /** The run's own store (in its state dir). */
  store: string
  /** The command line: the branch's `what`. */
  what: string
  /** When the run started (ms). */
  startedAt: number
  /** The shared store's layers the real directory held when the run started. */
  applied: number[]
  /** The run's layer pinning what it found at each path it changed (in its own store). */
  found: number
  /** The run's turns, oldest first: each turn's layer and its parts (steps), in its own store. */
  turns: Array<{ layer: number, parts: number[] }>
  /** Paths whose original was not kept and changed in the real directory during the run. */
  unsure: string[]
}

export interface ImportResult {
  /** The new branch (bN), or null when the run changed nothing. */
  branch: string | null
  unsure: string[]
}

/** Chunk bytes held before they are appended to a pack: the copy's memory stays bounded. */
const SPILL_BYTES = 32 * 1024 * 1024

/** The daemon's side: the mount's own store gets the branch, ordered with the mount's writes. */
export async function importSandbox (session: Session, run: SandboxRun): Promise<ImportResult> {
  return await session.exclusive(async () => {
    // What the mount has queued lands first: the branch's batch comes after it.
    await session.persister.flushAll(false)
    const r = await importFromStore(session.store, run, session)
    // A batch of the mount encoded during the import carries the metadata without the branch,
    // and may land after it: once those have landed, the metadata is written again, with it.
    session.persister.metaChanged()
    if (r.branch !== null) {
      await session.persister.flushAll(false)
      await session.store.batch([session.store.metaOp()], true)
    }
    return r
  })
}

/**
 * Copy the run into `target` (the shared store, open in this process: the daemon's, or one an
 * offline command opened) as a branch: stack = [...applied, found, ...turns], mergeBase =
 * applied.length + 1.
 */
export async function importFromStore (target: Store, run: SandboxRun, live?: Session): Promise<ImportResult> {
  if (run.turns.length === 0) return { branch: null, unsure: [] }
  const applied = baseNow(target.meta, run.applied)
  const source = await openSource(run.store, target.meta.workspace)
  try {
    return await copy(source, target, { ...run, applied }, live)
  } finally {
    await source.close()
  }
}

/**
 * The layers the run started from, as the store holds them now: retention may have merged the
 * oldest of them into one layer during the run (prune.ts squashOldest), which every stack that
 * held them starts with now.
 */
function baseNow (meta: StoreMeta, applied: number[]): number[] {
  const kept = new Set(keptStacks(meta).flat())
  const k = applied.findIndex(id => kept.has(id))
  const merged = k === -1 ? applied.length : k
  if (merged === 0 && applied.every(id => kept.has(id))) return applied
  const rest = applied.slice(merged)
  // Squashing works on the head's line: its first layer is the merged one.
  const st = meta.stack
  if (merged >= 2 && rest.every(id => kept.has(id)) && st.length > rest.length && sameStack(st.slice(1, 1 + rest.length), rest) && !applied.includes(st[0])) return [st[0], ...rest]
  const gone = applied.filter(id => !kept.has(id))
  throw new CpfsError('IMPORT_BASE_GONE', `the turns the real directory held when the sandboxed run started are no longer in the history (layers ${gone.join(', ')}; pruned meanwhile?)`, 'the run\'s store is kept: see the path printed above')
}

async function openSource (path: string, workspace: string): Promise<Store> {
  try {
    return await Store.open(path, { workspace, create: false })
  } catch (err) {
    if (isCpfsError(err)) throw new CpfsError('IMPORT_FAILED', `cannot open the sandboxed run's store ${path}: ${err.message}`, err.hint ?? '')
    throw err
  }
}

/**
 * `live`: the mount's session, when its daemon imports. Its head may hold the same bytes
 * (the run and the agent outside wrote the same thing), as chunks it deletes again when the
 * file goes before the turn is sealed: every chunk the branch uses is pinned in the session's
 * chunk store, or put there (behind any deletion under way) and written by its persister
 * before the branch's batch.
 */
async function copy (source: Store, target: Store, run: SandboxRun, live?: Session): Promise<ImportResult> {
  const chunks = new ChunkStore(target, 0)
  const ops: BatchOp[] = []
  const hexes: string[] = []
  const seen = new Set<string>()
  const inos = new Map<number, number>()
  // Numbers are taken from the live counters now (a mount allocates from them meanwhile); a
  // failure only leaves them unused.
  const fresh = (ino: number): number => {
    let n = inos.get(ino)
    if (n === undefined) inos.set(ino, n = target.allocIno())
    return n
  }
  const layerOf = new Map<number, number>()
  const newLayer = (old: number): number => {
    const id = target.meta.nextLayer++
    layerOf.set(old, id)
    return id
  }

  const copyLayer = async (old: number, rec: TurnRecord & { prompt?: string, summary?: string }): Promise<number> => {
    const id = newLayer(old)
    const out: TurnRecord & { prompt?: string, summary?: string } = { layer: id, openedAt: rec.openedAt, sealedAt: rec.sealedAt ?? rec.openedAt }
    if (rec.prompt !== undefined) out.prompt = rec.prompt
    if (rec.message !== undefined) out.message = rec.message
    if (rec.summary !== undefined) out.summary = rec.summary
    ops.push({ type: 'put', key: turnKey(id), value: encode(out) })
    for (const [key, e] of await source.loadLayer(old)) {
      if (e.kind === 'f') {
        for (const ref of e.chunks.values()) {
          if (ref) copyChunk(source, target, live?.chunks ?? chunks, ref, seen)
          if (live && live.chunks.pendingBytes() >= SPILL_BYTES) await live.persister.flushAll(false)
          if (chunks.pendingBytes() >= SPILL_BYTES) hexes.push(...chunks.drain(ops).hexes)
        }
        if (e.src !== undefined) throw new CpfsError('IMPORT_FAILED', `the sandboxed run's ${key} still depends on the real directory`, 'report this: the run\'s layers should stand alone')
      }
      if (e.kind === 'd' && e.redirect !== undefined) throw new CpfsError('IMPORT_FAILED', `the sandboxed run's ${key} still depends on the real directory`, 'report this: the run\'s layers should stand alone')
      const k = isInoKey(key) ? inoKey(fresh(inoOfKey(key))) : key
      ops.push({ type: 'put', key: entryKey(id, k), value: encodeEntry(renumber(e, isInoKey(key), fresh)) })
    }
    return id
  }

  const found = await copyLayer(run.found, { layer: run.found, openedAt: run.startedAt, sealedAt: run.startedAt, prompt: `what the sandboxed run found (its merge base): ${run.what}` })
  const turns: number[] = []
  const parts: Record<string, number[]> = {}
  for (const t of run.turns) {
    const ps: number[] = []
    for (const p of t.parts) ps.push(await copyLayer(p, source.turnRecord(p)))
    const id = await copyLayer(t.layer, source.turnRecord(t.layer))
    if (ps.length) parts[id] = ps
    turns.push(id)
  }
  // The chunks put into the live session's store are written before the batch that refers to them.
  if (live) await live.persister.flushAll(false)
  hexes.push(...chunks.drain(ops).hexes)

  // The branch goes into the stored metadata with the layers (one batch), and into the live
  // metadata only once that batch has landed: nothing refers to layers that are not there.
  const meta = target.meta
  const n = meta.nextBranch ?? (meta.branches ?? []).reduce((m, b) => Math.max(m, b.n + 1), 1)
  const branch: Branch = { n, stack: [...run.applied, found, ...turns], leftAt: Date.now(), by: 'sandbox', what: run.what, mergeBase: run.applied.length + 1 }
  const unsure = [...new Set(run.unsure)].sort()
  if (unsure.length) branch.unsure = unsure
  const after: StoreMeta = { ...meta, branches: [...meta.branches ?? [], branch], nextBranch: n + 1 }
  if (Object.keys(parts).length) after.parts = { ...meta.parts, ...parts }
  ops.push({ type: 'put', key: META_KEY, value: encode(after) })
  try {
    await target.batch(ops, true)
  } finally {
    chunks.landed(hexes)
  }
  meta.branches = [...meta.branches ?? [], branch]
  meta.nextBranch = Math.max(meta.nextBranch ?? 0, n + 1)
  if (after.parts) meta.parts = { ...meta.parts, ...parts }
  return { branch: `b${n}`, unsure }
}

/** A chunk of the run's store into the target's (checked against its name on the way). */
function copyChunk (source: Store, target: Store, chunks: ChunkStore, ref: Buffer, seen: Set<string>): void {
  const hex = hexName(ref)
  if (seen.has(hex)) return
  seen.add(hex)
  if (chunks.pin(hex)) return
  const bytes = source.readChunk(hex)
  if (bytes === undefined || !hashChunk(bytes).equals(ref)) {
    throw new CpfsError('IMPORT_FAILED', `chunk ${hex} of the sandboxed run's store ${source.path} is ${bytes === undefined ? 'missing' : 'damaged'}`, `run cpfs fsck on that store's workspace to see what is lost`)
  }
  chunks.put(bytes)
}

/**
 * An entry with the run's own inode numbers replaced: cpfs's numbers (2^52 and up) and inode
 * records' keys are per store, and the shared store hands out its own. Real files keep their
 * real inode numbers (the shared store's lower is the same real directory).
 */
function renumber (e: Entry, record: boolean, fresh: (ino: number) => number): Entry {
  if (e.kind === 'w') return e
  if (e.kind === 'h') return { ...e, ino: fresh(e.ino) }
  if (!record && e.ino < FIRST_INO) return e
  return { ...e, ino: fresh(e.ino) }
}
