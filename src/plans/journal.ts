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
// by an earlier version (one value): it is read as it is. Journals of store versions 1 to 3
// name the extended attributes of operations and expectations `x`: read as `xattrs`.
import * as fs from 'node:fs'
import { CpfsError } from '../errors.js'
import type { Session, StackChange } from '../session/session.js'
import { decode, encode } from '../store/codec.js'
import { JOURNAL_KEY, prefixEnd, type BatchOp } from '../store/keys.js'
import type { Store } from '../store/store.js'
import type { Fingerprint } from './real-tree.js'
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

/**
 * A part as stored: each list's paths apart, front-coded (frontCode). A plan lists each path up
 * to three times, and a tree 10,000 levels deep has 10,000 paths of up to 20,000 characters:
 * whole, its journal was 400 MB (15 s to encode, 7 s to write of a 68 s unmount); front-coded
 * it is 1.2 MB, as a path made right after its parent is the parent's length and one name.
 */
interface Part {
  ops: Array<Omit<PlanOp, 'path'>>
  opPaths: Array<number | string>
  expect: Expect[]
  expectPaths: Array<number | string>
  prints: Fingerprint[]
  printPaths: Array<number | string>
}

function encodePart (ops: PlanOp[], expect: Array<[string, Expect]>, prints: Array<[string, Fingerprint]>): Buffer {
  const part: Part = {
    ops: ops.map(({ path, ...rest }) => rest),
    opPaths: frontCode(ops.map(op => op.path)),
    expect: expect.map(([, e]) => e),
    expectPaths: frontCode(expect.map(([p]) => p)),
    prints: prints.map(([, f]) => f),
    printPaths: frontCode(prints.map(([p]) => p))
  }
  return encode(part)
}

/**
 * Paths as [shared length, rest, shared length, rest, ...], each against the one before. The
 * shared part is the whole of one of the two, or ends with a '/': never the middle of a
 * character (a lone half of a surrogate pair would not survive UTF-8).
 */
export function frontCode (paths: Iterable<string>): Array<number | string> {
  const out: Array<number | string> = []
  let prev = ''
  for (const p of paths) {
    const n = shared(prev, p)
    out.push(n, p.slice(n))
    prev = p
  }
  return out
}

/** Length of the part of b that frontCode takes from a. */
function shared (a: string, b: string): number {
  // Slices compared with === (memcmp); startsWith went character by character, 10 times slower.
  const m = Math.min(a.length, b.length)
  if (a.slice(0, m) === b.slice(0, m)) return m // a child after its parent, or a parent after its child
  let lo = 0 // a.slice(0, lo) === b.slice(0, lo)
  let hi = m - 1 // the first hi + 1 characters differ
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (a.slice(0, mid) === b.slice(0, mid)) lo = mid
    else hi = mid - 1
  }
  return lo === 0 ? 0 : b.lastIndexOf('/', lo - 1) + 1
}

/** The paths frontCode coded. */
export function frontDecode (coded: Array<number | string>): string[] {
  const out: string[] = []
  let prev = ''
  for (let i = 0; i + 1 < coded.length; i += 2) {
    const n = coded[i] as number
    const rest = coded[i + 1] as string
    prev = rest === '' ? prev.slice(0, n) : n === 0 ? rest : prev.slice(0, n) + rest
    out.push(prev)
  }
  return out
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
    const value = encodePart(j.ops.slice(i * PART_ITEMS, (i + 1) * PART_ITEMS), take(expect, PART_ITEMS), take(prints, PART_ITEMS))
    await store.batch([{ type: 'put', key: partKey(i), value }])
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
    old.ops.forEach(readXattrs)
    old.expect.forEach(([, e]) => readXattrs(e))
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
    const opPaths = frontDecode(part.opPaths)
    for (let k = 0; k < part.ops.length; k++) j.ops.push(readXattrs({ ...part.ops[k], path: opPaths[k] } as PlanOp))
    const expectPaths = frontDecode(part.expectPaths)
    for (let k = 0; k < part.expect.length; k++) j.expect.set(expectPaths[k], readXattrs(part.expect[k]))
    const printPaths = frontDecode(part.printPaths)
    for (let k = 0; k < part.prints.length; k++) prints.set(printPaths[k], part.prints[k])
  }
  if (h.hasPrints) j.prints = prints
  return j
}

/** An operation or expectation as this version names it: `x` (store versions 1 to 3) is `xattrs`. */
function readXattrs<T extends PlanOp | Expect> (item: T): T {
  const old = item as T & { x?: Record<string, Buffer> | null }
  if (old.x !== undefined) {
    (item as any).xattrs = old.x
    delete old.x
  }
  return item
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
