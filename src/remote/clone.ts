// cpfs clone s3://BUCKET/PREFIX/WORKSPACE DIR: a new workspace at DIR with the pushed
// history — every turn and branch, the same turn numbers — and the head view in DIR.
//
// The store is made first: every chunk the ref reaches (each checked against its name on the
// way in), the layers with fresh local ids, and the root tree as base entries, so that the
// lower is exactly what the pushing workspace started from. The head view is then written
// into DIR through the fork path (a hidden sibling, verified byte-exact, renamed into place),
// and only then are the base entries cut down to what DIR does not hold as the root had it
// and the store told that DIR holds the head — one synced batch. Killed before that batch,
// the clone is not usable and says so (its store has nothing applied); DIR is removed and
// made again by running the clone again.
import * as fs from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { CpfsError } from '../errors.js'
import { checkDest, writeViewInto } from '../plans/fork.js'
import { viewOf } from '../plans/views.js'
import { Session } from '../session/session.js'
import { ChunkStore, hexName } from '../store/chunks.js'
import { decodeEntry, encode } from '../store/codec.js'
import { Store, type StoreMeta } from '../store/store.js'
import type { Entry } from '../store/entries.js'
import { META_KEY, baseKey, processKey, remoteChunkKey, turnKey, type BatchOp } from '../store/keys.js'
import { locateWorkspace, register, workspaceDir } from '../store/locate.js'
import { join as joinPath } from '../paths/paths.js'
import { phase } from '../progress.js'
import type { PlanSummary } from '../plans/finish.js'
import { addRemote, adoptHead, cacheDir, noteRoot, noteSyncedHead, setLazySource, setLineage } from './config.js'
import { fetchChunks, fetchPack, fetchTrees } from './fetch.js'
import { ChunkIndex, encodePlace, type ChunkPlace } from './chunk-index.js'
import { importLayers, noteIno } from './layers.js'
import type { View } from '../overlay/view.js'
import { Bucket, endpointOf, parseS3Url } from './s3.js'
import { fingerprint, saveCache } from './root.js'
import { Lower } from '../real/lower.js'
import { checkTrees, checkWorkspaceName, recordsHash, refTrees, type RemoteLayer, type RemoteRef, type RemoteRoot } from './objects.js'
import { readRef } from './refs.js'
import './lazy.js'

export interface CloneResult {
  dir: string
  /** The remote it was cloned from, added to the clone as `origin`. */
  remote: string
  url: string
  turns: number
  branches: number
  chunks: number
  bytes: number
  /** Chunks of older turns left on the remote, fetched when read (0 with --full). */
  remoteChunks: number
  summary: PlanSummary
  requests: { get: number, list: number }
}

/** Chunk bytes held before they are appended to the store's packs. */
const SPILL_BYTES = 32 * 1024 * 1024

export interface CloneOptions {
  endpoint?: string
  /** Fetch every turn's data now; without it, only the head view's (the rest on demand, lazy.ts). */
  full?: boolean
}

export async function cloneWorkspace (url: string, destArg: string, opts: CloneOptions = {}): Promise<CloneResult> {
  const { bucket: bucketName, prefix: full } = parseS3Url(url)
  const cut = full.lastIndexOf('/')
  const name = checkWorkspaceName(full.slice(cut + 1))
  const prefix = cut === -1 ? '' : full.slice(0, cut)
  if (full === '') throw new CpfsError('REMOTE_URL', `${url} names no workspace`, 'write s3://BUCKET/PREFIX/WORKSPACE (cpfs remote ls s3://BUCKET/PREFIX lists them)')
  const dest = resolve(destArg)
  checkCloneDest(dest)
  const bucket = new Bucket({ bucket: bucketName, prefix, ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}) })
  try {
    const cur = await readRef(bucket, name)
    if (cur === null) throw new CpfsError('REMOTE_NO_WORKSPACE', `no workspace ${name} at ${bucket.where()}`, `cpfs remote ls s3://${bucketName}${prefix ? '/' + prefix : ''} lists the workspaces there`)
    const ref = cur.ref
    const trees = await fetchTrees(bucket, refTrees(ref))
    checkTrees(ref, trees)
    // The clone's own location: never CPFS_STATE_DIR (a sandboxed run's), never a store that
    // exists already (checked before anything is made, so a failure removes only what this
    // clone made).
    const realDest = join(fs.realpathSync(dirname(dest)), basename(dest))
    const loc = locateWorkspace(realDest, false, undefined, workspaceDir(realDest))
    if (fs.existsSync(loc.dir)) throw new CpfsError('CLONE_DEST', `${dest} already has cpfs history (${loc.dir})`, `remove ${loc.dir} or clone elsewhere`)
    const createdDir = !fs.existsSync(dest)
    if (createdDir) fs.mkdirSync(dest)
    try {
      const remoteUrl = `s3://${bucketName}${prefix ? '/' + prefix : ''}`
      const got = await makeStore(loc.store, realDest, bucket, ref, trees, opts.full === true)
      if (got.places !== undefined) setLazySource(loc.store, { url: remoteUrl, ...(endpointOf(opts.endpoint) !== undefined ? { endpoint: endpointOf(opts.endpoint) } : {}) })
      // What the clone continues (lineage, origin, the head it adopted) is written before the
      // head view is: killed after it, the clone is the remote's history, not another one.
      setLineage(loc.store, ref.lineage)
      addRemote(loc.store, { name: 'origin', url: remoteUrl, as: name, ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}) })
      noteRoot(loc.store, bucket.loc, { tree: ref.root, packs: ref.packs, chunks: 0, bytes: 0 })
      const headTree = ref.stack[ref.stack.length - 1]
      noteSyncedHead(loc.store, bucket.loc, recordsHash(trees.get(headTree) as RemoteLayer))
      // The remote's head turn is this clone's head now: its pushes may replace it.
      adoptHead(loc.store, ref.head, got.head, headTree)
      register(loc)
      const head = await writeHead(loc.store, realDest, trees.get(ref.root) as RemoteRoot, bucket, got.places)
      const c = bucket.counts
      return { dir: realDest, remote: 'origin', url: bucket.where(`workspaces/${name}`), turns: ref.stack.length, branches: ref.branches.length, chunks: got.chunks + head.chunks, bytes: got.bytes + head.bytes, remoteChunks: head.remoteChunks, summary: head.summary, requests: { get: c.get, list: c.list } }
    } catch (err) {
      // Nothing of the clone is kept: its state directory and store are its own (checked
      // above), and DIR was empty or absent.
      fs.rmSync(loc.dir, { recursive: true, force: true })
      if (loc.store !== join(loc.dir, 'store')) fs.rmSync(loc.store, { recursive: true, force: true })
      if (createdDir) fs.rmSync(dest, { recursive: true, force: true })
      else for (const n of fs.readdirSync(dest)) fs.rmSync(join(dest, n), { recursive: true, force: true })
      throw err
    }
  } finally {
    bucket.destroy()
  }
}

/** As a fork's destination (absent or empty, its parent there), and no earlier history at that path. */
function checkCloneDest (dest: string): void {
  checkDest(dest, undefined, 'CLONE_DEST')
  const real = join(fs.realpathSync(dirname(dest)), basename(dest))
  if (fs.existsSync(join(workspaceDir(real), 'workspace.json'))) {
    throw new CpfsError('CLONE_DEST', `${dest} already has cpfs history from an earlier directory at that path`, `remove ${workspaceDir(real)} or clone elsewhere`)
  }
}

/**
 * The new store: layers, base entries (the whole root tree), nothing applied yet, and the
 * chunks — all of them (`full`), or only where the remote has each (R<hex>; the head view's
 * are fetched by writeHead, the rest when read).
 */
async function makeStore (storePath: string, workspace: string, bucket: Bucket, ref: RemoteRef, trees: Map<string, RemoteLayer | RemoteRoot>, full: boolean): Promise<GotChunks & { head: number }> {
  if (fs.existsSync(join(storePath, 'db'))) throw new CpfsError('CLONE_DEST', `a store exists already at ${storePath}`, 'remove it, or clone elsewhere')
  const store = await Store.open(storePath, { workspace, create: true })
  try {
    const { ops, need, idOf } = historyOps(store, ref, trees)
    const got = full ? await fetchAll(store, bucket, ref, need, ops) : await placesOf(storePath, bucket, need)
    const ids = (names: string[]): number[] => names.map(h => idOf.get(h)!)
    const meta: StoreMeta = {
      ...store.meta,
      stack: ids(ref.stack),
      applied: [],
      parts: Object.fromEntries(Object.entries(ref.parts).map(([t, ps]) => [String(idOf.get(t)!), ids(ps)])),
      branches: ref.branches.map(b => ({ ...b, by: b.by as any, stack: ids(b.stack) })),
      nextBranch: ref.branches.reduce((m, b) => Math.max(m, b.n + 1), 1)
    }
    if (Object.keys(meta.parts!).length === 0) delete meta.parts
    ops.push({ type: 'put', key: META_KEY, value: encode(meta) })
    await store.batch(ops, true)
    got.landed()
    return { ...got, head: meta.stack[meta.stack.length - 1] }
  } finally {
    await store.close()
  }
}

/** The records of the pushed history (base entries, turns, layers, processes), and the chunks they name. */
function historyOps (store: Store, ref: RemoteRef, trees: Map<string, RemoteLayer | RemoteRoot>): { ops: BatchOp[], need: Set<string>, idOf: Map<string, number> } {
  const ops: BatchOp[] = [{ type: 'del', key: turnKey(1) }]
  // Which chunks the history needs (a pack may hold other workspaces' chunks too).
  const need = new Set<string>()
  const noteChunks = (e: Entry): void => {
    if (e.kind === 'f') for (const r of e.chunks.values()) if (r) need.add(r.toString('hex'))
  }
  const root = trees.get(ref.root) as RemoteRoot
  for (const [p, raw] of root.entries) {
    noteChunks(noteIno(store.meta, p, raw))
    ops.push({ type: 'put', key: baseKey(p), value: raw })
  }
  const idOf = new Map<string, number>()
  ops.push(...importLayers(store.meta, trees, idOf, noteChunks))
  for (const [id, raw] of ref.processes) ops.push({ type: 'put', key: processKey(id), value: raw })
  return { ops, need, idOf }
}

interface GotChunks {
  chunks: number
  bytes: number
  /** Lazy: where the remote has each chunk the history names (none is in the store yet). */
  places?: Map<string, ChunkPlace>
  landed: () => void
}

/** --full: every chunk the history needs, from the packs its ref names (each checked on the way in). */
async function fetchAll (store: Store, bucket: Bucket, ref: RemoteRef, need: Set<string>, ops: BatchOp[]): Promise<GotChunks> {
  const chunks = new ChunkStore(store, 0)
  const hexes: string[] = []
  let bytes = 0
  const getting = phase('fetching data', 'packs', ref.packs.length)
  for (const pack of ref.packs) {
    await fetchPack(bucket, pack, hex => need.has(hex), (hash, data) => {
      chunks.put(data)
      bytes += data.length
      need.delete(hash.toString('hex'))
    })
    if (chunks.pendingBytes() >= SPILL_BYTES) hexes.push(...chunks.drain(ops).hexes)
    getting.item()
  }
  getting.end()
  const lost = [...need]
  if (lost.length > 0) throw lostChunks(lost)
  hexes.push(...chunks.drain(ops).hexes)
  return { chunks: hexes.length, bytes, landed: () => chunks.landed(hexes) }
}

/**
 * Lazy: where the remote has each chunk (its index objects). writeHead fetches the head view's
 * and records the others' places (R<hex>); nothing reads a chunk before.
 */
async function placesOf (storePath: string, bucket: Bucket, need: Set<string>): Promise<GotChunks> {
  const index = await ChunkIndex.load(bucket, cacheDir(storePath, bucket.loc))
  const places = new Map<string, ChunkPlace>()
  const lost: string[] = []
  for (const hex of need) {
    const p = index.place(hex)
    if (p === undefined) lost.push(hex)
    else places.set(hex, p)
  }
  if (lost.length > 0) throw lostChunks(lost)
  return { chunks: 0, bytes: 0, places, landed: () => {} }
}

function lostChunks (lost: string[]): CpfsError {
  return new CpfsError('REMOTE_MISSING', `${lost.length} chunk${lost.length === 1 ? '' : 's'} of this history ${lost.length === 1 ? 'is' : 'are'} in no pack the remote holds (${lost[0]}…)`, 'nothing was changed here; push again from a machine that has this history')
}

/**
 * A lazy clone's head view, fetched into the store's packs before it is written into DIR: a
 * ranged read per run of nearby chunks, each chunk checked against its hash. The root's files
 * that the head still shows count too (they are DIR's files). Every other chunk's place is
 * recorded (R<hex>), to be fetched when read.
 */
async function fetchHeadChunks (session: Session, target: View, root: RemoteRoot, bucket: Bucket, places: Map<string, ChunkPlace>): Promise<{ chunks: number, bytes: number, remoteChunks: number }> {
  const want = new Map<string, ChunkPlace>()
  const note = (e: Entry): void => {
    if (e.kind !== 'f') return
    for (const r of e.chunks.values()) {
      const hex = r === null ? undefined : hexName(r)
      const p = hex === undefined ? undefined : places.get(hex)
      if (p !== undefined) want.set(hex!, p)
    }
  }
  for (const e of target.entries.values()) note(e)
  for (const [p, raw] of root.entries) if (target.resolve(p)?.kind === 'lower') note(decodeEntry(raw))
  let ops: BatchOp[] = []
  let bytes = 0
  const land = async (): Promise<void> => {
    const mine = ops
    ops = []
    const { hexes } = session.chunks.drain(mine)
    await session.store.batch(mine, true)
    session.chunks.landed(hexes)
  }
  await fetchChunks(bucket, want, async (hash, data) => {
    session.chunks.put(data)
    bytes += data.length
    if (session.chunks.pendingBytes() >= SPILL_BYTES) await land()
  })
  for (const [hex, p] of places) {
    if (want.has(hex)) continue
    ops.push({ type: 'put', key: remoteChunkKey(hex), value: encodePlace(p) })
    if (ops.length >= 10000) await land()
  }
  await land()
  return { chunks: want.size, bytes, remoteChunks: places.size - want.size }
}

/**
 * Write the head view into DIR (verified), then keep base entries only where DIR does not
 * hold the root's version of a path, and record that DIR holds the head: one synced batch.
 */
async function writeHead (storePath: string, workspace: string, root: RemoteRoot, bucket: Bucket, places: Map<string, ChunkPlace> | undefined): Promise<{ summary: PlanSummary, chunks: number, bytes: number, remoteChunks: number }> {
  const fd = fs.openSync(workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  const session = await Session.open({ storePath, workspace, dirFd: fd, create: false })
  try {
    const stack = session.meta.stack.slice()
    const target = await viewOf(session, stack)
    const fetched = places === undefined ? { chunks: 0, bytes: 0, remoteChunks: 0 } : await fetchHeadChunks(session, target, root, bucket, places)
    const summary = await writeViewInto(session, target, workspace)
    const ops: BatchOp[] = []
    const inRoot = new Set(root.entries.map(([p]) => p))
    // A root path DIR now holds as the root had it: the real file is its lower.
    const dropped: string[] = []
    for (const p of inRoot) {
      const r = target.resolve(p)
      if (r !== null && r.kind === 'lower' && r.lowerPath === p) {
        ops.push({ type: 'del', key: baseKey(p) })
        dropped.push(p)
      }
    }
    // A path DIR holds that the root did not: hidden from the lower by a whiteout (one at the
    // top of each such subtree hides what is below it).
    const todo = ['/']
    for (let d = todo.pop(); d !== undefined; d = todo.pop()) {
      for (const n of target.readdir(d)) {
        const p = joinPath(d, n)
        if (!inRoot.has(p)) {
          ops.push({ type: 'put', key: baseKey(p), value: encode({ kind: 'w' }) })
          continue
        }
        const r = target.resolve(p)
        if (r !== null && (r.kind === 'upper' ? r.entry.kind : r.stat.kind) === 'd') todo.push(p)
      }
    }
    // DIR holds the head view. The applied stack never includes a layer that can still
    // change: a head turn that holds something is sealed, and a new head opened on it.
    ops.push(...session.appliedOps(stack))
    ops.push(session.store.metaOp())
    await session.store.batch(ops, true)
    // The root tree as the pusher sent it, for the real paths DIR holds as the root had them:
    // the clone's pushes reuse these entries (the real files differ only in inode numbers and
    // owners) instead of sending a root tree of their own.
    const cache: Array<[string, string, Buffer]> = []
    const byPath = new Map(root.entries)
    const lower = new Lower(fs.openSync(workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY), new Map(), session.chunks)
    try {
      for (const p of dropped) {
        const st = lower.stat(p)
        if (st !== null && 'nlink' in st) cache.push([p, fingerprint(st), byPath.get(p)!])
      }
    } finally {
      fs.closeSync(lower.dirFd)
    }
    saveCache(storePath, cache)
    return { summary, ...fetched }
  } finally {
    await session.close()
    fs.closeSync(fd)
  }
}
