// Giving pack space back (cpfs prune / gc, never while a mount writes): a pack that no live
// reference names is deleted; one that is mostly dead is repacked — its live chunks copied to
// the open pack, their references switched in one synced batch, and only then the old pack
// deleted. A crash at any point loses nothing: before the batch, the references still name the
// old pack (the copies are unreferenced garbage); after it, the new one (the old pack is
// garbage the next run deletes).
import { hashChunk } from './chunks.js'
import { refKey, type BatchOp } from './keys.js'
import type { ChunkRef } from './pack-format.js'
import { encodeRef, type Store } from './store.js'

/** A pack is repacked when less than this share of its bytes is live. */
export const REPACK_BELOW = 0.5
/** References switched per synced batch. */
const BATCH_REFS = 4096

/** What is live in one pack: bytes (record headers included) and the references to it. */
export interface PackLive {
  bytes: number
  refs: Array<[string, ChunkRef]>
}

export interface Reclaimed {
  packsDeleted: number
  packsRepacked: number
  chunksDeleted: number
  bytesFreed: number
}

/**
 * Delete dead packs and repack sparse ones. `live`: every live reference by pack, as read from
 * LevelDB after the dead references' deletes were synced. Adds to `freed` what it frees.
 */
export async function reclaimPacks (store: Store, live: Map<number, PackLive>, freed: { bytesFreed: number }): Promise<Pick<Reclaimed, 'packsDeleted' | 'packsRepacked'>> {
  const packs = store.packs
  const open = packs.activeId()
  const dead: number[] = []
  const sparse: number[] = []
  for (const id of packs.ids()) {
    if (id === open) continue
    const l = live.get(id)
    if (!l) dead.push(id)
    else if (l.bytes < packs.size(id) * REPACK_BELOW) sparse.push(id)
  }
  let packsDeleted = 0
  for (const id of dead) {
    packs.remove(id)
    packsDeleted++
  }
  let ops: BatchOp[] = []
  let moved: number[] = []
  let packsRepacked = 0
  const commit = async (): Promise<void> => {
    if (moved.length) crashPoint('copied')
    // Synced: the copies are fdatasynced first (Store.batch), then the references switch.
    if (ops.length) await store.batch(ops, true)
    if (moved.length) crashPoint('switched')
    for (const id of moved) {
      freed.bytesFreed += packs.size(id) - live.get(id)!.bytes
      packs.remove(id)
      packsRepacked++
    }
    ops = []
    moved = []
  }
  for (const id of sparse) {
    const copies: BatchOp[] = []
    let intact = true
    for (const [hex, ref] of live.get(id)!.refs) {
      const data = packs.read(ref)
      const hash = Buffer.from(hex, 'hex')
      // A damaged chunk is not copied (fsck reports it where it is): the pack stays.
      if (!hashChunk(data).equals(hash)) { intact = false; break }
      copies.push({ type: 'put', key: refKey(hex), value: encodeRef(packs.append(hash, data)) })
    }
    if (!intact) continue
    for (const op of copies) ops.push(op)
    moved.push(id)
    if (ops.length >= BATCH_REFS) await commit()
  }
  await commit()
  return { packsDeleted, packsRepacked }
}

/**
 * Test hook (test/crash.test.ts): CPFS_TEST_CRASH_IN_REPACK=copied|switched kills this process
 * with SIGKILL once a repack has copied live chunks (before their references switch), or
 * switched them (before the old pack is deleted).
 */
function crashPoint (at: 'copied' | 'switched'): void {
  if (process.env.CPFS_TEST_CRASH_IN_REPACK === at) process.kill(process.pid, 'SIGKILL')
}
