// The remote's layers as this store's (clone and pull): each under a fresh layer id, noted in
// `idOf` by its tree's name, with its turn record and entries as store ops. The inode numbers
// the entries use move the store's nextIno past them, so that a file made later never takes
// the number of one in the history.
import { decode, decodeEntry, encode } from '../store/codec.js'
import { inoOfKey, isInoKey, type Entry } from '../store/entries.js'
import { entryKey, turnKey, type BatchOp } from '../store/keys.js'
import type { StoreMeta } from '../store/store.js'
import type { RemoteLayer, RemoteRoot } from './objects.js'

export function importLayers (meta: StoreMeta, trees: Map<string, RemoteLayer | RemoteRoot>, idOf: Map<string, number>, onEntry: (e: Entry) => void = () => {}): BatchOp[] {
  const ops: BatchOp[] = []
  for (const [hex, t] of trees) {
    if (t.kind !== 'layer') continue
    const id = meta.nextLayer++
    idOf.set(hex, id)
    ops.push({ type: 'put', key: turnKey(id), value: encode({ layer: id, ...decode<Record<string, unknown>>(t.turn) }) })
    for (const [k, raw] of t.records) {
      onEntry(noteIno(meta, k, raw))
      ops.push({ type: 'put', key: entryKey(id, k), value: raw })
    }
  }
  return ops
}

/** The entry `raw` (at `key`), once nextIno is past the inode number it uses. */
export function noteIno (meta: StoreMeta, key: string, raw: Buffer): Entry {
  const e = decodeEntry(raw)
  if (e.kind !== 'w') meta.nextIno = Math.max(meta.nextIno, e.ino + 1)
  if (isInoKey(key)) meta.nextIno = Math.max(meta.nextIno, inoOfKey(key) + 1)
  return e
}
