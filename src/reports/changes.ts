// What changes between two views, for people: the planner's operations folded into one
// change per path, with line counts for text files, a unified diff on request, one line for
// binary files, modes, symlink targets, deletions and directory moves. Used by `cpfs diff`
// and `cpfs rewind --dry-run`. Read-only: it never stores anything.
import { diffLines } from 'diff'
import { filePatch, lineCount, MAX_EDIT_LINES, type Side } from './patch.js'
import { readEntry } from '../real/lower.js'
import { sameContent, viewContent } from '../plans/content.js'
import { isWithin, rebase } from '../paths/paths.js'
import { resolvedType, type Resolved, type View } from '../overlay/view.js'
import type { ChunkStore } from '../store/chunks.js'
import type { FileEntry, Kind } from '../store/entries.js'
import { planViews, sameXattrs, xattrsOf, type Content, type PlanOp } from '../plans/planner.js'
import { isCpfsError } from '../errors.js'

export interface Change {
  path: string
  change: 'added' | 'deleted' | 'modified' | 'mode' | 'type' | 'symlink' | 'moved' | 'owner' | 'xattrs'
  kind: Kind
  insertions: number
  deletions: number
  binary: boolean
  from?: string
  oldMode?: number
  newMode?: number
  oldTarget?: string
  newTarget?: string
  oldSize?: number
  newSize?: number
  patch?: string
}

const TEXT_LIMIT = 8 * 1024 * 1024

/** A file's bytes when small enough to diff as text; large files only carry their size. */
type Bytes = Buffer | { size: number, large: true }

export function readAll (view: View, r: Resolved, chunks: ChunkStore): Bytes {
  const size = r.kind === 'upper' ? (r.entry as FileEntry).size : (r.stat as any).size as number
  if (size > TEXT_LIMIT) return { size, large: true }
  const buf = Buffer.alloc(size)
  if (r.kind === 'lower' && 'nlink' in r.stat) {
    view.lower.read(r.lowerPath, buf, 0, buf.length, 0)
    return buf
  }
  const e = (r.kind === 'upper' ? r.entry : r.stat) as FileEntry
  const src = e.src
  try {
    readEntry(e, chunks, buf, 0, e.size, 0, src === undefined ? null : (b, off, len, pos) => view.lower.read(src, b, off, len, pos))
  } catch (err) {
    // Read without fetching (the log's counts in a lazy clone): a file whose data is still on
    // the remote is counted as changed, by size, without lines.
    if (isNotFetched(err)) return { size, large: true }
    throw err
  }
  return buf
}

function isNotFetched (err: unknown): boolean {
  return isCpfsError(err) && err.code === 'NOT_FETCHED'
}

function lengthOf (b: Bytes): number {
  return Buffer.isBuffer(b) ? b.length : b.size
}

/** Same bytes? Small files compare directly, large ones by their chunk hashes. */
function sameFile (from: View, before: Resolved, a: Bytes, to: View, after: Resolved, b: Bytes, chunks: ChunkStore): boolean {
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b)
  if (lengthOf(a) !== lengthOf(b)) return false
  const content = (v: View, r: Resolved) => viewContent(v.lower, chunks, contentOf(r), lengthOf(a), false)
  try {
    return sameContent(content(from, before), content(to, after))
  } catch (err) {
    if (!isNotFetched(err)) throw err
    // Not fetched: the same chunks are the same bytes; other chunks count as a change.
    const ca = contentOf(before)
    const cb = contentOf(after)
    return ca.from === 'entry' && cb.from === 'entry' && sameChunks(ca.entry, cb.entry)
  }
}

function sameChunks (a: FileEntry, b: FileEntry): boolean {
  if (a.size !== b.size || a.src !== b.src || a.chunks.size !== b.chunks.size) return false
  for (const [idx, h] of a.chunks) {
    const o = b.chunks.get(idx)
    if (h === null ? o !== null : (o === undefined || o === null || !h.equals(o))) return false
  }
  return true
}

function contentOf (r: Resolved): Content {
  if (r.kind === 'upper') return { from: 'entry', entry: r.entry as FileEntry }
  if (!('nlink' in r.stat)) return { from: 'entry', entry: r.stat as FileEntry }
  return { from: 'lower', path: r.lowerPath }
}

function isText (b: Buffer): boolean {
  return b.length <= TEXT_LIMIT && !b.subarray(0, 8192).includes(0)
}

function modeOf (r: Resolved): number {
  return (r.kind === 'upper' ? r.entry.mode : r.stat.mode) & 0o7777
}

function target (v: View, r: Resolved): string {
  if (r.kind === 'upper') return (r.entry as any).target
  if (!('nlink' in r.stat)) return (r.stat as any).target
  return v.lower.readlink(r.lowerPath)
}

function countLines (a: string, b: string): { insertions: number, deletions: number } {
  let insertions = 0
  let deletions = 0
  const parts = diffLines(a, b, { maxEditLength: MAX_EDIT_LINES })
  // Too different to search for the minimal diff (patch.ts): every old line out, every new one in.
  if (!parts) return { insertions: lineCount(b), deletions: lineCount(a) }
  for (const part of parts) {
    if (part.added) insertions += part.count ?? 0
    else if (part.removed) deletions += part.count ?? 0
  }
  return { insertions, deletions }
}

/** Describe how `to` differs from `from` at the touched paths. */
export function describeChanges (from: View, to: View, touched: Iterable<string>, chunks: ChunkStore, opts: { patches?: boolean } = {}): Change[] {
  const plan = planViews(from, to, touched)
  const out = new Map<string, Change>()
  const moves = dirMoves(plan.ops, from, to)
  for (const m of moves) describeMove(m, from, to, chunks, opts, out)
  describeOps(plan.ops, moves, from, to, chunks, opts, out)
  // In a patch, a moved directory is its files renamed (those that changed carry their own).
  if (opts.patches) for (const m of moves) patchMove(m, from, to, chunks, out)
  return [...out.values()].sort((a, b) => a.path < b.path ? -1 : a.path > b.path ? 1 : 0)
}

interface DirMove { from: string, to: string, lower: string }

/** A directory created with a redirect to the lower of a removed one is a move. */
function dirMoves (ops: PlanOp[], from: View, to: View): DirMove[] {
  const removedDirs = new Map<string, string>() // lower path of a removed directory -> its path

  for (const op of ops) {
    if (op.op === 'remove' && op.type === 'd') {
      const op2 = from.dirLowerPath(op.path)
      if (op2 !== null) removedDirs.set(op2, op.path)
    }
  }
  const moves: DirMove[] = []
  for (const op of ops) {
    if (op.op !== 'mkdir') continue
    const e = to.entries.get(op.path)
    if (e && e.kind === 'd' && e.redirect !== undefined && removedDirs.has(e.redirect)) {
      moves.push({ from: removedDirs.get(e.redirect)!, to: op.path, lower: e.redirect })
    }
  }
  return moves
}

/** A moved directory, and what was under its old name and is gone from the new one. */
function describeMove (m: DirMove, from: View, to: View, chunks: ChunkStore, opts: { patches?: boolean }, out: Map<string, Change>): void {
  out.set(m.to, { path: m.to, change: 'moved', kind: 'd', from: m.from, insertions: 0, deletions: 0, binary: false })
  // What was under the old name and is gone from the new one was deleted in the move.
  // An explicit stack, not recursion: a tree can be deeper than the call stack.
  const stack = [m.from]
  for (let q = stack.pop(); q !== undefined; q = stack.pop()) {
    const subdirs: string[] = []
    for (const name of from.readdir(q)) {
      const child = q === '/' ? '/' + name : q + '/' + name
      const before = from.resolve(child)
      if (!before) continue
      if (!to.resolve(rebase(child, m.from, m.to))) {
        const c = describeOne(from, to, child, before, null, chunks, opts)
        if (c) out.set(child, c)
      } else if (resolvedType(before) === 'd') subdirs.push(child)
    }
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i])
  }
}

/** Each operation of the plan as the change it makes (inside moved directories, only what differs). */
function describeOps (ops: PlanOp[], moves: DirMove[], from: View, to: View, chunks: ChunkStore, opts: { patches?: boolean }, out: Map<string, Change>): void {
  const movedFrom = (p: string): DirMove | undefined => moves.find(m => isWithin(p, m.from))
  const movedTo = (p: string): DirMove | undefined => moves.find(m => isWithin(p, m.to))
  for (const op of ops) {
    const p = op.path
    if (out.has(p) && out.get(p)!.change === 'moved') continue
    const mf = movedFrom(p)
    if (mf && op.op === 'remove') continue
    const mt = movedTo(p)
    const before = mt ? from.resolve(rebase(p, mt.to, mt.from)) : from.resolve(p)
    const after = to.resolve(p)
    if (mt && before && after && resolvedType(before) === resolvedType(after)) {
      // Inside a moved directory: report only what differs from the old location.
      if (after.kind === 'lower' && before.kind === 'lower' && after.lowerPath === before.lowerPath) continue
    }
    const prev = out.get(p)
    if (prev && prev.change !== 'deleted') continue
    const oldPath = mt && before ? rebase(p, mt.to, mt.from) : p
    const c = describeOne(from, to, p, before, after, chunks, opts, oldPath)
    if (c && oldPath !== p) c.from = oldPath
    if (c) out.set(p, c)
    // A removed directory takes everything below it: list each path (an agent host shows
    // every file a rewind would delete).
    if (op.op === 'remove' && op.type === 'd') listBelow(from, p, (q, r) => {
      if (!to.resolve(q) || resolvedType(to.resolve(q)!) !== resolvedType(r)) {
        const d = describeOne(from, to, q, r, null, chunks, opts)
        if (d && !out.has(q)) out.set(q, d)
      }
    })
  }
}

/** The patch of a moved directory: its files renamed. */
function patchMove (m: DirMove, from: View, to: View, chunks: ChunkStore, out: Map<string, Change>): void {
  let text = ''
  listBelow(to, m.to, (q, r) => {
    const kind = resolvedType(r)
    if (out.has(q) || (kind !== 'f' && kind !== 'l')) return
    const orig = rebase(q, m.to, m.from)
    const was = from.resolve(orig)
    if (was && resolvedType(was) === kind) text += filePatch(side(from, was, orig, chunks), side(to, r, q, chunks))
  })
  if (text) out.get(m.to)!.patch = text
}

/**
 * Every path below dir in v, each before what is below it, depth first in readdir order (as
 * recursion would list them), with an explicit stack: a tree can be deeper than the call stack.
 */
function listBelow (v: View, dir: string, fn: (p: string, r: Resolved) => void): void {
  const stack: Array<{ dir: string, names: string[], i: number }> = [{ dir, names: v.readdir(dir), i: 0 }]
  while (stack.length) {
    const top = stack[stack.length - 1]
    if (top.i >= top.names.length) {
      stack.pop()
      continue
    }
    const name = top.names[top.i++]
    const q = top.dir === '/' ? '/' + name : top.dir + '/' + name
    const r = v.resolve(q)
    if (!r) continue
    fn(q, r)
    if (resolvedType(r) === 'd') stack.push({ dir: q, names: v.readdir(q), i: 0 })
  }
}

/** One side of a patch: a file's bytes (null when too large to diff) or a symlink's target. */
function side (v: View, r: Resolved, path: string, chunks: ChunkStore, bytes?: Bytes): Side | null {
  const kind = resolvedType(r)
  if (kind === 'l') return { path, kind, mode: 0o777, data: Buffer.from(target(v, r)) }
  if (kind !== 'f') return null
  const b = bytes ?? readAll(v, r, chunks)
  return { path, kind, mode: modeOf(r), data: Buffer.isBuffer(b) ? b : null }
}

function describeOne (from: View, to: View, p: string, before: Resolved | null, after: Resolved | null, chunks: ChunkStore, opts: { patches?: boolean }, oldPath = p): Change | null {
  if (!before && !after) return null
  const base = { path: p, insertions: 0, deletions: 0, binary: false }
  const patch = (c: Change, a: Bytes | undefined, b: Bytes | undefined): Change => {
    if (!opts.patches) return c
    // Directories and special files have no patch form: only files and symlinks count.
    const old = before ? side(from, before, oldPath, chunks, a) : null
    const now = after ? side(to, after, p, chunks, b) : null
    const text = old || now ? filePatch(old, now) : ''
    if (text) c.patch = text
    return c
  }
  if (!after) {
    const kind = resolvedType(before!)
    const c: Change = { ...base, change: 'deleted', kind }
    let a: Bytes | undefined
    if (kind === 'f') addText(c, a = readAll(from, before!, chunks), Buffer.alloc(0))
    if (kind === 'l') c.oldTarget = target(from, before!)
    return patch(c, a, undefined)
  }
  const kind = resolvedType(after)
  if (!before) {
    const c: Change = { ...base, change: 'added', kind, newMode: modeOf(after) }
    let b: Bytes | undefined
    if (kind === 'f') addText(c, Buffer.alloc(0), b = readAll(to, after, chunks))
    if (kind === 'l') c.newTarget = target(to, after)
    return patch(c, undefined, b)
  }
  const oldKind = resolvedType(before)
  if (oldKind !== kind) {
    const c: Change = { ...base, change: 'type', kind }
    const a = oldKind === 'f' ? readAll(from, before, chunks) : undefined
    const b = kind === 'f' ? readAll(to, after, chunks) : undefined
    if (kind === 'f') addText(c, a ?? Buffer.alloc(0), b!)
    return patch(c, a, b)
  }
  if (kind === 'l') {
    const a = target(from, before)
    const b = target(to, after)
    if (a !== b) return patch({ ...base, change: 'symlink', kind, oldTarget: a, newTarget: b }, undefined, undefined)
    const ob = before.kind === 'upper' ? before.entry : before.stat
    const oa = after.kind === 'upper' ? after.entry : after.stat
    return ob.uid === oa.uid && ob.gid === oa.gid ? null : { ...base, change: 'owner', kind }
  }
  const c: Change = { ...base, change: 'modified', kind, oldMode: modeOf(before), newMode: modeOf(after) }
  if (kind === 'f') {
    const a = readAll(from, before, chunks)
    const b = readAll(to, after, chunks)
    c.oldSize = lengthOf(a)
    c.newSize = lengthOf(b)
    if (!sameFile(from, before, a, to, after, b, chunks)) {
      addText(c, a, b)
      return patch(c, a, b)
    }
  }
  if (c.oldMode !== c.newMode) return patch({ ...c, change: 'mode' }, undefined, undefined)
  const ob = before.kind === 'upper' ? before.entry : before.stat
  const oa = after.kind === 'upper' ? after.entry : after.stat
  if (kind !== 'd' && (ob.uid !== oa.uid || ob.gid !== oa.gid)) return { ...c, change: 'owner' }
  // Only the extended attributes (setfattr, setfacl): a change like any other, that no patch carries.
  return sameXattrs(xattrsOf(from, before), xattrsOf(to, after)) ? null : { ...c, change: 'xattrs' }
}

function addText (c: Change, a: Bytes, b: Bytes): void {
  c.oldSize = lengthOf(a)
  c.newSize = lengthOf(b)
  if (!Buffer.isBuffer(a) || !Buffer.isBuffer(b) || !isText(a) || !isText(b)) {
    c.binary = true
    return
  }
  Object.assign(c, countLines(a.toString('utf8'), b.toString('utf8')))
}

export function totals (changes: Change[]): { insertions: number, deletions: number } {
  let insertions = 0
  let deletions = 0
  for (const c of changes) {
    insertions += c.insertions
    deletions += c.deletions
  }
  return { insertions, deletions }
}
