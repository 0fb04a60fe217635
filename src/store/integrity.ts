// How a store notices its own damage when it opens (cpfs fsck, src/store/fsck.ts, reports and
// repairs it). LevelDB checks the CRCs of its log when it replays it, but without
// paranoid_checks — which classic-level does not let us set — a damaged record is dropped
// with only a line in LevelDB's info log (db/LOG), and a log cut short at a record boundary
// leaves no trace at all. So:
// - the info log of this opening is read for "dropping N bytes" lines; one is written to the
//   marker file DAMAGED_FILE, because LevelDB has already rewritten the store without those
//   records and the next opening would not see the line again;
// - every synced batch (sealed turns, rewinds, fsync, plans) carries a counter (INTEGRITY_KEY)
//   and, once on disk, the counter is written to WITNESS_FILE outside LevelDB. The witness is
//   written after the sync, so it can lag behind LevelDB (a crash) but never lead it: LevelDB
//   holding a smaller number means it lost synced batches;
// - (cpfs fsck) every layer of the stack has its turn record.
import { closeSync, constants, existsSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { CpfsError } from '../errors.js'
import { decode } from './codec.js'
import { turnKey } from './keys.js'
import type { WalScan } from './wal.js'
import { corruptHint } from './damage.js'

/** The number of the last synced batch, inside LevelDB. */
export const INTEGRITY_KEY = 's'
/** The same number, outside LevelDB, with what the history looked like then. */
export const WITNESS_FILE = 'synced'
/** Lines of LevelDB's info log that reported dropped records; removed by cpfs fsck. */
export const DAMAGED_FILE = 'damaged'

export interface Witness {
  n: number
  turns: number
}

export interface StoreProblem {
  /** wal: damage in cpfs's log; lost: LevelDB lost synced batches; dropped: LevelDB skipped damaged log records; turns: turn records missing. */
  kind: 'wal' | 'lost' | 'dropped' | 'turns'
  error: CpfsError
  walScan?: WalScan
  walApplied?: number
  /** Turns (numbers) known to be missing. */
  turns?: number[]
}

/**
 * What the checks read and keep of an open store. The Store of store.ts is one; it is named
 * here, not imported, because store.ts runs these checks: only one of the two knows the other.
 */
export interface CheckedStore {
  readonly path: string
  /** The number of the last synced batch: read from INTEGRITY_KEY when the store opens. */
  syncCount: number
  meta: { stack: number[] }
  getSync: (key: string) => Buffer | undefined
  /** How the workspace is named in a hint. */
  workspaceHint: () => string
}

export function readWitness (path: string): Witness | null {
  try {
    const w = JSON.parse(readFileSync(join(path, WITNESS_FILE), 'utf8'))
    return Number.isSafeInteger(w?.n) ? w : null
  } catch {
    return null // absent (a store of an earlier version) or cut short by a crash: nothing to compare
  }
}

const lastWritten = new WeakMap<CheckedStore, number>()
const witnessFds = new WeakMap<CheckedStore, number>()

/**
 * The witness as one fixed-size pwrite into a file kept open: rewriting it with writeFileSync
 * truncates it first, and ext4 (auto_da_alloc) then flushes it on close, ~3 ms per sealed turn.
 */
function putWitness (store: CheckedStore, w: Witness): void {
  let fd = witnessFds.get(store)
  if (fd === undefined) {
    fd = openSync(join(store.path, WITNESS_FILE), constants.O_RDWR | constants.O_CREAT, 0o600)
    witnessFds.set(store, fd)
  }
  // Padded: a shorter number after a longer one must not leave the old tail behind.
  writeSync(fd, JSON.stringify(w).padEnd(WITNESS_BYTES), 0)
}

const WITNESS_BYTES = 64

/** After synced batch `n` is on disk. Not synced itself: the witness may only lag. */
export function writeWitness (store: CheckedStore, n: number): void {
  if ((lastWritten.get(store) ?? 0) >= n) return
  lastWritten.set(store, n)
  try {
    putWitness(store, { n, turns: store.meta?.stack.length ?? 0 })
  } catch {
    // A witness that could not be written only weakens the check (it stays behind).
  }
}

/** Forget the witness's past (fsck accepted a loss): the witness is set to what LevelDB holds. */
export function resetWitness (store: CheckedStore): void {
  lastWritten.set(store, store.syncCount)
  putWitness(store, { n: store.syncCount, turns: store.meta.stack.length })
}

export function closeWitness (store: CheckedStore): void {
  const fd = witnessFds.get(store)
  if (fd === undefined) return
  witnessFds.delete(store)
  closeSync(fd)
}

/** The checks of an opening, after the write-ahead log was replayed and the metadata read. */
export function checkOnOpen (store: CheckedStore): StoreProblem[] {
  const out: StoreProblem[] = []
  const hint = corruptHint(store.workspaceHint())
  const raw = store.getSync(INTEGRITY_KEY)
  store.syncCount = raw ? decode<number>(raw) : 0
  const dropped = droppedLines(store.path)
  if (dropped.length) {
    out.push({ kind: 'dropped', error: new CpfsError('STORE_CORRUPT', `store ${store.path} lost records: LevelDB found its log damaged and skipped part of it (${dropped[0].match(/[^/\s]+: dropping .*/)?.[0] ?? dropped[0].trim()})`, hint) })
  }
  const w = readWitness(store.path)
  if (w && w.n > store.syncCount) {
    const turns = store.meta.stack.length
    const missing: number[] = []
    for (let t = turns + 1; t <= w.turns; t++) missing.push(t)
    const what = missing.length ? `turn${missing.length > 1 ? 's' : ''} ${missing.length > 1 ? `${missing[0]}-${missing[missing.length - 1]}` : missing[0]} missing, ` : ''
    out.push({ kind: 'lost', turns: missing, error: new CpfsError('STORE_CORRUPT', `store ${store.path} lost its last ${w.n - store.syncCount} synced change(s) (${what}LevelDB's log was damaged or truncated)`, hint) })
  }
  return out
}

/**
 * Every layer of the stack has its turn record (fsck only: stores of earlier versions are not
 * known to have written one for every layer, and a record holds only labels and times).
 */
export function missingTurnRecords (store: CheckedStore): StoreProblem[] {
  const missing: number[] = []
  store.meta.stack.forEach((layer, i) => { if (store.getSync(turnKey(layer)) === undefined) missing.push(i + 1) })
  if (!missing.length) return []
  return [{ kind: 'turns', turns: missing, error: new CpfsError('STORE_CORRUPT', `store ${store.path} is missing the record of turn ${missing.join(', ')}`, corruptHint(store.workspaceHint())) }]
}

/**
 * Dropped-record lines of LevelDB's info log from this opening, kept in DAMAGED_FILE until
 * fsck has reported them (LevelDB has rewritten the store without those records by now).
 */
function droppedLines (path: string): string[] {
  const marker = join(path, DAMAGED_FILE)
  let lines: string[] = []
  try {
    lines = readFileSync(join(path, 'db', 'LOG'), 'utf8').split('\n').filter(l => /dropping \d+ bytes/.test(l))
  } catch {}
  if (lines.length) writeFileSync(marker, lines.join('\n') + '\n', { flag: 'a', mode: 0o600 })
  if (!existsSync(marker)) return []
  return readFileSync(marker, 'utf8').split('\n').filter(Boolean)
}
