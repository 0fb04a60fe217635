// A sandboxed run (cpfs exec --sandbox) kept as a branch of the workspace's shared history, so
// that `cpfs merge bN` can bring it into the head (issue 23). Three moments:
//  - start (the outer cpfs, before the namespace): which layers of the shared history the real
//    directory holds (meta.applied), from the mount's daemon or read offline: the branch's base.
//  - end, inside the sandbox (the inner cpfs, after its own unmount): the run's layers made to
//    stand alone in its own store — file bytes read from the real directory become chunks, a
//    renamed real directory becomes entries — plus a `found` layer holding what the run found
//    at each path it changed (its daemon kept the originals: session/capture.ts, KEEP_ORIGINALS).
//    Only here is the run's lower what it was during the run: with the workspace mounted, the
//    sandbox's lower is the outer mount, which the outer mount's daemon cannot read.
//  - end, outside (the outer cpfs): the copy into the shared store (merge/import-sandbox.ts),
//    by the mount's daemon or offline; the run's state dir goes once copied after a clean run.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CpfsError, isCpfsError } from './errors.js'
import { callDaemon } from './control/mounted.js'
import { daemonUp } from './daemons.js'
import { isMounted, locate, register, type Location } from './store/locate.js'
import { Store } from './store/store.js'
import { Session } from './session/session.js'
import { holdsSomething } from './session/tree.js'
import { View } from './overlay/view.js'
import { importFromStore, type ImportResult, type SandboxRun } from './merge/import-sandbox.js'
import { CHUNK_SIZE, chunkLen, cloneEntry, isInoKey, srcBytes, type Entry, type FileEntry, type LiveEntry } from './store/entries.js'
import { isZero } from './store/chunks.js'
import { readEntry } from './real/lower.js'
import { realEntry } from './real/read.js'
import { join as joinPath, parentOf } from './paths/paths.js'
import { encode, encodeEntry } from './store/codec.js'
import { entryKey, turnKey, type BatchOp } from './store/keys.js'
import './remote/lazy.js'

/** What the outer cpfs records at the start (start.json in the state dir). */
interface SandboxStart {
  workspace: string
  what: string
  startedAt: number
  applied: number[]
}

/** What the inner cpfs hands over at the end (run.json): layers of the run's own store. */
type RunLayers = Pick<SandboxRun, 'found' | 'turns' | 'unsure'>

/** How long to wait for a store another cpfs holds (a daemon closing, another run's import): a hang guard, not a timing. */
const LOCK_GUARD_MS = 60_000

/** The command line as a user would type it again (the branch's `what`). */
export function commandLine (argv: string[], perLine: boolean): string {
  if (perLine) return argv.join('; ')
  return argv.map(a => /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, '\'\\\'\'')}'`).join(' ')
}

/** Retry fn while the store is locked by another cpfs process (until the guard). */
async function unlocked<T> (fn: () => Promise<T>): Promise<T> {
  for (const end = Date.now() + LOCK_GUARD_MS; ;) {
    try {
      return await fn()
    } catch (err) {
      if (!isCpfsError(err) || err.code !== 'STORE_LOCKED' || Date.now() > end) throw err
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }
}

// ---- start ------------------------------------------------------------------------------

/** Record the base of a sandboxed run about to start: the shared store's applied layers. */
export async function recordStart (workspace: string, state: string, what: string): Promise<void> {
  const loc = locate(workspace)
  let applied: number[] = []
  if (await daemonUp(loc)) applied = (await callDaemon(loc, { cmd: 'sandbox-start' })).applied
  else if (!loc.stale && !isMounted(loc.workspace) && fs.existsSync(join(loc.store, 'db'))) {
    applied = await unlocked(async () => {
      const store = await Store.open(loc.store, { workspace: loc.workspace, create: false })
      try {
        return store.meta.applied.slice()
      } finally {
        await store.close()
      }
    })
  }
  const start: SandboxStart = { workspace: loc.workspace, what, startedAt: Date.now(), applied }
  fs.writeFileSync(join(state, 'start.json'), JSON.stringify(start))
}

// ---- end, inside the sandbox ------------------------------------------------------------

/**
 * Inside the sandbox, after its unmount: make the run's layers stand alone and write
 * run.json. Never throws: a run whose work cannot be kept as a branch says so, and the outer
 * cpfs keeps its store.
 */
export async function prepareRunQuietly (workspace: string, storePath: string, state: string): Promise<void> {
  try {
    await prepareRun(workspace, storePath, state)
  } catch (err: any) {
    process.stderr.write(`cpfs: cannot make the sandboxed run's work a branch: ${String(err?.message ?? err).split('\n')[0]}\n`)
  }
}

async function prepareRun (workspace: string, storePath: string, state: string): Promise<void> {
  const dirFd = fs.openSync(workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  try {
    const s = await unlocked(async () => await Session.open({ storePath, workspace, dirFd, create: false }))
    try {
      const run = await standAlone(s, readUnsure(state))
      fs.writeFileSync(join(state, 'run.json'), JSON.stringify(run))
    } finally {
      await s.close()
    }
  } finally {
    fs.closeSync(dirFd)
  }
}

/** Paths the run's daemon could not keep the original of (session/capture.ts, noteUnsure). */
function readUnsure (state: string): Set<string> {
  let text = ''
  try {
    text = fs.readFileSync(join(state, 'unsure'), 'utf8')
  } catch {}
  return new Set(text.split('\n').filter(Boolean).map(l => JSON.parse(l) as string))
}

/**
 * The run's turns, and the turns before them: the stack --discard (or a failed command) set
 * aside, else the head's. The run's store starts with turn 1 in layer 1; turns its daemon put
 * before it are changes another process made in the real directory during the run (heard
 * underneath the mount, daemon/underneath.ts): what the run found, not its work. Empty
 * unlabelled layers (the head opened when the run's end sealed its turn) are not turns of it.
 */
function runStacks (s: Session, stack: number[]): { before: number[], own: number[] } {
  const first = stack.indexOf(1)
  const before = first > 0 ? stack.slice(0, first) : []
  const own = stack.slice(before.length).filter(id => holdsSomething(s.history, id))
  return { before, own }
}

async function standAlone (s: Session, unsureNoted: Set<string>): Promise<RunLayers> {
  const all = (s.meta.branches ?? []).filter(b => b.by === 'discard').at(-1)?.stack ?? s.meta.stack
  await s.history.load(all)
  const { before, own } = runStacks(s, all)
  if (own.length === 0) return { found: 0, turns: [], unsure: [] }
  const ops: BatchOp[] = []
  const changed = new Set<string>()
  const copyLayer = async (old: number): Promise<number> => {
    const id = s.meta.nextLayer++
    ops.push({ type: 'put', key: turnKey(id), value: encode({ ...s.store.turnRecord(old), layer: id }) })
    const entries = s.history.layers.get(old)!
    for (const [key, e] of entries) {
      if (isInoKey(key)) {
        const real = e.kind !== 'w' && e.kind !== 'h' ? e.realPath : undefined
        if (real !== undefined) changed.add(real)
      } else changed.add(key)
      for (const [k, x] of await standAloneEntry(s, key, e, entries)) ops.push({ type: 'put', key: entryKey(id, k), value: encodeEntry(x) })
      if (s.chunks.pendingBytes() >= SPILL_BYTES) await s.persister.spill()
    }
    return id
  }
  const turns: RunLayers['turns'] = []
  for (const layer of own) {
    const parts: number[] = []
    for (const p of s.history.partsOf(layer)) parts.push(await copyLayer(p))
    turns.push({ layer: await copyLayer(layer), parts })
  }
  // What the run found at each path it changed: the real directory as its lower holds it (the
  // original its daemon kept, or the real path as it is) with the outside changes heard during
  // the run, or nothing (a whiteout) where the path did not exist.
  const view = View.build(s.lower, s.history.entriesOf(before))
  const found = s.meta.nextLayer++
  ops.push({ type: 'put', key: turnKey(found), value: encode({ layer: found, openedAt: s.openedAt, sealedAt: s.openedAt }) })
  // Below a path the run found absent nothing was there either: its whiteout says so for all
  // (a run that made node_modules pins one path, not 10,000). Sorted, parents come first.
  const absent = new Set<string>()
  for (const p of [...changed].sort()) {
    if (p !== '/' && absent.has(parentOf(p))) {
      absent.add(p)
      continue
    }
    const e = foundEntry(s, view, p)
    if (e.kind === 'w') absent.add(p)
    ops.push({ type: 'put', key: entryKey(found, p), value: encodeEntry(e) })
    if (s.chunks.pendingBytes() >= SPILL_BYTES) await s.persister.spill()
  }
  ops.push(s.store.metaOp())
  await s.persister.syncBatch(ops)
  return { found, turns, unsure: [...changed].filter(p => unsureNoted.has(p)).sort() }
}

/**
 * Path p of the view the run started from, standing alone. A directory is its metadata only:
 * what is below it is pinned path by path, and an opaque one would hide the shared history's.
 */
function foundEntry (s: Session, view: View, p: string): Entry {
  const r = view.resolve(p)
  if (r === null) return { kind: 'w' }
  if (r.kind === 'lower') return lowerEntry(s, r.lowerPath)
  const e = r.entry
  if (e.kind === 'f' && e.src !== undefined) return alone(filled(s, e))
  const c = alone(cloneEntry(e))
  if (c.kind === 'd') {
    delete c.redirect
    delete c.opaque
    delete c.fresh
  }
  return c
}

const SPILL_BYTES = 32 * 1024 * 1024

/** The run's lower at p, standing alone: its content in chunks, no other name shares it. */
function lowerEntry (s: Session, p: string): LiveEntry | { kind: 'w' } {
  if (s.lower.servedByReal(p)) return alone(realEntry(s.lower, s.chunks, p))
  // Not served by the real directory: a base entry covers p (the original kept), or hides it.
  const st = s.lower.stat(p)
  return st === null ? { kind: 'w' } : alone(cloneEntry(st as LiveEntry))
}

function alone<T extends Entry> (e: T): T {
  if (e.kind !== 'w' && e.kind !== 'h') delete e.links
  return e
}

/**
 * Entry `e` at `key` of a layer, as entries that need no real file: a file's bytes that still
 * come from the real file (`src`, copy-up stays O(1)) are read into chunks; a real directory
 * renamed in the mount (`redirect`) becomes entries for everything below it.
 */
async function standAloneEntry (s: Session, key: string, e: Entry, layer: Map<string, Entry>): Promise<Array<[string, Entry]>> {
  if (e.kind === 'f' && e.src !== undefined) return [[key, filled(s, e)]]
  if (e.kind !== 'd' || e.redirect === undefined) return [[key, e]]
  const d = { ...e }
  const from = d.redirect!
  delete d.redirect
  // Only the entry that renamed it (fresh) hides what is below: a later one that changed its
  // mode keeps `redirect` for where the children come from, which the expanded entries say now.
  if (!e.fresh) return [[key, d]]
  const out: Array<[string, Entry]> = [[key, d]]
  const walk: Array<[string, string]> = [[from, key]]
  for (let next = walk.pop(); next !== undefined; next = walk.pop()) {
    const [src, dst] = next
    for (const name of s.lower.readdir(src).sort()) {
      const q = joinPath(src, name)
      const t = joinPath(dst, name)
      const own = layer.get(t)
      const e = own ?? lowerEntry(s, q)
      if (own === undefined) {
        if (e.kind === 'w') continue
        const copy = { ...e, ino: s.store.allocIno() } as LiveEntry
        out.push([t, copy])
        if (s.chunks.pendingBytes() >= SPILL_BYTES) await s.persister.spill()
      }
      // Below a directory of the layer's own that takes its children elsewhere, nothing of this one shows.
      const descend = own === undefined ? e.kind === 'd' : own.kind === 'd' && !own.opaque && own.redirect === undefined && s.lower.stat(q)?.kind === 'd'
      if (descend) walk.push([q, t])
    }
  }
  return out
}

/** A file entry with the bytes it read from the real file (src) kept as chunks. */
function filled (s: Session, e: FileEntry): FileEntry {
  const src = e.src!
  const end = srcBytes(e)
  const c = cloneEntry(e)
  delete c.src
  delete c.srcSize
  for (let idx = 0; idx * CHUNK_SIZE < end; idx++) {
    if (c.chunks.has(idx)) continue
    const buf = Buffer.alloc(chunkLen(e.size, idx))
    readEntry(e, s.chunks, buf, 0, buf.length, idx * CHUNK_SIZE, (b, off, len, pos) => s.lower.read(src, b, off, len, pos))
    if (!isZero(buf)) c.chunks.set(idx, s.chunks.put(buf))
  }
  return c
}

// ---- end, outside -------------------------------------------------------------------------

/**
 * Copy the ended run into the shared store as a branch, then remove its state dir if the run
 * ended cleanly. Never throws and never changes the command's exit code: a failure prints one
 * line saying where the run's store is kept.
 */
export async function keepAsBranch (workspace: string, state: string, clean: boolean): Promise<ImportResult | null> {
  let result: ImportResult | null = null
  try {
    const start = JSON.parse(fs.readFileSync(join(state, 'start.json'), 'utf8')) as SandboxStart
    let layers: RunLayers
    try {
      layers = JSON.parse(fs.readFileSync(join(state, 'run.json'), 'utf8'))
    } catch {
      throw new CpfsError('IMPORT_FAILED', 'the sandboxed run did not hand over its work', '')
    }
    const run: SandboxRun = { store: join(state, 'store'), what: start.what, startedAt: start.startedAt, applied: start.applied, ...layers }
    result = await importRun(locate(workspace), run)
  } catch (err: any) {
    process.stderr.write(`cpfs: the sandboxed run's work was not kept as a branch (${String(err?.message ?? err).split('\n')[0]}); its store is kept in ${state}\n`)
    return null
  }
  if (clean) fs.rmSync(state, { recursive: true, force: true })
  return result
}

async function importRun (loc: Location, run: SandboxRun): Promise<ImportResult> {
  if (run.turns.length === 0) return { branch: null, unsure: [] }
  if (await daemonUp(loc)) return await callDaemon(loc, { cmd: 'import-sandbox', args: run })
  if (loc.stale || isMounted(loc.workspace)) {
    throw new CpfsError('STALE_MOUNT', `the cpfs daemon for ${loc.workspace} is not running but its mount is still there`, `run cpfs mount ${loc.workspace} to recover it`)
  }
  // A workspace never mounted gets its history now: turn 1 is the real directory as it is.
  return await unlocked(async () => {
    const created = !fs.existsSync(join(loc.store, 'db'))
    const store = await Store.open(loc.store, { workspace: loc.workspace, create: true })
    try {
      if (created) register(loc)
      return await importFromStore(store, run)
    } finally {
      await store.close()
    }
  })
}
