// cpfs push: send the workspace's history to a remote. Order: packs, then the index of this
// push's packs, then the trees, then the ref by compare-and-swap — the ref is the commit
// point. A push killed anywhere before the ref leaves objects no ref reaches (remote gc takes
// them after its grace period); the ref still names the last complete push. Two machines
// pushing the same workspace: the second one's swap fails, and it is told to pull first.
import { hostname } from 'node:os'
import { CpfsError } from '../errors.js'
import type { Session } from '../session/session.js'
import { decodeEntry } from '../store/codec.js'
import { phase } from '../progress.js'
import { ChunkIndex, inBatches } from './chunk-index.js'
import { cacheDir, isOwnHead, knownRoot, lineageOf, locationOf, noteRoot, noteSyncedHead, storeIdOf, type Remote, type RootInfo } from './config.js'
import { REMOTE_FORMAT, encodeRef, indexName, packName, recordsHash, refName, refTrees, sealObject, treeName, type RemoteRef } from './objects.js'
import { markedObjects, readMarks } from './marks.js'
import { Packer } from './packer.js'
import { buildRoot } from './root.js'
import { readRef } from './refs.js'
import { Bucket } from './s3.js'
import { takeSnapshot, type LocalSnapshot } from './snapshot.js'

export interface PushResult {
  remote: string
  /** Where the workspace's ref is: s3://BUCKET/PREFIX/workspaces/NAME */
  url: string
  turns: number
  branches: number
  /** Nothing was sent: the remote had this history already. */
  upToDate: boolean
  trees: number
  chunks: number
  /** Bytes of chunk data sent, before and after compression. */
  bytes: number
  storedBytes: number
  requests: { put: number, get: number, list: number, head: number }
}

export async function pushHistory (session: Session, remote: Remote, opts: { force?: boolean, env?: Record<string, string> } = {}): Promise<PushResult> {
  const loc = { ...locationOf(remote), ...(opts.env !== undefined ? { env: opts.env } : {}) }
  const bucket = new Bucket(loc)
  try {
    return await push(session, remote, bucket, opts)
  } finally {
    bucket.destroy()
  }
}

async function push (session: Session, remote: Remote, bucket: Bucket, opts: { force?: boolean }): Promise<PushResult> {
  const storePath = session.store.path
  const lineage = lineageOf(storePath)
  const current = await readRef(bucket, remote.as)
  if (current !== null && current.ref.lineage !== lineage && opts.force !== true) {
    throw new CpfsError('REMOTE_OTHER_HISTORY', `${bucket.where(refName(remote.as))} holds another workspace's history (pushed from ${current.ref.host}:${current.ref.from})`, `push under another name: cpfs remote rm ${remote.name}, then cpfs remote add ${remote.name} ${remote.url} --as NAME`)
  }
  const snap = await takeSnapshot(session)
  // A gc may have marked objects for deletion: none of them is built on (marks.ts).
  const marked = markedObjects(await readMarks(bucket))
  const index = await ChunkIndex.load(bucket, cacheDir(storePath, bucket.loc), marked)
  const packer = new Packer(bucket, index)
  const reached = new Set<string>()
  const onRemote = current === null ? new Set<string>() : refTrees(current.ref)

  // The root tree (the lower, walked again: see root.ts), sent when the remote lacks it.
  const built = await buildRoot(session, packer, index)
  const rootTree = sealObject(built.root)
  const rootChunks = built.chunks
  let root: RootInfo | undefined = knownRoot(storePath, bucket.loc)
  let rootBody: { hex: string, body: Buffer } | null = null
  if (root === undefined || root.tree !== rootTree.hex || !(onRemote.has(root.tree) || (!marked.has(treeName(root.tree)) && await bucket.exists(treeName(root.tree))))) {
    rootBody = rootTree
    root = { tree: rootTree.hex, packs: [], chunks: rootChunks.size, bytes: built.bytes }
  }

  const { treeOf, bodies } = await packLayers(session, snap, index, packer, onRemote, reached)
  const names = (ids: number[]): string[] => ids.map(id => treeOf.get(id)!)
  const ref: RemoteRef = {
    format: REMOTE_FORMAT,
    lineage,
    pushedAt: Date.now(),
    host: hostname(),
    from: session.workspace,
    root: root.tree,
    head: `${storeIdOf(storePath)}:${snap.stack[snap.stack.length - 1]}`,
    stack: names(snap.stack),
    parts: Object.fromEntries(Object.entries(snap.parts).map(([id, p]) => [treeOf.get(Number(id))!, names(p)])),
    branches: snap.branches.map(b => ({ ...b, stack: names(b.stack) })),
    packs: [],
    indexes: [],
    processes: snap.processes,
    chunks: 0,
    bytes: 0
  }
  if (current !== null && opts.force !== true) refuseIfAhead(storePath, current.ref, ref, snap, remote, bucket)
  const sameAsRemote = current !== null && rootBody === null && bodies.length === 0 && packer.sent.chunks === 0 && sameHistory(current.ref, ref)
  const headRecords = recordsHash(snap.layers.get(snap.stack[snap.stack.length - 1])!)
  if (sameAsRemote) {
    noteSyncedHead(storePath, bucket.loc, headRecords)
    return result(remote, bucket, snap, true, 0, packer)
  }

  const up = phase('uploading', 'objects')
  await packer.finish()
  // Every pack that holds a chunk this ref reaches, and the indexes that say where.
  root.packs = [...packsOf(index, rootChunks)].sort()
  const packs = new Set<string>([...root.packs, ...packsOf(index, reached)])
  ref.packs = [...packs].sort()
  ref.indexes = [...new Set(ref.packs.map(p => index.indexOfPack.get(p)).filter((i): i is string => i !== undefined))].sort()
  ref.chunks = root.chunks + reached.size
  ref.bytes = root.bytes + [...reached].reduce((n, hex) => n + index.place(hex)!.length, 0)
  if (rootBody !== null) bodies.unshift(rootBody)
  await inBatches(bodies, 8, async (t) => { await bucket.put(treeName(t.hex), t.body); up.item() })
  up.end()
  await refuseIfMarked(bucket, ref, current?.ref ?? null, packer, bodies, remote)
  if (!await bucket.swap(refName(remote.as), encodeRef(ref), current?.etag ?? null)) {
    throw new CpfsError('REMOTE_RACE', `another push to ${bucket.where(refName(remote.as))} landed while this one ran`, `run cpfs pull ${remote.name}, then push again (nothing was lost: the objects sent are reused)`)
  }
  if (rootBody !== null) noteRoot(storePath, bucket.loc, root)
  noteSyncedHead(storePath, bucket.loc, headRecords)
  return result(remote, bucket, snap, false, bodies.length, packer)
}

/**
 * The layers: each is a tree named by its content; only the ones the remote lacks are sent,
 * and only the chunks no index names. `reached` collects every chunk the layers hold.
 */
async function packLayers (session: Session, snap: LocalSnapshot, index: ChunkIndex, packer: Packer, onRemote: Set<string>, reached: Set<string>): Promise<{ treeOf: Map<number, string>, bodies: Array<{ hex: string, body: Buffer }> }> {
  const treeOf = new Map<number, string>()
  const bodies: Array<{ hex: string, body: Buffer }> = []
  const sending = phase('packing turns', 'layers', snap.layers.size)
  for (const [id, layer] of snap.layers) {
    const t = sealObject(layer)
    treeOf.set(id, t.hex)
    for (const [, raw] of layer.records) {
      const e = decodeEntry(raw)
      if (e.kind !== 'f') continue
      for (const ref of e.chunks.values()) {
        if (ref === null) continue
        const hex = ref.toString('hex')
        reached.add(hex)
        if (!index.has(hex)) {
          packer.add(ref, session.chunks.get(ref))
          await packer.settle()
        }
      }
    }
    if (!onRemote.has(t.hex)) bodies.push(t)
    sending.item()
  }
  sending.end()
  return { treeOf, bodies }
}

/**
 * Every turn of the remote's must be in this push (its stack or a branch), but the head turn
 * when it is a layer of this store: that one may have changed here since, and this push
 * replaces it. Anything else means another machine pushed: pull first.
 */
function refuseIfAhead (storePath: string, theirs: RemoteRef, ours: RemoteRef, snap: LocalSnapshot, remote: Remote, bucket: Bucket): void {
  const have = refTrees(ours)
  const headTree = theirs.stack[theirs.stack.length - 1]
  const exempt = isOwnHead(storePath, theirs.head, headTree, new Set(snap.layers.keys())) ? headTree : null
  // Every tree the remote's ref reaches — turns, parts, branches — but its root (the lower as
  // the pusher read it: the same files, another machine's inode numbers and owners).
  theirs = { ...theirs, root: ours.root }
  const missing = [...refTrees(theirs)].filter(t => t !== exempt && !have.has(t))
  if (missing.length === 0) return
  throw new CpfsError('REMOTE_AHEAD', `${bucket.where(refName(remote.as))} has ${missing.length} turn${missing.length === 1 ? '' : 's'} or branch layer${missing.length === 1 ? '' : 's'} this workspace does not (pushed from ${theirs.host} at ${new Date(theirs.pushedAt).toISOString()})`, `run cpfs pull ${remote.name} first (their turns become a branch you can merge), then push again; or push --force to replace them`)
}

/**
 * Right before the swap: a gc that ran during this push may have marked an object the new ref
 * reaches that this push did not send and the remote's ref did not reach. It would be deleted
 * one grace period later with the ref pointing at it: refused instead (the next push sends it
 * again, since it skips marked objects).
 */
async function refuseIfMarked (bucket: Bucket, ref: RemoteRef, current: RemoteRef | null, packer: Packer, sent: Array<{ hex: string }>, remote: Remote): Promise<void> {
  const marked = markedObjects(await readMarks(bucket))
  if (marked.size === 0) return
  const mine = new Set([...packer.written.map(p => packName(p.name)), ...sent.map(t => treeName(t.hex))])
  const before = new Set(current === null ? [] : [...current.packs.map(packName), ...current.indexes.map(indexName), ...[...refTrees(current)].map(treeName)])
  const reaches = [...ref.packs.map(packName), ...ref.indexes.map(indexName), ...[...refTrees(ref)].map(treeName)]
  const robbed = reaches.filter(k => marked.has(k) && !mine.has(k) && !before.has(k))
  if (robbed.length === 0) return
  throw new CpfsError('REMOTE_RACE', `a cpfs remote gc marked ${robbed.length} object${robbed.length === 1 ? '' : 's'} this push builds on while it ran (${robbed[0]})`, `run cpfs push ${remote.name} again: it sends them anew`)
}

/** The packs that hold these chunks (each must be in the index by now). */
function packsOf (index: ChunkIndex, chunks: Set<string>): Set<string> {
  const out = new Set<string>()
  for (const hex of chunks) {
    const place = index.place(hex)
    if (place === undefined) throw new CpfsError('REMOTE_FAILED', `chunk ${hex} was sent but no index names it`, 'report this')
    out.add(place.pack)
  }
  return out
}

function sameHistory (a: RemoteRef, b: RemoteRef): boolean {
  return a.root === b.root && JSON.stringify([a.stack, a.parts, a.branches]) === JSON.stringify([b.stack, b.parts, b.branches])
}

function result (remote: Remote, bucket: Bucket, snap: { stack: number[], branches: unknown[] }, upToDate: boolean, trees: number, packer: Packer): PushResult {
  const c = bucket.counts
  return {
    remote: remote.name,
    url: bucket.where(`workspaces/${remote.as}`),
    turns: snap.stack.length,
    branches: snap.branches.length,
    upToDate,
    trees,
    chunks: packer.sent.chunks,
    bytes: packer.sent.raw,
    storedBytes: packer.sent.stored,
    requests: { put: c.put, get: c.get, list: c.list, head: c.head }
  }
}
