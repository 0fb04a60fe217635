// The planner: a pure function from two views — `expected`, what the store believes the real
// directory holds, and `target`, what it should hold — to an ordered list of operations.
// It visits only paths some differing layer touched (and their ancestors), so a plan for
// one changed file in a 100,000-file tree looks at one path. A touched directory that is
// opaque or redirected (rm -rf + mkdir, a moved directory) is compared child by child.
// Order: a path's removal comes before what replaces it, parents before children, and
// directory modes last (deepest first) so that a read-only directory does not block writes.
//
// Hard links: the names of an inode record (store/entries.ts) become real hard links of one
// file. For each record the plan touches, an `anchor` op (first in the plan, before anything
// is removed) gives the applier that file under a temporary name: the real file one of its
// names already is (linked, then rewritten in place if its content changed, so real names the
// history does not list, outside the workspace too, keep sharing it), or a new one. `link` ops
// (after every other change but directory modes) then make each name a link to it.
import { FIRST_INO } from '../store/store.js'
import { inoOfKey, isInoKey, srcBytes, type FileEntry, type Kind, type NodeEntry } from '../store/entries.js'
import { ancestors, join } from '../paths/paths.js'
import { isLinked, resolvedType, type Resolved, type View } from '../overlay/view.js'

export type Content =
  | { from: 'entry', entry: FileEntry }
  | { from: 'lower', path: string }

export type PlanOp =
  | { op: 'remove', path: string, type: Kind }
  | { op: 'mkdir', path: string }
  | { op: 'write', path: string, mode: number, size: number, content?: Content, data?: Array<[number, string]>, ifDiffers?: boolean, ino?: number } & Times & Attrs
  | { op: 'symlink', path: string, target: string } & Partial<Times> & Attrs
  | { op: 'chmod', path: string, mode: number } & Partial<Times> & Attrs
  | { op: 'mknod', path: string, fmt: number, rdev: number, mode: number } & Times & Attrs
  | AnchorOp
  | { op: 'link', path: string, ino: number }

/**
 * The real file behind inode record `ino`, under a temporary name for the plan: a link to the
 * real file at `from` (a name it already has; its content rewritten in place unless `same`), or
 * a new file. `path` is `from`, or the first name when there is none. Then its state is set.
 */
export type AnchorOp = {
  op: 'anchor'
  path: string
  ino: number
  type: Kind
  from?: string
  same?: boolean
  mode: number
  size: number
  content?: Content
  data?: Array<[number, string]>
  target?: string
  fmt?: number
  rdev?: number
} & Times & Attrs

/** Owner and extended attributes a plan sets (xattrs: the whole set; absent = none). */
export interface Attrs {
  uid: number
  gid: number
  xattrs?: Record<string, Buffer>
}

/** Times a plan sets: milliseconds and the nanoseconds within them (see store/entries.ts). */
export interface Times {
  atime: number
  mtime: number
  atimeNs: number
  mtimeNs: number
}

export interface Plan {
  ops: PlanOp[]
}

function modeOf (r: Resolved): number {
  return (r.kind === 'upper' ? r.entry.mode : r.stat.mode) & 0o7777
}

function timesOf (r: Resolved): Times {
  const s = r.kind === 'upper' ? r.entry : r.stat
  return { atime: s.atime, mtime: s.mtime, atimeNs: s.atimeNs ?? 0, mtimeNs: s.mtimeNs ?? 0 }
}

function sameMtime (a: Resolved, b: Resolved): boolean {
  const x = timesOf(a)
  const y = timesOf(b)
  return x.mtime === y.mtime && x.mtimeNs === y.mtimeNs
}

function ownerOf (r: Resolved): { uid: number, gid: number } {
  const s = r.kind === 'upper' ? r.entry : r.stat
  return { uid: s.uid, gid: s.gid }
}

/** The extended attributes of r in view v (absent: none). */
export function xattrsOf (v: View, r: Resolved): Record<string, Buffer> | undefined {
  if (r.kind === 'upper') return r.entry.xattrs
  return 'nlink' in r.stat ? v.lower.xattrs(r.lowerPath) : r.stat.xattrs
}

/** Owner and xattrs of r in view v, as a plan op carries them. */
function attrsOf (v: View, r: Resolved): Attrs {
  const x = xattrsOf(v, r)
  return x ? { ...ownerOf(r), xattrs: x } : ownerOf(r)
}

export function sameXattrs (a: Record<string, Buffer> | undefined, b: Record<string, Buffer> | undefined): boolean {
  const ka = Object.keys(a ?? {})
  if (ka.length !== Object.keys(b ?? {}).length) return false
  return ka.every(k => b![k] !== undefined && a![k].equals(b![k]))
}

function contentOf (r: Resolved): Content {
  if (r.kind === 'upper') return { from: 'entry', entry: r.entry as FileEntry }
  if (!('nlink' in r.stat)) return { from: 'entry', entry: r.stat as FileEntry }
  return { from: 'lower', path: r.lowerPath }
}

function inoOf (r: Resolved): number {
  if (isInoKey(r.key)) return inoOfKey(r.key)
  return r.kind === 'upper' ? r.entry.ino : r.stat.ino
}

/** A special node's type and device number. */
function nodeOf (r: Resolved): { fmt: number, rdev: number } {
  if (r.kind === 'upper') return { fmt: (r.entry as NodeEntry).fmt, rdev: (r.entry as NodeEntry).rdev }
  const s = r.stat as any
  return 'nlink' in s ? { fmt: s.mode & 0o170000, rdev: s.rdev } : { fmt: s.fmt, rdev: s.rdev }
}

function sizeOf (r: Resolved): number {
  return r.kind === 'upper' ? (r.entry as FileEntry).size : r.stat.kind === 'f' ? (r.stat as any).size : 0
}

function linkTarget (v: View, r: Resolved): string {
  if (r.kind === 'upper') return (r.entry as any).target
  if (!('nlink' in r.stat)) return (r.stat as any).target
  return v.lower.readlink(r.lowerPath)
}

/** True when both sides surely hold the same bytes; false when unsure (prepare decides). */
function sameBytes (e: Resolved, t: Resolved): boolean {
  if (e.kind === 'lower' && t.kind === 'lower') return e.lowerPath === t.lowerPath
  if (e.kind === 'lower' && t.kind === 'upper' && 'nlink' in e.stat) {
    // A copy-up whose bytes are all still the lower file's (a chmod, a link).
    const b = t.entry as FileEntry
    return b.src === e.lowerPath && b.chunks.size === 0 && b.size === e.stat.size && srcBytes(b) === b.size
  }
  if (e.kind === 'upper' && t.kind === 'upper') {
    if (e.entry === t.entry) return true
    const a = e.entry as FileEntry
    const b = t.entry as FileEntry
    if (a.size !== b.size || a.chunks.size !== b.chunks.size || a.src !== b.src || srcBytes(a) !== srcBytes(b)) return false
    for (const [idx, x] of a.chunks) {
      const y = b.chunks.get(idx)
      if (y === undefined || (x === null) !== (y === null) || (x && !x.equals(y!))) return false
    }
    return true
  }
  return false
}

function deepDir (v: View, p: string): boolean {
  const e = v.entries.get(p)
  return e !== undefined && e.kind === 'd' && (e.opaque === 1 || e.redirect !== undefined)
}

/**
 * Every path that names inode record `key` in view v: its name entries, the real path it came
 * from, and (`realNames`) the real names that reach it without an entry of their own.
 */
function namesIn (v: View, key: string, realNames?: Map<string, string[]>): string[] {
  const out = v.namesOf(inoOfKey(key))
  const rec = v.record(key)
  if (rec?.realPath !== undefined && !out.includes(rec.realPath) && v.resolve(rec.realPath)?.key === key) out.push(rec.realPath)
  for (const n of realNames?.get(key) ?? []) if (!out.includes(n)) out.push(n)
  return out
}

/**
 * The names in view v that resolve to one of `keys` (inode records of real files: a real file
 * with several names is reached by each of them, entry or not, wherever a renamed directory
 * put them). One walk of the view, only for plans that touch such a record: without it, a
 * change made through one name would never reach the real names the view does not index.
 */
function realNamesIn (v: View, keys: Set<string>): Map<string, string[]> {
  const out = new Map<string, string[]>()
  // Depth first with an explicit stack (a tree can be deeper than the call stack), in the
  // order a recursive walk would take, so the first name found stays the same.
  const stack = ['/']
  for (let dir = stack.pop(); dir !== undefined; dir = stack.pop()) {
    const subdirs: string[] = []
    for (const n of v.readdir(dir)) {
      const q = join(dir, n)
      const r = v.resolve(q)
      if (!r) continue
      const t = resolvedType(r)
      if (t === 'd') subdirs.push(q)
      else if (t === 'f' && keys.has(r.key)) {
        const names = out.get(r.key) ?? []
        names.push(q)
        out.set(r.key, names)
      }
    }
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i])
  }
  return out
}

export function planViews (expected: View, target: View, touched: Iterable<string>, opts: { full?: boolean } = {}): Plan {
  return new ViewPlanner(expected, target, touched).plan(Boolean(opts.full))
}

type DirMode = { path: string, mode: number } & Partial<Times> & Attrs

/** One plan from `expected` to `target` (planViews): the walk's state and its steps. */
class ViewPlanner {
  private readonly ops: PlanOp[] = []
  /** Directory modes and times are set last: writing children would move the times again. */
  private readonly dirModes: DirMode[] = []
  private readonly touchedSet = new Set<string>()
  private readonly records = new Set<string>()
  private readonly expectedRealNames: Map<string, string[]> | undefined
  /** Target names of each inode record met, by key. */
  private readonly groups = new Map<string, { names: Set<string>, rep: Resolved }>()
  /** Children of a directory among the touched paths and their ancestors, so a shallow visit is cheap. */
  private readonly kids = new Map<string, Set<string>>()
  /**
   * The walk is depth first, parents before children, siblings sorted — with an explicit
   * stack of what is left to do, never recursion: a tree 10,000 levels deep overflowed the
   * call stack. A directory's children are pushed in reverse, so they come off in order, each
   * with its whole subtree before the next sibling (the order recursion gave).
   */
  private readonly todo: Array<{ path: string, deep: boolean, create: boolean }> = []

  constructor (private readonly expected: View, private readonly target: View, touched: Iterable<string>) {
    for (const p of touched) {
      if (isInoKey(p)) this.records.add(p)
      else this.touchedSet.add(p)
    }
    // A touched inode record touches every name it has, before and after.
    const realKeys = new Set([...this.records].filter(k => inoOfKey(k) < FIRST_INO))
    this.expectedRealNames = realKeys.size ? realNamesIn(expected, realKeys) : undefined
    for (const [v, realNames] of [[expected, this.expectedRealNames], [target, realKeys.size ? realNamesIn(target, realKeys) : undefined]] as const) {
      for (const key of this.records) for (const n of namesIn(v, key, realNames)) this.touchedSet.add(n)
    }
    const interesting = new Set<string>()
    for (const p of this.touchedSet) {
      interesting.add(p)
      for (const a of ancestors(p)) {
        if (interesting.has(a)) break
        interesting.add(a)
      }
    }
    for (const p of interesting) {
      if (p === '/') continue
      const i = p.lastIndexOf('/')
      const dir = i === 0 ? '/' : p.slice(0, i)
      let s = this.kids.get(dir)
      if (!s) this.kids.set(dir, s = new Set())
      s.add(p.slice(i + 1))
    }
  }

  plan (full: boolean): Plan {
    this.visit('/', full)
    for (let task = this.todo.pop(); task !== undefined; task = this.todo.pop()) {
      if (!task.create) {
        this.visit(task.path, task.deep)
        continue
      }
      const tq = this.target.resolve(task.path)
      if (tq) this.create(task.path, tq)
    }
    const anchors: PlanOp[] = []
    for (const [key, { names, rep }] of [...this.groups].sort((a, b) => a[0] < b[0] ? -1 : 1)) {
      const anchor = anchorOf(this.expected, this.target, key, [...names].sort(), rep, this.expectedRealNames)
      if (!anchor) continue
      anchors.push(anchor)
      for (const n of [...names].sort()) this.ops.push({ op: 'link', path: n, ino: anchor.ino })
    }
    this.dirModes.sort((a, b) => b.path.length - a.path.length)
    for (const d of this.dirModes) this.ops.push({ op: 'chmod', ...d })
    return { ops: [...anchors, ...this.ops] }
  }

  private sameOwner (e: Resolved, t: Resolved): boolean {
    const x = ownerOf(e)
    const y = ownerOf(t)
    return x.uid === y.uid && x.gid === y.gid && sameXattrs(xattrsOf(this.expected, e), xattrsOf(this.target, t))
  }

  /**
   * A name of an inode record, or of a real file with several names (a captured original
   * among them), is linked to that one real file at the end.
   */
  private linkLater (p: string, t: Resolved): boolean {
    if (!isLinked(t)) return false
    let g = this.groups.get(t.key)
    if (!g) this.groups.set(t.key, g = { names: new Set(), rep: t })
    g.names.add(p)
    return true
  }

  private later (dir: string, names: Iterable<string>, deep: boolean, create: boolean): void {
    const sorted = [...names].sort()
    for (let i = sorted.length - 1; i >= 0; i--) this.todo.push({ path: join(dir, sorted[i]), deep, create })
  }

  private create (p: string, t: Resolved): void {
    if (this.linkLater(p, t)) return
    const target = this.target
    const type = resolvedType(t)
    if (type === 'd') {
      this.ops.push({ op: 'mkdir', path: p })
      this.dirModes.push({ path: p, mode: modeOf(t), ...timesOf(t), ...attrsOf(target, t) })
      this.later(p, target.readdir(p), false, true)
    } else if (type === 'l') {
      this.ops.push({ op: 'symlink', path: p, target: linkTarget(target, t), ...timesOf(t), ...attrsOf(target, t) })
    } else if (type === 'n') {
      this.ops.push({ op: 'mknod', path: p, ...nodeOf(t), mode: modeOf(t), ...timesOf(t), ...attrsOf(target, t) })
    } else {
      this.ops.push({ op: 'write', path: p, mode: modeOf(t), size: sizeOf(t), ...timesOf(t), ...attrsOf(target, t), content: contentOf(t) })
    }
  }

  private visit (p: string, deep: boolean): void {
    const e = this.expected.resolve(p)
    const t = this.target.resolve(p)
    if (!e && !t) return
    if (t && this.linkLater(p, t)) {
      // Only a directory in the link's way must go first (a link replaces anything else atomically).
      if (e && resolvedType(e) === 'd') this.ops.push({ op: 'remove', path: p, type: 'd' })
      return
    }
    if (!t) {
      this.ops.push({ op: 'remove', path: p, type: resolvedType(e!) })
      return
    }
    if (!e) {
      this.create(p, t)
      return
    }
    const et = resolvedType(e)
    const tt = resolvedType(t)
    // p was a name of an inode record and is a file of its own now: it leaves that real file
    // (a new file, never a rewrite in place, which would change the record's other names).
    const leaves = e.kind === 'upper' && isLinked(e) && e.key !== t.key
    if (et !== tt || (leaves && tt !== 'f')) {
      this.ops.push({ op: 'remove', path: p, type: et })
      this.create(p, t)
    } else if (tt === 'f') {
      this.visitFile(p, e, t, leaves)
    } else if (tt === 'n') {
      this.visitNode(p, e, t)
    } else if (tt === 'l') {
      this.visitSymlink(p, e, t)
    } else {
      this.visitDir(p, e, t, deep)
    }
  }

  private visitFile (p: string, e: Resolved, t: Resolved, leaves: boolean): void {
    const target = this.target
    if (!sameBytes(e, t) || leaves) {
      // The same file with new content: `ino` lets the applier keep the real file's hard links.
      if (leaves) this.ops.push({ op: 'write', path: p, mode: modeOf(t), size: sizeOf(t), ...timesOf(t), ...attrsOf(target, t), content: contentOf(t) })
      else this.ops.push({ op: 'write', path: p, mode: modeOf(t), size: sizeOf(t), ...timesOf(t), ...attrsOf(target, t), content: contentOf(t), ifDiffers: true, ino: inoOf(t) })
    } else if (modeOf(e) !== modeOf(t) || !this.sameOwner(e, t) || !sameMtime(e, t)) {
      // The same bytes (a chmod, a chown, a touch, a link of a real file): only the metadata.
      this.ops.push({ op: 'chmod', path: p, mode: modeOf(t), ...timesOf(t), ...attrsOf(target, t) })
    }
  }

  private visitNode (p: string, e: Resolved, t: Resolved): void {
    const a = nodeOf(e)
    const b = nodeOf(t)
    if (a.fmt !== b.fmt || a.rdev !== b.rdev) {
      this.ops.push({ op: 'remove', path: p, type: 'n' })
      this.create(p, t)
    } else if (modeOf(e) !== modeOf(t) || !this.sameOwner(e, t)) {
      this.ops.push({ op: 'chmod', path: p, mode: modeOf(t), ...attrsOf(this.target, t) })
    }
  }

  private visitSymlink (p: string, e: Resolved, t: Resolved): void {
    const lt = linkTarget(this.target, t)
    if (linkTarget(this.expected, e) !== lt) {
      this.ops.push({ op: 'remove', path: p, type: 'l' })
      this.ops.push({ op: 'symlink', path: p, target: lt, ...timesOf(t), ...attrsOf(this.target, t) })
    } else if (!this.sameOwner(e, t)) {
      this.ops.push({ op: 'chmod', path: p, mode: 0o777, ...attrsOf(this.target, t) })
    }
  }

  private visitDir (p: string, e: Resolved, t: Resolved, deep: boolean): void {
    const { expected, target } = this
    const te = timesOf(e)
    const tt = timesOf(t)
    if (modeOf(e) !== modeOf(t) || te.mtime !== tt.mtime || te.mtimeNs !== tt.mtimeNs || !this.sameOwner(e, t)) this.dirModes.push({ path: p, mode: modeOf(t), ...timesOf(t), ...attrsOf(target, t) })
    const childDeep = deep || (this.touchedSet.has(p) && (deepDir(expected, p) || deepDir(target, p)))
    const names: Iterable<string> = childDeep ? new Set([...expected.readdir(p), ...target.readdir(p)]) : this.kids.get(p) ?? []
    this.later(p, names, childDeep, false)
  }
}

/**
 * The anchor op of inode record `key`, whose target names are `names`. Its real file is one a
 * name already is in `expected`: a name of the same record, the real path it came from, or the
 * file that became the record (the same inode number, which link() keeps).
 */
function anchorOf (expected: View, target: View, key: string, names: string[], rep: Resolved, expectedRealNames?: Map<string, string[]>): AnchorOp | null {
  const rec = target.record(key)
  // No record: a real file with several names (or its captured original), as `rep` resolves.
  const t: Resolved = rec ? { kind: 'upper', entry: rec, key } : rep
  const type = resolvedType(t)
  const ino = inoOfKey(key)
  const came = rec ? rec.realPath : t.kind === 'lower' ? t.lowerPath : undefined
  const candidates = [...new Set([...names, ...namesIn(expected, key, expectedRealNames), ...(came !== undefined ? [came] : [])])]
  let from: string | undefined
  let fromRes: Resolved | null = null
  for (const c of candidates) {
    const r = expected.resolve(c)
    if (r && resolvedType(r) === type && inoOf(r) === ino) {
      from = c
      fromRes = r
      break
    }
  }
  const path = from ?? names[0]
  if (path === undefined) return null
  const op: AnchorOp = { op: 'anchor', path, ino, type, mode: modeOf(t), size: 0, ...timesOf(t), ...attrsOf(target, t) }
  if (from !== undefined) op.from = from
  if (type === 'f') {
    op.size = sizeOf(t)
    op.content = contentOf(t)
    if (fromRes && sameBytes(fromRes, t)) op.same = true
  } else if (type === 'l') {
    op.target = linkTarget(target, t)
  } else if (type === 'n') {
    Object.assign(op, nodeOf(t))
  }
  return op
}


/** Paths whose state may differ between two stacks: every path a non-shared layer touched. */
export function touchedPaths (layersA: Array<Map<string, unknown>>, layersB: Array<Map<string, unknown>>): Set<string> {
  const out = new Set<string>()
  for (const l of [...layersA, ...layersB]) for (const p of l.keys()) out.add(p)
  return out
}
