// Replaying the write-ahead log when a store opens (wal.ts): what a daemon killed after
// answering an operation had not handed to LevelDB yet.
import { CpfsError } from '../errors.js'
import { decode } from './codec.js'
import { corruptHint, decodeStored } from './damage.js'
import type { StoreProblem } from './integrity.js'
import { REF_PREFIX } from './keys.js'
import { decodeRef } from './chunk-ref.js'
import type { PackSet } from './packs.js'
import { WAL_SEQ_KEY, Wal, walCorrupt, walSeqOp } from './wal.js'

/** What replaying needs of the store being opened (store.ts). */
export interface ReplayTarget {
  readonly path: string
  wal: Wal
  readonly db: { batch: (ops: any, opts: { sync: boolean }) => Promise<void> }
  readonly packs: Pick<PackSet, 'syncNow'>
  getSync: (key: string) => Buffer | undefined
  workspaceHint: () => string
}

/**
 * Bring LevelDB up to date with the write-ahead log: a daemon killed after answering an
 * operation, before LevelDB had it. Records are applied in order, each with its sequence
 * number (so a crash here just replays again), the last one synced; then the log starts over.
 */
export async function replayWal (store: ReplayTarget, tolerate: boolean, problems: StoreProblem[]): Promise<void> {
  store.wal = Wal.open(store.path)
  const raw = store.getSync(WAL_SEQ_KEY)
  const applied = raw ? decode<number>(raw) : 0
  const scan = store.wal.scan()
  // Damage that LevelDB covers already (the bad record's number, between the good ones
  // around it, is at most what LevelDB holds) costs nothing: replay goes on after it.
  if (scan.damage && scan.damage.after.length && scan.damage.after[0].seq - 1 <= applied) {
    scan.records.push(...scan.damage.after)
    scan.damage = null
  }
  if (scan.damage) {
    // Damage in the middle: nothing of it is applied here (fsck applies what comes before it).
    const error = walCorrupt(store.path, scan.damage, store.workspaceHint())
    if (!tolerate) throw error
    problems.push({ kind: 'wal', error, walScan: scan, walApplied: applied })
    store.wal.seq = Math.max(applied, ...scan.records.map(r => r.seq), ...scan.damage.after.map(r => r.seq))
    return
  }
  // The log is emptied only once LevelDB holds all of it, so its first record follows what
  // LevelDB holds, or comes before it: a gap means LevelDB lost batches it had (a damaged or
  // truncated LevelDB log), and replaying the rest over the hole would hide that.
  const first = scan.records[0]?.seq
  if (first !== undefined && first > applied + 1) {
    const error = new CpfsError('STORE_CORRUPT', `store ${store.path} lost recorded changes ${applied + 1}..${first - 1} (LevelDB's log was damaged or truncated)`, corruptHint(store.workspaceHint()))
    if (!tolerate) throw error
    problems.push({ kind: 'lost', error })
  }
  const records = scan.records.filter(r => r.seq > applied)
  // The packs the replayed references name were written by a process that is gone, maybe
  // never synced: on the disk before the synced batch below makes the references durable.
  const named = new Set<number>()
  for (const r of records) for (const op of r.ops) if (op.type === 'put' && op.key[0] === REF_PREFIX) named.add(decodeStored(store, op.key, () => decodeRef(op.value)).pack)
  store.packs.syncNow([...named])
  for (const [i, r] of records.entries()) {
    await store.db.batch([...r.ops, walSeqOp(r.seq)] as any, { sync: i === records.length - 1 })
  }
  store.wal.seq = Math.max(applied, ...records.map(r => r.seq))
  store.wal.landed(store.wal.seq, true)
}
