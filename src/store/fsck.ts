// cpfs fsck: check a store that no daemon holds, repair what can be rebuilt, and say what is
// lost. Checks: LevelDB's table files block by block against their checksums, before LevelDB
// opens (fsck-tables.ts: a block one changed byte explains gets it back, another damaged block
// is dropped through LevelDB's repair and its records are listed); what opening found (integrity.ts: damage in cpfs's write-ahead log, records
// LevelDB dropped or lost, turn records missing), every record decodes, every chunk matches its
// SHA-256, every chunk an entry names is there. Repairs: the write-ahead log's records before
// its damage are applied and the log emptied; a lost turn record gets an empty one; records
// that do not decode are deleted (their paths are listed as lost); unreferenced chunks are
// deleted; a loss that was reported is accepted, so that the store opens again; a damaged or
// missing chunk whose bytes are still in the real directory (same path, same offset, matching
// SHA-256) is read again from there. Any other damaged chunk stays where it is: reading it
// keeps failing (EIO), never returns wrong bytes, and the lines say which files in which turns
// hold it.
import { ClassicLevel } from 'classic-level'
import { CpfsError, isCpfsError } from '../errors.js'
import { decode, decodeEntry } from './codec.js'
import { hashChunk } from './chunks.js'
import { CHUNK_SIZE, type Entry } from './entries.js'
import { DAMAGED_FILE, missingTurnRecords, resetWitness, type StoreProblem } from './integrity.js'
import { levelError } from './damage.js'
import { JOURNAL_KEY, LEGACY_CHUNK_PREFIX, META_KEY, REF_PREFIX, REMOTE_CHUNK_PREFIX, refKey, turnKey, type BatchOp } from './keys.js'
import { Store, encodeRef, type TurnRecord } from './store.js'
import { checkRef } from './fsck-packs.js'
import { walSeqOp } from './wal.js'
import { compactLevel, fsckTables } from './fsck-tables.js'
import { encode } from './codec.js'
import { closeSync, constants, fstatSync, openSync, readSync, rmSync } from 'node:fs'
import { join } from 'node:path'

export interface FsckResult {
  store: string
  /** Damage found, one line each (what is lost and where). */
  damage: string[]
  /** What was put right, one line each. */
  repaired: string[]
  /** Paths whose content is lost, with the turns (or other layers) that hold them. */
  lost: Array<{ path: string, where: string }>
  chunks: number
  records: number
  /** LevelDB's table files and the blocks in them whose checksums were verified (fsck-tables.ts). */
  tables: number
  blocks: number
  /** No damage found (repairs of garbage, such as unreferenced chunks, do not count). */
  clean: boolean
}

/** Check and repair the store at `path`; the caller makes sure no daemon has it open. */
export async function fsckStore (path: string, workspace: string): Promise<FsckResult> {
  const res: FsckResult = { store: path, damage: [], repaired: [], lost: [], chunks: 0, records: 0, tables: 0, blocks: 0, clean: true }
  // Before LevelDB opens: opening may compact, and compaction copies without checking.
  const tables = await fsckTables(path)
  res.damage.push(...tables.damage)
  res.repaired.push(...tables.repaired)
  res.tables = tables.tables
  res.blocks = tables.blocks
  let store: Store
  try {
    store = await Store.open(path, { workspace, create: false, tolerate: true })
  } catch (err) {
    if (!isCpfsError(err) || err.code !== 'STORE_CORRUPT' || !/damaged|corrupt/.test(err.message)) throw err
    // LevelDB itself cannot open (a damaged manifest or table): its repair rebuilds the
    // database from the tables and logs it finds, dropping what it cannot read.
    res.damage.push(err.message)
    await ClassicLevel.repair(join(path, 'db'))
    await compactLevel(join(path, 'db'))
    res.repaired.push('LevelDB\'s repair rebuilt the database from its files (records it could not read are gone; the checks below say which files that cost)')
    store = await Store.open(path, { workspace, create: false, tolerate: true })
  }
  try {
    const names = layerNames(store)
    for (const key of tables.lost) {
      const place = keyPlace(key, names)
      if (place) res.lost.push(place)
    }
    await fromOpening(store, [...store.problems, ...missingTurnRecords(store)], res)
    await scan(store, res, workspace)
  } finally {
    await store.close()
  }
  res.clean = res.damage.length === 0
  return res
}

/** Where a layer is in the history: "turn N", or the stack that keeps it. */
function layerNames (store: Store): Map<number, string> {
  const names = new Map<number, string>()
  const m = store.meta
  m.stack.forEach((l, i) => names.set(l, `turn ${i + 1}`))
  m.redo.forEach((s, r) => s.forEach((l, i) => { if (!names.has(l)) names.set(l, `turn ${i + 1} of redo stack ${r + 1}`) }))
  ;(m.discarded ?? []).forEach((d, r) => d.stack.forEach((l, i) => { if (!names.has(l)) names.set(l, `turn ${i + 1} of discarded stack ${r + 1}`) }))
  for (const b of m.branches ?? []) b.stack.forEach((l, i) => { if (!names.has(l)) names.set(l, `turn b${b.n}:${i + 1}`) })
  m.applied.forEach((l, i) => { if (!names.has(l)) names.set(l, `turn ${i + 1} of the applied view`) })
  // A turn's parts (steps): "a part of turn N".
  for (const [l, parts] of Object.entries(m.parts ?? {})) {
    const of = names.get(Number(l))
    if (of !== undefined) for (const p of parts) if (!names.has(p)) names.set(p, `a part of ${of}`)
  }
  return names
}

/** The path and place of an entry key (e<layer><path> or b<path>). */
function keyPlace (key: string, names: Map<number, string>): { path: string, where: string } | null {
  if (key.startsWith('e')) {
    const layer = Number(key.slice(1, 11))
    return { path: key.slice(11), where: names.get(layer) ?? `unused layer ${layer}` }
  }
  if (key.startsWith('b')) return { path: key.slice(1), where: 'the real directory\'s original state' }
  return null
}

async function fromOpening (store: Store, problems: StoreProblem[], res: FsckResult): Promise<void> {
  const names = layerNames(store)
  for (const p of problems) {
    res.damage.push(p.error.message)
    if (p.kind === 'wal' && p.walScan) {
      // Apply the intact records before the damage (LevelDB may have some already); what the
      // damaged record and the ones after it held is lost.
      const applied = p.walApplied ?? 0
      const good = p.walScan.records.filter(r => r.seq > applied)
      for (const r of good) await store.db.batch([...r.ops, walSeqOp(r.seq)] as any, { sync: true })
      const lastSeq = Math.max(applied, ...p.walScan.records.map(r => r.seq), ...(p.walScan.damage?.after ?? []).map(r => r.seq))
      const lostKeys = new Set<string>()
      for (const r of p.walScan.damage?.after ?? []) for (const op of r.ops) lostKeys.add(op.key)
      for (const key of lostKeys) {
        const place = keyPlace(key, names)
        if (place) res.lost.push(place)
      }
      await store.db.batch([walSeqOp(lastSeq)] as any, { sync: true })
      store.wal.seq = lastSeq
      store.wal.landed(lastSeq, true)
      res.repaired.push(`applied the ${good.length} intact record(s) of the write-ahead log before its damage and emptied it (the paths of the damaged record itself cannot be read; those of the records after it are listed as lost)`)
    } else if (p.kind === 'turns') {
      const ops: BatchOp[] = []
      for (const t of p.turns ?? []) {
        const rec: TurnRecord = { layer: store.meta.stack[t - 1], openedAt: 0 }
        ops.push({ type: 'put', key: turnKey(rec.layer), value: encode(rec) })
      }
      await store.batch(ops, true)
      res.repaired.push(`wrote empty records (no time, no message) for turn ${(p.turns ?? []).join(', ')}`)
    } else if (p.kind === 'lost' || p.kind === 'dropped') {
      if (p.turns?.length) for (const t of p.turns) res.lost.push({ path: '/', where: `turn ${t} (the whole turn)` })
      res.repaired.push('accepted the history as LevelDB holds it now (the store opens again)')
    }
  }
  if (problems.some(p => p.kind === 'lost' || p.kind === 'dropped')) {
    rmSync(join(store.path, DAMAGED_FILE), { force: true })
    resetWitness(store)
  }
}

/** The entries (keys) that hold a chunk, and at which chunk index of their file. */
type Refs = Map<string, Array<{ key: string, idx: number }>>

function addRefs (e: Entry, key: string, refs: Refs): void {
  if (e.kind !== 'f') return
  for (const [idx, c] of e.chunks) {
    if (!c) continue
    const hex = c.toString('hex')
    const list = refs.get(hex)
    if (list) list.push({ key, idx })
    else refs.set(hex, [{ key, idx }])
  }
}

/**
 * The bytes of a chunk from the real directory: the same range of a file at a path that holds
 * it, if the file there still has those bytes. Chunks are named by their SHA-256, so bytes that
 * hash to the name are the chunk, wherever they were read.
 */
function fromReal (workspace: string, hex: string, places: Array<{ key: string, idx: number }>): { data: Buffer, path: string } | null {
  for (const { key, idx } of places) {
    const path = key.startsWith('e') ? key.slice(11) : key.startsWith('b') ? key.slice(1) : null
    if (!path || !path.startsWith('/') || path.includes('\0') || path.split('/').includes('..')) continue
    let fd: number
    try {
      fd = openSync(workspace + path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch {
      continue
    }
    try {
      if (!fstatSync(fd).isFile()) continue
      const buf = Buffer.alloc(CHUNK_SIZE)
      const n = readSync(fd, buf, 0, CHUNK_SIZE, idx * CHUNK_SIZE)
      const data = buf.subarray(0, n)
      if (hashChunk(data).toString('hex') === hex) return { data, path }
    } catch {
    } finally {
      closeSync(fd)
    }
  }
  return null
}

async function scan (store: Store, res: FsckResult, workspace: string): Promise<void> {
  const names = layerNames(store)
  const refs: Refs = new Map()
  /** Damaged chunks, with why (where in which pack), if known. */
  const damagedChunks = new Map<string, string>()
  const missingWhy = new Map<string, string>()
  /** Every chunk the store holds, by the key that holds it (c<hex>: older stores; r<hex>: packs). */
  const chunks = new Map<string, string>()
  /** Chunks a lazy clone holds on its remote only (R<hex>), by key. */
  const onRemote = new Map<string, string>()
  const del: BatchOp[] = []
  try {
    for await (const [key, value] of store.db.iterator()) {
      res.records++
      const kind = key[0]
      if (noteChunk(store, res, key, value, { chunks, onRemote, damagedChunks, missingWhy })) continue
      try {
        if (kind === 'e' || kind === 'b') {
          const e = decodeEntry(value)
          if (typeof e !== 'object' || e === null || typeof e.kind !== 'string') throw new Error('not an entry')
          addRefs(e, key, refs)
        } else decode(value)
      } catch {
        const place = keyPlace(key, names)
        res.damage.push(`record ${JSON.stringify(key)} does not decode${place ? ` (${place.path} in ${place.where})` : ''}`)
        if (place) res.lost.push(place)
        if (key !== META_KEY) del.push({ type: 'del', key })
      }
    }
  } catch (err) {
    const e = levelError(store.path, err)
    if (!e) throw err
    // LevelDB cannot read past a damaged block: the records there are not checked.
    res.damage.push(`${e.message} (the scan stopped there: later records were not checked)`)
  }
  const reread: BatchOp[] = []
  for (const [hex, places] of refs) {
    const missing = !chunks.has(hex)
    if (missing && onRemote.has(hex)) continue
    if (!missing && !damagedChunks.has(hex)) continue
    const why = missing ? missingWhy.get(hex) : damagedChunks.get(hex)
    const state = missing ? `missing${why ? ` (${why})` : ''}` : `damaged (${why || 'its bytes do not match their SHA-256'})`
    const found = fromReal(workspace, hex, places)
    if (found) {
      // Into the open pack; the synced batch below makes it durable before the reference.
      reread.push({ type: 'put', key: refKey(hex), value: encodeRef(store.packs.append(Buffer.from(hex, 'hex'), found.data)) })
      if (chunks.get(hex)?.startsWith(LEGACY_CHUNK_PREFIX)) reread.push({ type: 'del', key: chunks.get(hex)! })
      damagedChunks.delete(hex)
      chunks.set(hex, refKey(hex))
      res.repaired.push(`chunk ${hex} was ${state}: read its bytes again from ${found.path.slice(1)} in the real directory`)
      continue
    }
    res.damage.push(`chunk ${hex} is ${state}; it holds part of ${places.map(({ key }) => { const p = keyPlace(key, names); return p ? `${p.path} in ${p.where}` : key }).join(', ')}`)
    for (const { key } of places) {
      const p = keyPlace(key, names)
      if (p) res.lost.push(p)
    }
  }
  if (reread.length) await store.batch(reread, true)
  if (del.length) {
    await store.batch(del, true)
    res.repaired.push(`deleted ${del.length} record(s) that do not decode`)
  }
  await deleteUnreferenced(store, res, [...chunks.values(), ...[...missingWhy.keys()].map(refKey), ...onRemote.values()], refs)
  res.lost = dedupe(res.lost)
}

/**
 * A record that holds or places a chunk, noted in `seen`: c<hex> (older stores), R<hex> (a lazy
 * clone's chunk on its remote, checked when fetched), r<hex> (in a pack). False for any other
 * record, and for an r<hex> that does not decode (reported as a record).
 */
function noteChunk (store: Store, res: FsckResult, key: string, value: Buffer, seen: { chunks: Map<string, string>, onRemote: Map<string, string>, damagedChunks: Map<string, string>, missingWhy: Map<string, string> }): boolean {
  const kind = key[0]
  const hex = key.slice(1)
  if (kind === LEGACY_CHUNK_PREFIX) {
    res.chunks++
    seen.chunks.set(hex, key)
    if (hashChunk(value).toString('hex') !== hex) seen.damagedChunks.set(hex, '')
    return true
  }
  if (kind === REMOTE_CHUNK_PREFIX) {
    seen.onRemote.set(hex, key)
    return true
  }
  if (kind !== REF_PREFIX) return false
  const c = checkRef(store, hex, value)
  if (c.state === 'undecodable') return false
  res.chunks++
  if (c.state === 'ok') seen.chunks.set(hex, key)
  else if (c.state === 'damaged') { seen.chunks.set(hex, key); seen.damagedChunks.set(hex, c.why) } else seen.missingWhy.set(hex, c.why)
  return true
}

/**
 * Unreferenced chunks (their keys) are garbage a crash can leave (chunks.ts); a plan in
 * progress may still need chunks of its journal, so they stay while there is one.
 */
async function deleteUnreferenced (store: Store, res: FsckResult, keys: string[], refs: Refs): Promise<void> {
  if (store.getSync(JOURNAL_KEY)) return
  const unref = keys.filter(k => !refs.has(k.slice(1)))
  for (let i = 0; i < unref.length; i += 1000) {
    await store.batch(unref.slice(i, i + 1000).map(key => ({ type: 'del' as const, key })), false)
  }
  if (unref.length) res.repaired.push(`deleted ${unref.length} unreferenced chunk(s)`)
}

function dedupe (lost: FsckResult['lost']): FsckResult['lost'] {
  const seen = new Set<string>()
  return lost.filter(l => { const k = l.path + '\0' + l.where; if (seen.has(k)) return false; seen.add(k); return true })
}

export function fsckRefusal (workspace: string): CpfsError {
  return new CpfsError('MOUNTED', `${workspace} is mounted: cpfs fsck checks a store no daemon holds`, `run cpfs unmount ${workspace} first (or cpfs unmount --discard to leave the real directory as it is)`)
}
