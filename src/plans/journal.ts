// The journal of a plan in progress: what `recover` needs to finish (or roll back) a plan that a
// crash interrupted. It is written before the plan touches the real directory and retired in
// the batch that commits the plan.
//
// Layout: the header at JOURNAL_KEY ('j') names the plan and how many parts it has; the
// operations, expectations and fingerprints are in parts 'J<index>' of at most PART_ITEMS
// items each. One value for the whole journal was hundreds of megabytes for a session of
// 1,000,000 files, copied three times on its way into LevelDB (encode, the batch, the
// memtable): the daemon went past 3.9 GB and failed. Parts are written in unsynced batches
// first, then the header in the synced batch that also holds the plan's captures: LevelDB
// writes its log in order, so the sync that makes the header durable makes every part durable
// with it, and a crash before the header leaves only parts that no header names (removed the
// next time a journal is written or retired). A header without `parts` is a journal written
// by an earlier version (one value): it is read as it is.
import * as fs from 'node:fs'
import { CpfsError } from '../errors.js'
import type { Session, StackChange } from '../session/session.js'
import { decode, encode } from '../store/codec.js'
import { JOURNAL_KEY, prefixEnd, type BatchOp } from '../store/keys.js'
import type { Store } from '../store/store.js'
import type { Fingerprint } from './applier.js'
import type { PlanOp } from './planner.js'
import type { Expect } from './verifier.js'

export interface Journal {
  id: string
  ops: PlanOp[]
  /** What the verifier expects of every path the plan touches. */
  expect: Map<string, Expect>
  /** The stack whose view the real directory holds once the plan is done. */
  targetStack: number[]
  /** The history change that goes with it (offline rewind, redo, restore), committed in the same batch. */
  after?: StackChange
  /** What each path (and each entry below a directory it replaces) was before the plan (applier.ts). */
  prints?: Map<string, Fingerprint>
}

interface Header {
  id: string
  targetStack: number[]
  after?: StackChange
  /** How many parts hold the lists (absent: a journal of one value, from before parts). */
  parts?: number
  hasPrints?: boolean
}

interface Part {
  ops: PlanOp[]
  expect: Array<[string, Expect]>
  prints: Array<[string, Fingerprint]>
}

const PART_PREFIX = 'J'
/** Items (of each list) per part: a part of file writes is a few megabytes. */
const PART_ITEMS = 20_000

function partKey (i: number): string {
  return PART_PREFIX + i.toString().padStart(8, '0')
}

/** Delete ops for every part in the store (those of the current journal and any orphans). */
async function partDeletes (store: Store): Promise<BatchOp[]> {
  const out: BatchOp[] = []
  for await (const key of store.db.keys({ gte: PART_PREFIX, lt: prefixEnd(PART_PREFIX) })) out.push({ type: 'del', key })
  return out
}

/**
 * Write the journal's parts (unsynced) and return the header's put, which the caller adds to
 * the synced batch that starts the plan.
 */
export async function writeJournal (store: Store, j: Journal): Promise<BatchOp> {
  const stale = await partDeletes(store)
  if (stale.length) await store.batch(stale)
  // The maps are read in step with the operations, PART_ITEMS of each list per part: no copy
  // of a whole list is made (three of them were a few GB for 1,000,000 files).
  const expect = j.expect.entries()
  const prints = (j.prints ?? new Map<string, Fingerprint>()).entries()
  const n = Math.max(1, Math.ceil(Math.max(j.ops.length, j.expect.size, j.prints?.size ?? 0) / PART_ITEMS))
  for (let i = 0; i < n; i++) {
    const part: Part = { ops: j.ops.slice(i * PART_ITEMS, (i + 1) * PART_ITEMS), expect: take(expect, PART_ITEMS), prints: take(prints, PART_ITEMS) }
    await store.batch([{ type: 'put', key: partKey(i), value: encode(part) }])
  }
  const header: Header = { id: j.id, targetStack: j.targetStack, parts: n, hasPrints: j.prints !== undefined }
  if (j.after) header.after = j.after
  return { type: 'put', key: JOURNAL_KEY, value: encode(header) }
}

function take<T> (it: Iterator<T>, n: number): T[] {
  const out: T[] = []
  while (out.length < n) {
    const r = it.next()
    if (r.done === true) break
    out.push(r.value)
  }
  return out
}

/** The journal of the plan in progress, or null. A part that is missing is damage, named. */
export function readJournal (store: Store): Journal | null {
  const raw = store.getSync(JOURNAL_KEY)
  if (!raw) return null
  const h = decode<Header & Partial<Journal>>(raw)
  if (h.parts === undefined) {
    // One value: written before parts, with the maps as lists of pairs.
    const old = h as unknown as Omit<Journal, 'expect' | 'prints'> & { expect: Array<[string, Expect]>, prints?: Array<[string, Fingerprint]> }
    return { ...old, expect: new Map(old.expect), prints: old.prints ? new Map(old.prints) : undefined }
  }
  const j: Journal = { id: h.id, ops: [], expect: new Map(), targetStack: h.targetStack }
  if (h.after) j.after = h.after
  const prints = new Map<string, Fingerprint>()
  for (let i = 0; i < h.parts; i++) {
    const v = store.getSync(partKey(i))
    if (!v) {
      throw new CpfsError('STORE_CORRUPT', `the journal of the interrupted plan in ${store.path} is missing part ${i} of ${h.parts}`, `run cpfs fsck ${store.workspaceHint()}; cpfs unmount --discard gives the plan up`)
    }
    const part = decode<Part>(v)
    for (const op of part.ops) j.ops.push(op)
    for (const [p, e] of part.expect) j.expect.set(p, e)
    for (const [p, f] of part.prints) prints.set(p, f)
  }
  if (h.hasPrints) j.prints = prints
  return j
}

/** Whether a plan is in progress (its header is there). */
export function hasJournal (store: Store): boolean {
  return store.getSync(JOURNAL_KEY) !== undefined
}

/** The ops that retire the journal: its header and every part. */
export async function retireJournal (store: Store): Promise<BatchOp[]> {
  return [{ type: 'del', key: JOURNAL_KEY }, ...await partDeletes(store)]
}

/**
 * How far a plan got: before each operation "N s" (it may be half done), after it "N d". Written
 * to a file next to the store (not synced: it is for kill -9), so that finishing the plan
 * after a crash knows which paths it had reached (applier.ts, `resume`).
 */
export class Progress {
  private readonly file: string
  private fd: number | null = null
  private readonly buf = Buffer.alloc(64)
  constructor (session: Session) {
    this.file = `${session.store.path}/plan-progress`
  }

  /** Where plan `id` stopped; unknown: as if it had begun its first operation. */
  read (id: string): { done: number, partial: number } {
    try {
      const [pid, n, state] = fs.readFileSync(this.file, 'utf8').trim().split(/\s+/)
      const i = Number(n)
      if (pid === id && Number.isInteger(i) && i >= 0) return state === 'd' ? { done: i + 1, partial: -1 } : { done: i, partial: i }
    } catch {}
    return { done: 0, partial: 0 }
  }

  write (id: string, index: number, started: boolean): void {
    try {
      if (this.fd === null) this.fd = fs.openSync(this.file, 'w', 0o600)
      const len = this.buf.write(`${id} ${index} ${started ? 's' : 'd'}`.padEnd(48))
      fs.writeSync(this.fd, this.buf, 0, len, 0)
    } catch {} // only a hint: without it every path is re-checked
  }

  /** Done with it; `retired`: the journal is gone too, and so is the hint. */
  close (retired: boolean): void {
    if (this.fd !== null) fs.closeSync(this.fd)
    this.fd = null
    if (retired) fs.rmSync(this.file, { force: true })
  }
}
