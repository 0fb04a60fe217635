// cpfs pull: the remote's turns into this workspace's history, never over it. Whatever the
// remote has that this store lacks arrives as a branch (`pulled from …`): every object
// checked against its name first, then the layers, chunks and branch in one synced batch.
// When this workspace has nothing of its own past what the remote holds (its head turn empty,
// its other turns the remote's), the library then moves the head onto that branch, as `cpfs
// redo bN` does (remote-api.ts): a fast-forward. Otherwise the branch waits for `cpfs merge`.
import { CpfsError } from '../errors.js'
import type { Session } from '../session/session.js'
import { ChunkStore, hexName } from '../store/chunks.js'
import { decodeEntry, encode } from '../store/codec.js'
import type { Branch } from '../store/branches.js'
import { META_KEY, processKey, type BatchOp } from '../store/keys.js'
import { phase } from '../progress.js'
import { ChunkIndex } from './chunk-index.js'
import { adoptHead, cacheDir, lineageOf, locationOf, noteSyncedHead, syncedHead, type Remote } from './config.js'
import { fetchPack, fetchTrees } from './fetch.js'
import { checkTrees, recordsHash, refName, refTrees, treeHash, type RemoteLayer, type RemoteRef } from './objects.js'
import { readRef } from './refs.js'
import { Bucket } from './s3.js'
import { takeSnapshot, type LocalSnapshot } from './snapshot.js'
import './lazy.js'
import { fetchRemoteChunks, type Filled } from './fill.js'
import { importLayers } from './layers.js'

export interface PullResult {
  remote: string
  url: string
  /** The branch the remote's head line arrived as (bN), or null when nothing was new. */
  branch: string | null
  /** Turns and branches that were new here. */
  layers: number
  chunks: number
  bytes: number
  /** This workspace had nothing of its own past the remote's turns: the head moves onto the branch. */
  fastForward: boolean
  /** With full: the chunks of a lazy clone's older turns fetched into the store (fill.ts). */
  filled: Filled
  requests: { get: number, list: number }
}

/** Chunk bytes held before they go to the store's packs. */
const SPILL_BYTES = 32 * 1024 * 1024

export async function pullHistory (session: Session, remote: Remote, opts: { env?: Record<string, string>, full?: boolean } = {}): Promise<PullResult> {
  const bucket = new Bucket({ ...locationOf(remote), ...(opts.env !== undefined ? { env: opts.env } : {}) })
  let r: PullResult
  try {
    r = await pull(session, remote, bucket)
  } finally {
    bucket.destroy()
  }
  if (opts.full === true) r.filled = await fetchRemoteChunks(session, opts.env)
  return r
}

async function pull (session: Session, remote: Remote, bucket: Bucket): Promise<PullResult> {
  const storePath = session.store.path
  const cur = await readRef(bucket, remote.as)
  if (cur === null) throw new CpfsError('REMOTE_NO_WORKSPACE', `no workspace ${remote.as} at ${bucket.where()}`, `cpfs push ${remote.name} sends this one`)
  const ref = cur.ref
  if (ref.lineage !== lineageOf(storePath)) {
    throw new CpfsError('REMOTE_OTHER_HISTORY', `${bucket.where(refName(remote.as))} holds another workspace's history (pushed from ${ref.host}:${ref.from})`, `clone it instead: cpfs clone ${bucket.where(`${remote.as}`).replace(/\/$/, '')} DIR`)
  }
  // Which of the remote's trees this store has: a layer's tree is the hash of its records.
  const snap = await takeSnapshot(session)
  const local = new Map<string, number>()
  for (const [id, layer] of snap.layers) local.set(treeHash(layer), id)
  const result = (branch: string | null, layers: number, chunks: number, bytes: number, fastForward: boolean): PullResult =>
    ({ remote: remote.name, url: bucket.where(`workspaces/${remote.as}`), branch, layers, chunks, bytes, fastForward, filled: { chunks: 0, bytes: 0 }, requests: { get: bucket.counts.get, list: bucket.counts.list } })
  const wanted = [...refTrees(ref)].filter(t => t !== ref.root && !local.has(t))
  if (wanted.length === 0) return result(null, 0, 0, 0, false)
  const trees = await fetchTrees(bucket, wanted) as Map<string, RemoteLayer>
  checkTrees(ref, trees)
  const index = await ChunkIndex.load(bucket, cacheDir(storePath, bucket.loc))
  // Into the store, in one exclusive step of the session: the chunks first, then the layers
  // and branches in one synced batch. A damaged or missing pack stops the pull before that
  // batch: what was written is unreferenced.
  return await session.exclusive(async () => {
    const { need, packs } = neededPacks(session, bucket, trees, index)
    const got = await fetchChunks(session, bucket, packs, need)
    const idOf = new Map(local)
    const ops = importLayers(session.store.meta, trees, idOf)
    for (const [id, raw] of ref.processes) if (session.store.getSync(processKey(id)) === undefined) ops.push({ type: 'put', key: processKey(id), value: raw })
    const head = ref.stack.map(h => idOf.get(h)!)
    const added = await addBranches(session, ref, idOf, head, ops, `pulled from ${bucket.where(`workspaces/${remote.as}`)} (pushed from ${ref.host} at ${new Date(ref.pushedAt).toISOString()})`)
    const headBranch = added.find(b => b.stack === head)
    const fastForward = headBranch !== undefined && nothingOwn(snap, head, syncedHead(storePath, bucket.loc))
    if (fastForward) noteSyncedHead(storePath, bucket.loc, recordsHash(trees.get(ref.stack[ref.stack.length - 1])!))
    if (headBranch !== undefined) adoptHead(storePath, ref.head, head[head.length - 1], ref.stack[ref.stack.length - 1])
    return result(headBranch === undefined ? (added[0] ? `b${added[0].n}` : null) : `b${headBranch.n}`, trees.size, got.chunks, got.bytes, fastForward)
  })
}

/**
 * The chunks the new layers need that this store lacks, and the packs that hold them. A chunk
 * the store has is pinned (the head may be deleting it: nothing the pulled records use goes).
 */
function neededPacks (session: Session, bucket: Bucket, trees: Map<string, RemoteLayer>, index: ChunkIndex): { need: Set<string>, packs: Set<string> } {
  const need = new Set<string>()
  for (const t of trees.values()) {
    for (const [, raw] of t.records) {
      const e = decodeEntry(raw)
      if (e.kind === 'f') for (const r of e.chunks.values()) if (r && !session.chunks.pin(hexName(r))) need.add(hexName(r))
    }
  }
  const packs = new Set<string>()
  for (const hex of need) {
    const place = index.place(hex)
    if (place === undefined) throw new CpfsError('REMOTE_MISSING', `chunk ${hex} of this history is in no pack on ${bucket.where()}`, 'nothing was changed here; push again from a machine that has this history')
    packs.add(place.pack)
  }
  return { need, packs }
}

/**
 * The needed chunks, each checked as its pack arrives, through the session's own chunk store:
 * its persister writes them as they come (memory holds at most SPILL_BYTES of them) and
 * before the batch that refers to them.
 */
async function fetchChunks (session: Session, bucket: Bucket, packs: Set<string>, need: Set<string>): Promise<{ chunks: number, bytes: number }> {
  const cs: ChunkStore = session.chunks
  const fetched = new Set<string>()
  let bytes = 0
  const getting = phase('fetching data', 'packs', packs.size)
  for (const pack of packs) {
    await fetchPack(bucket, pack, hex => need.has(hex) && !fetched.has(hex), (hash, data) => {
      const hex = hash.toString('hex')
      fetched.add(hex)
      if (!cs.pin(hex)) cs.put(data)
      bytes += data.length
    })
    if (cs.pendingBytes() >= SPILL_BYTES) await session.persister.flushAll(false)
    getting.item()
  }
  getting.end()
  const lost = [...need].filter(hex => !fetched.has(hex))
  if (lost.length > 0) throw new CpfsError('REMOTE_MISSING', `${lost.length} chunk${lost.length === 1 ? '' : 's'} of this history ${lost.length === 1 ? 'is' : 'are'} missing from the packs on ${bucket.where()} (${lost[0]}…)`, 'nothing was changed here; push again from a machine that has this history')
  await session.persister.flushAll(false)
  return { chunks: fetched.size, bytes }
}

/**
 * The remote's stack and branches that this store does not hold yet become branches: written
 * with the layers (`ops`, one synced batch), and into the live metadata once that batch has
 * landed — nothing refers to layers that are not there. A batch of the mount encoded meanwhile
 * carries the metadata without them and may land after: once those have landed, the metadata
 * is written again (as importSandbox does).
 */
async function addBranches (session: Session, ref: RemoteRef, idOf: Map<string, number>, head: number[], ops: BatchOp[], what: string): Promise<Branch[]> {
  const store = session.store
  const meta = store.meta
  const ids = (names: string[]): number[] => names.map(h => idOf.get(h)!)
  const kept = [meta.stack, ...(meta.branches ?? []).map(b => b.stack)]
  const known = (stack: number[]): boolean => kept.some(s => s.length === stack.length && s.every((x, i) => x === stack[i]))
  const added: Branch[] = []
  let n = meta.nextBranch ?? 1
  if (!known(head)) added.push({ n: n++, stack: head, leftAt: Date.now(), by: 'pull', what })
  for (const b of ref.branches) {
    const s = ids(b.stack)
    if (!known(s) && !added.some(a => a.stack.join() === s.join())) added.push({ n: n++, stack: s, leftAt: b.leftAt, by: 'pull', what: `${what}: their b${b.n} (${b.by}${b.what ? `: ${b.what}` : ''})` })
  }
  const parts = { ...meta.parts }
  for (const [t, ps] of Object.entries(ref.parts)) parts[String(idOf.get(t)!)] = ids(ps)
  const after = { ...meta, branches: [...meta.branches ?? [], ...added], nextBranch: n, ...(Object.keys(parts).length ? { parts } : {}) }
  ops.push({ type: 'put', key: META_KEY, value: encode(after) })
  await store.batch(ops, true)
  meta.branches = after.branches
  meta.nextBranch = n
  if (after.parts !== undefined) meta.parts = after.parts
  session.persister.metaChanged()
  await session.persister.flushAll(false)
  await store.batch([store.metaOp()], true)
  return added
}

/**
 * A fast-forward: past the turns it shares with the remote's, this workspace holds nothing of
 * its own — its later layers are empty, or the remote's head turn as it was when the two last
 * matched (`synced`: the remote's head turn has gone on from there).
 */
function nothingOwn (snap: LocalSnapshot, head: number[], synced: string | undefined): boolean {
  const mine = snap.stack
  let shared = 0
  while (shared < mine.length && shared < head.length && mine[shared] === head[shared]) shared++
  return mine.slice(shared).every(id => {
    const layer = snap.layers.get(id)
    return layer !== undefined && (layer.records.length === 0 || recordsHash(layer) === synced) && snap.parts[id] === undefined
  })
}
