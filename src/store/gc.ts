// Garbage collection: delete layers that no stack references (dropped by rewinds, squashed by
// prune) and chunks that no remaining layer or base entry references; then packs that hold no
// live chunk are deleted and mostly dead ones repacked (repack.ts). Safe by construction:
// the live set is computed from the metadata already committed, so a crash in the middle
// leaves garbage for the next run, never a dangling reference.
import { decode, decodeEntry, decodeEntryBy } from './codec.js'
import type { Entry } from './entries.js'
import { JOURNAL_KEY, LEGACY_CHUNK_PREFIX, PROCESS_PREFIX, REF_PREFIX, REMOTE_CHUNK_PREFIX, STEP_PREFIX, prefixEnd, stepIdKey, turnKey, type BatchOp } from './keys.js'
import { decodeRef } from './store.js'
import { keptStacks } from './branches.js'
import { RECORD_HEADER } from './pack-format.js'
import { reclaimPacks, type PackLive } from './repack.js'
import type { Store } from './store.js'
import { Phase, progressSink } from '../progress.js'

export interface GcResult {
  layersDeleted: number
  chunksDeleted: number
  bytesFreed: number
}

function addRefs (e: Entry, live: Set<string>): void {
  if (e.kind !== 'f') return
  for (const c of e.chunks.values()) if (c) live.add(c.toString('hex'))
}

export async function collectGarbage (store: Store): Promise<GcResult> {
  if (store.getSync(JOURNAL_KEY)) throw new Error('a plan is in progress; finish it before collecting garbage')
  const meta = store.meta
  const turnLayers = keptStacks(meta).flat()
  // A turn's parts (steps) live as long as the turn does.
  const liveLayers = new Set<number>(turnLayers.flatMap(id => [...(meta.parts?.[id] ?? []), id]))
  if (meta.parts !== undefined) {
    for (const id of Object.keys(meta.parts)) if (!liveLayers.has(Number(id))) delete meta.parts[id]
  }
  const live = new Set<string>()
  let ops: BatchOp[] = []
  let layersDeleted = 0
  const flush = async () => {
    if (ops.length) await store.batch(ops)
    ops = []
  }
  // One pass over entries: references of live layers, deletion of dead ones.
  const sink = progressSink()
  const reading = new Phase(sink, 'reading the history', 'entries')
  const deadLayers = new Set<number>()
  const liveProcesses = new Set<string>()
  for await (const [key, value] of store.entries({ gte: 'e', lt: prefixEnd('e') })) {
    reading.item()
    const layer = Number(key.slice(1, 11))
    if (liveLayers.has(layer)) {
      const { entry, by } = decodeEntryBy(value)
      addRefs(entry, live)
      for (const id of by ?? []) liveProcesses.add(id)
    } else {
      deadLayers.add(layer)
      ops.push({ type: 'del', key })
      if (ops.length >= 1000) await flush()
    }
  }
  for await (const [, value] of store.entries({ gte: 'b', lt: prefixEnd('b') })) addRefs(decodeEntry(value), live)
  // Who changed what underneath the mount, for layers that are gone; then the records of
  // processes no live entry names (directly or as an ancestor).
  for await (const [key] of store.entries({ gte: 'u', lt: prefixEnd('u') })) {
    if (liveLayers.has(Number(key.slice(1, 11)))) continue
    ops.push({ type: 'del', key })
    if (ops.length >= 1000) await flush()
  }
  // A step (steps.ts) lives while a layer it changed or began in does (an open one always);
  // its record names its agent's process, kept with it.
  const open = new Set(meta.openSteps ?? [])
  for await (const [key, value] of store.entries({ gte: STEP_PREFIX, lt: prefixEnd(STEP_PREFIX) })) {
    const step = decode<{ n: number, id?: string, owner?: string | null, parts?: number[], from?: number }>(value)
    if (open.has(step.n) || liveLayers.has(step.from ?? -1) || (step.parts ?? []).some(l => liveLayers.has(l))) {
      if (typeof step.owner === 'string') liveProcesses.add(step.owner)
      continue
    }
    ops.push({ type: 'del', key })
    if (step.id !== undefined) ops.push({ type: 'del', key: stepIdKey(step.id) })
  }
  await deadProcesses(store, liveProcesses, ops)
  for await (const [key] of store.entries({ gte: 't', lt: prefixEnd('t') })) {
    const layer = Number(key.slice(1))
    if (!liveLayers.has(layer)) {
      deadLayers.add(layer)
      ops.push({ type: 'del', key: turnKey(layer) })
    }
  }
  layersDeleted = deadLayers.size
  await flush()
  reading.end()
  // How far the scans are: chunk keys are SHA-256 hex, spread evenly over the key space.
  const deleting = new Phase(sink, 'deleting unreferenced chunks', 'chunks')
  const { freed, packs } = await sweepChunks(store, live, deleting)
  deleting.end()
  await reclaimPacks(store, packs, freed)
  const { chunksDeleted, bytesFreed } = freed
  // Give the space back now rather than at LevelDB's next compaction.
  const compacting = new Phase(sink, 'compacting the store', 'steps')
  await store.db.compactRange('\u0000', '\uffff')
  compacting.end()
  return { layersDeleted, chunksDeleted, bytesFreed }
}

/** Delete the process records (`p`) that no live change names, directly or as an ancestor. */
async function deadProcesses (store: Store, live: Set<string>, ops: BatchOp[]): Promise<void> {
  const parents = new Map<string, string | null>()
  for await (const [key, value] of store.entries({ gte: PROCESS_PREFIX, lt: prefixEnd(PROCESS_PREFIX) })) {
    let parent: string | null = null
    try {
      parent = decode<{ parent?: string | null }>(value).parent ?? null
    } catch {} // fsck reports it; unreferenced, it goes
    parents.set(key.slice(1), parent)
  }
  const keep = new Set<string>()
  for (let id of live) {
    while (!keep.has(id) && parents.has(id)) {
      keep.add(id)
      const up = parents.get(id)
      if (up == null) break
      id = up
    }
  }
  for (const id of parents.keys()) if (!keep.has(id)) ops.push({ type: 'del', key: PROCESS_PREFIX + id })
}

/**
 * Delete the chunks nothing live references (older stores' LevelDB values, and references to
 * pack bytes), and count what stays live per pack. The last batch is synced: no crash may
 * bring a reference back once its pack is gone.
 */
async function sweepChunks (store: Store, live: Set<string>, deleting: Phase): Promise<{ freed: { chunksDeleted: number, bytesFreed: number }, packs: Map<number, PackLive> }> {
  let ops: BatchOp[] = []
  const flush = async (): Promise<void> => {
    if (ops.length) await store.batch(ops)
    ops = []
  }
  const freed = { chunksDeleted: 0, bytesFreed: 0 }
  // Chunks of stores written before packs (version 4 and older): LevelDB values.
  for await (const [key, value] of store.entries({ gte: LEGACY_CHUNK_PREFIX, lt: prefixEnd(LEGACY_CHUNK_PREFIX) })) {
    if (live.has(key.slice(1))) continue
    ops.push({ type: 'del', key })
    freed.chunksDeleted++
    freed.bytesFreed += value.length
    deleting.set(freed.chunksDeleted, freed.bytesFreed, parseInt(key.slice(1, 5), 16) / 0x20000)
    if (ops.length >= 1000) await flush()
  }
  // A lazy clone's chunks on its remote that nothing here names any more: only the record goes.
  for await (const [key] of store.entries({ gte: REMOTE_CHUNK_PREFIX, lt: prefixEnd(REMOTE_CHUNK_PREFIX) })) {
    if (live.has(key.slice(1))) continue
    ops.push({ type: 'del', key })
    if (ops.length >= 1000) await flush()
  }
  // References to pack bytes: the dead ones go, the live ones are counted per pack.
  const packs = new Map<number, PackLive>()
  for await (const [key, value] of store.entries({ gte: REF_PREFIX, lt: prefixEnd(REF_PREFIX) })) {
    const hex = key.slice(1)
    let ref
    try {
      ref = decodeRef(value)
    } catch {
      continue // fsck reports it
    }
    if (!live.has(hex)) {
      ops.push({ type: 'del', key })
      freed.chunksDeleted++
      freed.bytesFreed += ref.length
      deleting.set(freed.chunksDeleted, freed.bytesFreed, 0.5 + parseInt(key.slice(1, 5), 16) / 0x20000)
      if (ops.length >= 1000) await flush()
      continue
    }
    const p = packs.get(ref.pack) ?? { bytes: 0, refs: [] }
    p.bytes += RECORD_HEADER + ref.length
    p.refs.push([hex, ref])
    packs.set(ref.pack, p)
  }
  if (ops.length || freed.chunksDeleted) await store.batch(ops, true)
  return { freed, packs }
}
