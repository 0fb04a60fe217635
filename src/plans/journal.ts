// The journal of a plan (run.ts): written in the synced batch that holds its captures, read
// back to finish (or roll back, or set aside) a plan a crash interrupted.
//
// Paths are stored front-coded: each as the length it shares with the path before it (in the
// same list) and the rest. A plan lists each path up to three times (its ops, what the
// verifier expects, the fingerprints), and a tree 10,000 levels deep has 10,000 paths of up
// to 20,000 characters: whole, its journal was 400 MB, and encoding it took 15 s and writing
// it 7 s of the 68 s its unmount took. Front-coded it is 1.2 MB (a path made right after its
// parent is the parent's length and one name). Journals written whole, by earlier versions,
// are read as they are.
import { decode, encode } from '../store/codec.js'
import type { StackChange } from '../session/session.js'
import type { Fingerprint } from './applier.js'
import type { PlanOp } from './planner.js'
import type { Expect } from './verifier.js'

export interface Journal {
  id: string
  ops: PlanOp[]
  expect: Array<[string, Expect]>
  /** The stack whose view the real directory holds once the plan is done. */
  targetStack: number[]
  /** The history change that goes with it (offline rewind, redo, restore), committed in the same batch. */
  after?: StackChange
  /** What each path (and each entry below a directory it replaces) was before the plan (applier.ts). */
  prints?: Array<[string, Fingerprint]>
}

/** A journal as stored from format 2 on: each list's paths apart, front-coded (`fc`). */
interface Stored {
  v: 2
  id: string
  /** The ops without their `path`. */
  ops: Array<Omit<PlanOp, 'path'>>
  opPaths: Array<number | string>
  expect: Expect[]
  expectPaths: Array<number | string>
  targetStack: number[]
  after?: StackChange
  prints?: Fingerprint[]
  printPaths?: Array<number | string>
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

export function encodeJournal (j: Journal): Buffer {
  const stored: Stored = {
    v: 2,
    id: j.id,
    ops: j.ops.map(({ path, ...rest }) => rest),
    opPaths: frontCode(j.ops.map(op => op.path)),
    expect: j.expect.map(([, e]) => e),
    expectPaths: frontCode(j.expect.map(([p]) => p)),
    targetStack: j.targetStack
  }
  if (j.after) stored.after = j.after
  if (j.prints) {
    stored.prints = j.prints.map(([, f]) => f)
    stored.printPaths = frontCode(j.prints.map(([p]) => p))
  }
  return encode(stored)
}

export function decodeJournal (raw: Buffer | Uint8Array): Journal {
  const s = decode<Stored | Journal>(raw)
  if (!('v' in s)) return s // written whole (before format 2)
  const opPaths = frontDecode(s.opPaths)
  const expectPaths = frontDecode(s.expectPaths)
  const j: Journal = {
    id: s.id,
    ops: s.ops.map((op, i) => ({ ...op, path: opPaths[i] }) as PlanOp),
    expect: s.expect.map((e, i) => [expectPaths[i], e]),
    targetStack: s.targetStack
  }
  if (s.after) j.after = s.after
  if (s.prints && s.printPaths) {
    const printPaths = frontDecode(s.printPaths)
    j.prints = s.prints.map((f, i) => [printPaths[i], f])
  }
  return j
}
