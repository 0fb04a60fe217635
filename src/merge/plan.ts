// The three-way merge plan: for each path, what base, theirs and ours hold, and git's rules.
//  - Unchanged on one side: take the other (theirs only changed it → take theirs).
//  - The same change on both: keep it.
//  - Changed differently on both: files merge their modes and contents separately — a mode or
//    content one side left alone takes the other's; text changed on both merges line by line
//    (text.ts), binary content changed on both is a conflict. Everything else — a type changed
//    on one side and changed otherwise on the other, two symlink targets, two modes, an add/add
//    of different content, a modify/delete — is a conflict, as git reports one.
//  - A path that would stay, or be made, under a directory the merge removes or that is not a
//    directory in the result is a conflict: nothing is dropped with a directory unseen.
//  - A file with several names (hard links) that would change is refused ('hard link'): one
//    merge decision per name could split or rewrite the others. A single name is a plain file.
// Planning reads and decides only; it changes nothing. Any conflict means the caller applies
// nothing at all.
import { ancestors } from '../paths/paths.js'
import { sameRefs, type Side, type State } from './sides.js'
import { isBinary, mergeText, tooBig } from './text.js'

export type ChangeKind = 'added' | 'deleted' | 'modified' | 'merged' | 'mode' | 'type' | 'symlink'

export type MergeOp =
  /** Make path (and all below it) what theirs holds: Overlay.restore from theirs' view. */
  | { op: 'take', path: string, change: ChangeKind }
  /** Only the permission bits change (directories, or files whose content ours keeps). */
  | { op: 'mode', path: string, mode: number, change: 'mode' }
  /** A text file merged from both sides' changes. */
  | { op: 'write', path: string, data: Buffer, mode: number, change: 'merged' }

export type ConflictWhy =
  | 'content' | 'binary' | 'mode' | 'symlink' | 'type' | 'add/add' | 'modify/delete'
  | 'directory removed' | 'not a directory' | 'hard link' | 'unsure'

/** One side of a conflict, as a person (or an agent) reads it. */
export interface SideInfo {
  kind: 'file' | 'directory' | 'symlink' | 'special'
  /** Permission bits, octal. */
  mode: string
  size?: number
  /** A text file's content, in full ('utf8'), or base64 when it is not valid UTF-8. */
  text?: string
  encoding?: 'utf8' | 'base64'
  binary?: boolean
  target?: string
}

export interface MergeConflict {
  path: string
  why: ConflictWhy
  base: SideInfo | null
  theirs: SideInfo | null
  ours: SideInfo | null
  /** Text changed on both sides: the merge with git's markers around each clash. */
  merged?: string
  mergedEncoding?: 'utf8' | 'base64'
}

export interface MergePlan {
  ops: MergeOp[]
  conflicts: MergeConflict[]
}

type Decision =
  | { keep: true }
  | { keep: false, op: MergeOp, result: State | { kind: 'f' } | null }
  | { conflict: ConflictWhy, merged?: Buffer }

const KEEP: Decision = { keep: true }

/**
 * Plan bringing the change base → theirs into ours at `paths` (mergePaths). `unsure`: paths
 * whose base is not known for sure (a sandboxed run's), each a conflict.
 */
export function planMerge (base: Side, theirs: Side, ours: Side, paths: Iterable<string>, opts: { unsure?: Iterable<string> } = {}): MergePlan {
  const decided = new Map<string, Decision>()
  const unsure = new Set(opts.unsure ?? [])
  const sorted = [...new Set([...paths, ...unsure])].filter(p => p !== '/').sort(byComponents)
  for (const p of sorted) decided.set(p, unsure.has(p) ? { conflict: 'unsure' } : decide(base, theirs, ours, p))
  const conflicts: MergeConflict[] = []
  const ops: MergeOp[] = []
  // What each path is after the merge: its decision's result, or ours where nothing was decided.
  const after = (p: string): { kind: string } | null => {
    const d = decided.get(p)
    if (!d || 'conflict' in d || d.keep) return ours.state(p)
    return d.result
  }
  for (const p of sorted) {
    const d = decided.get(p)!
    if ('conflict' in d) {
      conflicts.push(conflictOf(base, theirs, ours, p, d.conflict, d.merged))
      continue
    }
    if (after(p) !== null) {
      for (const a of ancestors(p)) {
        if (a === '/') break
        const s = after(a)
        if (s !== null && s.kind === 'd') continue
        conflicts.push(conflictOf(base, theirs, ours, p, s === null ? 'directory removed' : 'not a directory'))
        break
      }
    }
    if (!d.keep) ops.push(d.op)
  }
  return { ops: dropCovered(ops), conflicts }
}

/** Sort paths by their components: a directory right before what is below it. */
export function byComponents (a: string, b: string): number {
  const x = a.split('/')
  const y = b.split('/')
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1
  return x.length - y.length
}

/** A `take` replaces all below its path: later ops there would only repeat it. */
function dropCovered (ops: MergeOp[]): MergeOp[] {
  const out: MergeOp[] = []
  let whole: string | null = null
  for (const op of ops) {
    if (whole !== null && op.path.startsWith(whole + '/')) continue
    out.push(op)
    whole = op.op === 'take' ? op.path : null
  }
  return out
}

function decide (base: Side, theirs: Side, ours: Side, p: string): Decision {
  const B = base.state(p)
  const T = theirs.state(p)
  const O = ours.state(p)
  if (same(base, B, theirs, T, p)) return KEEP
  if (same(theirs, T, ours, O, p)) return KEEP
  if (same(base, B, ours, O, p)) {
    // Only theirs' mode differs from ours: a mode change, not a new file.
    if (T !== null && O !== null && T.kind === 'f' && O.kind === 'f' && sameBytes(theirs, T, ours, O, p)) return refuseLinked({ keep: false, op: { op: 'mode', path: p, mode: T.mode, change: 'mode' }, result: O }, B, T, O)
    return refuseLinked(take(p, T, O), B, T, O)
  }
  // Changed on both sides, differently.
  if (B === null) {
    // Made on both sides as directories: git has no directory modes; ours stays, and what is below is decided path by path.
    if (T !== null && O !== null && T.kind === 'd' && O.kind === 'd') return KEEP
    if (T !== null && O !== null && T.kind === 'f' && O.kind === 'f' && !tooBig(T.size) && !tooBig(O.size) && !isBinary(theirs.bytes(p)) && !isBinary(ours.bytes(p))) {
      return { conflict: 'add/add', merged: mergeText(Buffer.alloc(0), theirs.bytes(p), ours.bytes(p)).merged }
    }
    return { conflict: 'add/add' }
  }
  if (T === null || O === null) return { conflict: 'modify/delete' }
  if (B.kind !== T.kind || T.kind !== O.kind) return { conflict: 'type' }
  if (T.kind === 'l') return { conflict: 'symlink' }
  if (T.kind === 'n') return { conflict: 'type' }
  const mode = merge3(B.mode, T.mode, O.mode)
  if (mode === null) return { conflict: 'mode' }
  if (T.kind === 'd') return refuseLinked({ keep: false, op: { op: 'mode', path: p, mode, change: 'mode' }, result: O }, B, T, O)
  return refuseLinked(mergeFiles(base, theirs, ours, p, mode), B, T, O)
}

/** Files changed on both sides: modes and contents each merge on their own. */
function mergeFiles (base: Side, theirs: Side, ours: Side, p: string, mode: number): Decision {
  const B = base.state(p)!
  const T = theirs.state(p)!
  const O = ours.state(p)!
  const tookTheirs = sameBytes(base, B, ours, O, p) && !sameBytes(base, B, theirs, T, p)
  if (tookTheirs) {
    if (mode === T.mode) return { keep: false, op: { op: 'take', path: p, change: 'modified' }, result: T }
    return { keep: false, op: { op: 'write', path: p, data: theirs.bytes(p), mode, change: 'merged' }, result: { kind: 'f' } }
  }
  if (sameBytes(base, B, theirs, T, p) || sameBytes(theirs, T, ours, O, p)) {
    // Ours' content stays; only the mode can change.
    return mode === O.mode ? KEEP : { keep: false, op: { op: 'mode', path: p, mode, change: 'mode' }, result: O }
  }
  if (tooBig(B.size) || tooBig(T.size) || tooBig(O.size)) return { conflict: 'binary' }
  const b = base.bytes(p)
  const t = theirs.bytes(p)
  const o = ours.bytes(p)
  if (isBinary(b) || isBinary(t) || isBinary(o)) return { conflict: 'binary' }
  const m = mergeText(b, t, o)
  if (m.conflict) return { conflict: 'content', merged: m.merged }
  // Both sides' changes were in ours already (a revert made twice): nothing to write.
  if (m.merged.equals(o) && mode === O.mode) return KEEP
  return { keep: false, op: { op: 'write', path: p, data: m.merged, mode, change: 'merged' }, result: { kind: 'f' } }
}

/** Take theirs' state where ours is as base had it. */
function take (p: string, T: State | null, O: State | null): Decision {
  if (T !== null && O !== null && T.kind === 'd' && O.kind === 'd') {
    // A directory is never replaced whole: only its mode changes, each path below is decided on its own.
    return { keep: false, op: { op: 'mode', path: p, mode: T.mode, change: 'mode' }, result: O }
  }
  const change: ChangeKind = T === null ? 'deleted' : O === null ? 'added' : T.kind !== O.kind ? 'type' : T.kind === 'l' ? 'symlink' : 'modified'
  return { keep: false, op: { op: 'take', path: p, change }, result: T }
}

/**
 * A change to a file with several names is refused: ours' (the names the change would touch or
 * split) or theirs' (the state it would make). Base's names are history, not touched.
 */
function refuseLinked (d: Decision, _base: State | null, theirs: State | null, ours: State | null): Decision {
  if ('conflict' in d || d.keep) return d
  return [theirs, ours].some(s => s !== null && s.names > 1) ? { conflict: 'hard link' } : d
}

/** The one mode both changes agree on, or null when both changed it differently. */
function merge3 (b: number, t: number, o: number): number | null {
  if (b === t) return o
  if (b === o || t === o) return t
  return null
}

/** The same state at p on both sides: kind, mode, symlink target, device, bytes. Times and owners are not compared (git does neither). */
function same (x: Side, a: State | null, y: Side, b: State | null, p: string): boolean {
  if (a === null || b === null) return a === b
  if (a.kind !== b.kind) return false
  if (a.kind === 'l') return a.target === b.target
  if (a.mode !== b.mode) return false
  if (a.kind === 'n') return a.fmt === b.fmt && a.rdev === b.rdev
  if (a.kind === 'd') return true
  return sameBytes(x, a, y, b, p)
}

function sameBytes (x: Side, a: State, y: Side, b: State, p: string): boolean {
  if (a.size !== b.size) return false
  if (x.refsCurrent(p) && y.refsCurrent(p) && sameRefs(a, b)) return true
  return x.bytes(p).equals(y.bytes(p))
}

function conflictOf (base: Side, theirs: Side, ours: Side, p: string, why: ConflictWhy, merged?: Buffer): MergeConflict {
  const c: MergeConflict = { path: p, why, base: info(base, p), theirs: info(theirs, p), ours: info(ours, p) }
  if (merged !== undefined) {
    const m = asText(merged)
    c.merged = m.text
    c.mergedEncoding = m.encoding
  }
  return c
}

function info (side: Side, p: string): SideInfo | null {
  const s = side.state(p)
  if (s === null) return null
  const kind = s.kind === 'f' ? 'file' : s.kind === 'd' ? 'directory' : s.kind === 'l' ? 'symlink' : 'special'
  const out: SideInfo = { kind, mode: s.mode.toString(8).padStart(4, '0') }
  if (s.kind === 'l') out.target = s.target
  if (s.kind === 'f') {
    out.size = s.size
    if (tooBig(s.size) || isBinary(side.bytes(p))) out.binary = true
    else Object.assign(out, asText(side.bytes(p)))
  }
  return out
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Text for JSON: UTF-8 when it is, else base64 (the bytes exactly). */
function asText (b: Buffer): { text: string, encoding: 'utf8' | 'base64' } {
  try {
    return { text: utf8.decode(b), encoding: 'utf8' }
  } catch {
    return { text: b.toString('base64'), encoding: 'base64' }
  }
}
