// A merged view: the upper entries of a stack of layers flattened into one map (later layers
// win, whiteouts and opaque directories remove what they hide), over the lower. Lookups
// walk at most the path's depth in memory and never touch LevelDB. The live overlay keeps
// one View up to date as the head layer changes; plans build read-only Views for any stack.
//
// Inode records (`#<ino>` keys, see store/entries.ts) sit in the same map; a name entry ('h')
// resolves to its record, and so does a real file with several names whose real inode number
// has a record. `names` indexes the name entries by inode, so every name of a record is found
// without a walk (real names without an entry of their own excepted: they share the real inode).
import { inoKey, isInoKey, type Entry, type Kind, type LiveEntry } from '../store/entries.js'
import type { Lower, LowerStat } from '../real/lower.js'
import { baseName, isWithin, join, parentOf } from '../paths/paths.js'
import { PathMap } from '../paths/path-map.js'

/**
 * Where a path's state comes from. `key` is where that state lives in a layer: the path
 * itself, or the inode record's key for a name of a linked file (also for a real file with
 * several names that has no record yet: its record would be keyed by its real inode number).
 */
export type Resolved =
  | { kind: 'upper', entry: LiveEntry, key: string }
  | { kind: 'lower', lowerPath: string, stat: LowerStat | LiveEntry, key: string }

export function resolvedType (r: Resolved): Kind {
  return r.kind === 'upper' ? r.entry.kind : r.stat.kind
}

/** Does this entry hide what older layers recorded below its path? */
export function hidesBelow (e: Entry): boolean {
  return e.kind !== 'd' || e.fresh === 1
}

/** Is the state behind r an inode record (or a real file with several names)? */
export function isLinked (r: Resolved): boolean {
  return isInoKey(r.key)
}

export class View {
  readonly entries = new Map<string, Entry>()
  readonly children = new Map<string, Set<string>>()
  /** Name entries by inode number: the names of each inode record. */
  readonly names = new Map<number, Set<string>>()
  readonly lower: Lower
  /** Directory link counts computed so far, kept right as entries change (dirNlink). */
  private readonly nlinks = new Map<string, number>()
  /**
   * dirLowerPath of directories computed so far. Without it, resolving a path scanned all its
   * ancestors (O(depth) lookups of O(depth)-long keys): a 10,000-level tree took hours to
   * plan. Always closed upwards (a directory's ancestors are in it whenever it is), so a change
   * at a path that is not in it cannot affect anything in it (`forgetLowerPaths`). A PathMap: its
   * lookups are of new strings (parentOf), which V8 hashed in full every time.
   */
  private readonly lowerPaths = new PathMap<string | null>()

  constructor (lower: Lower) {
    this.lower = lower
  }

  static build (lower: Lower, layers: Iterable<Map<string, Entry>>): View {
    const v = new View(lower)
    for (const layer of layers) v.applyLayer(layer)
    return v
  }

  applyLayer (layer: Map<string, Entry>): void {
    for (const [p, e] of layer) if (!isInoKey(p) && hidesBelow(e)) this.removeBelow(p)
    for (const [p, e] of layer) this.set(p, e)
  }

  // `children` links every path that has an entry, and every ancestor of one, to its parent:
  // an entry below a lower directory that has no entry itself must still be reachable
  // when walking down (moving or removing that directory).

  set (p: string, e: Entry): void {
    if (isInoKey(p)) {
      this.entries.set(p, e)
      return
    }
    const old = this.entries.get(p)
    this.beforeChange(p, old, e)
    this.forgetLowerPaths(p, old, e)
    if (old?.kind === 'h') this.unname(old.ino, p)
    if (e.kind === 'h') {
      let s = this.names.get(e.ino)
      if (!s) this.names.set(e.ino, s = new Set())
      s.add(p)
    }
    this.entries.set(p, e)
    for (let q = p; q !== '/';) {
      const dir = parentOf(q)
      let kids = this.children.get(dir)
      if (!kids) this.children.set(dir, kids = new Set())
      const name = baseName(q)
      if (kids.has(name)) break
      kids.add(name)
      q = dir
    }
  }

  delete (p: string): void {
    const old = this.entries.get(p)
    if (old === undefined) return
    if (isInoKey(p)) {
      this.entries.delete(p)
      return
    }
    this.beforeChange(p, old, undefined)
    this.forgetLowerPaths(p, old, undefined)
    if (old.kind === 'h') this.unname(old.ino, p)
    this.entries.delete(p)
    for (let q = p; q !== '/';) {
      if (this.entries.has(q) || this.children.has(q)) break
      const dir = parentOf(q)
      const kids = this.children.get(dir)
      if (!kids) break
      kids.delete(baseName(q))
      if (kids.size === 0) this.children.delete(dir)
      q = dir
    }
  }

  private unname (ino: number, p: string): void {
    const s = this.names.get(ino)
    if (!s) return
    s.delete(p)
    if (s.size === 0) this.names.delete(ino)
  }

  /** The names (name entries) of inode ino, sorted. */
  namesOf (ino: number): string[] {
    return [...this.names.get(ino) ?? []].sort()
  }

  // ---- directory link counts -----------------------------------------------------------------
  // A directory has 2 + (number of subdirectories) links. Without upper entries below it, the
  // lower directory's count is used (the real st_nlink); upper children add or remove what they
  // change. Counts are kept in `nlinks` once computed and adjusted as each child entry changes,
  // so that creating many files or directories in one directory stays O(1) per change.

  /** st_nlink of directory p (resolved as r). */
  dirNlink (p: string, r: Resolved): number {
    const cached = this.nlinks.get(p)
    if (cached !== undefined) return cached
    const op = this.dirLowerPath(p)
    let n = 2
    if (op !== null) n += this.lower.subdirs(op, r.kind === 'lower' && r.lowerPath === op && 'nlink' in r.stat ? r.stat : null)
    const kids = this.children.get(p)
    if (kids) {
      for (const name of kids) {
        const e = this.entries.get(join(p, name))
        if (e) n += (e.kind === 'd' ? 1 : 0) - (op !== null && this.lower.stat(join(op, name))?.kind === 'd' ? 1 : 0)
      }
    }
    this.nlinks.set(p, n)
    return n
  }

  /** Keep computed link counts right: entry `old` at p becomes `e` (undefined: none). */
  private beforeChange (p: string, old: Entry | undefined, e: Entry | undefined): void {
    if (this.nlinks.size === 0) return
    // p's own count depends on where its children come from.
    if (old?.kind === 'd' || e?.kind === 'd' || old === undefined || e === undefined) this.nlinks.delete(p)
    if (p === '/') return
    const dir = parentOf(p)
    const count = this.nlinks.get(dir)
    if (count === undefined) return
    const isDir = (x: Entry | undefined) => x?.kind === 'd' ? 1 : 0
    let delta: number
    if (old !== undefined && e !== undefined) {
      delta = isDir(e) - isDir(old) // the lower child is hidden before and after
    } else {
      // An entry appears or goes: what it hides (or uncovers) in the lower counts too. An entry
      // new this turn hid nothing (the path did not exist).
      const x = (old ?? e)!
      let lowerDir = 0
      if (x.newInTurn !== 1) {
        const op = this.dirLowerPath(dir)
        if (op !== null && this.lower.stat(join(op, baseName(p)))?.kind === 'd') lowerDir = 1
      }
      delta = old === undefined ? isDir(e) - lowerDir : lowerDir - isDir(old)
    }
    if (delta !== 0) this.nlinks.set(dir, count + delta)
  }

  /** Every path with an upper entry strictly below p, parents before children. */
  below (p: string): string[] {
    const out: string[] = []
    // An explicit stack, not recursion: a tree may be deeper than the JS call stack.
    const stack = [p]
    for (let dir = stack.pop(); dir !== undefined; dir = stack.pop()) {
      const kids = this.children.get(dir)
      if (!kids) continue
      const qs: string[] = []
      for (const name of kids) {
        const q = join(dir, name)
        if (this.entries.has(q)) out.push(q)
        qs.push(q)
      }
      for (let i = qs.length - 1; i >= 0; i--) stack.push(qs[i])
    }
    return out
  }

  removeBelow (p: string): void {
    const qs = this.below(p)
    for (let i = qs.length - 1; i >= 0; i--) this.delete(qs[i])
  }

  /** Where p's own state comes from in the lower when no entry exists for p; null if hidden. */
  lowerPathFor (p: string): string | null {
    if (p === '/') return '/'
    const d = this.dirLowerPath(parentOf(p))
    return d === null ? null : join(d, baseName(p))
  }

  /** Where directory p's lower children come from; null if it has none. */
  dirLowerPath (p: string): string | null {
    const known = this.lowerPaths.get(p)
    if (known !== undefined) return known
    // Up to the nearest directory already known (or the root), then down again, filling in
    // each level: O(depth) once per directory, O(1) after.
    const todo: string[] = []
    let q = p
    let above: string | null = '/'
    for (;;) {
      const k = this.lowerPaths.get(q)
      if (k !== undefined) {
        above = k
        break
      }
      todo.push(q)
      if (q === '/') break
      q = parentOf(q)
    }
    for (let i = todo.length - 1; i >= 0; i--) {
      const d = todo[i]
      const own = d === '/' ? '/' : above === null ? null : join(above, baseName(d))
      above = this.ownLower(this.entries.get(d), own)
      // Mostly a directory's lower is its own path: keep that string, not an equal copy.
      if (above === d) above = d
      this.lowerPaths.set(d, above)
    }
    return above
  }

  /** Where a directory's lower children come from, given its entry and its own lower path. */
  private ownLower (e: Entry | undefined, own: string | null): string | null {
    if (!e) return own
    if (e.kind !== 'd') return null
    if (e.redirect !== undefined) return e.redirect
    if (e.opaque) return null
    return own
  }

  /** What an entry means for the lower of the paths below it (equal: nothing changes). */
  private static lowerEffect (e: Entry | undefined): string {
    if (!e || (e.kind === 'd' && e.redirect === undefined && !e.opaque)) return ''
    if (e.kind !== 'd') return 'x'
    return e.redirect !== undefined ? 'r' + e.redirect : 'o'
  }

  /** Entry `old` at p becomes `e`: drop the computed lowerPaths at and below p if that moves them. */
  private forgetLowerPaths (p: string, old: Entry | undefined, e: Entry | undefined): void {
    if (!this.lowerPaths.has(p) || View.lowerEffect(old) === View.lowerEffect(e)) return
    for (const q of this.lowerPaths.paths()) if (isWithin(q, p)) this.lowerPaths.delete(q)
  }

  /** The inode record at key, if the view holds a live one. */
  record (key: string): LiveEntry | null {
    const rec = this.entries.get(key)
    return rec && rec.kind !== 'w' && rec.kind !== 'h' && rec.kind !== 'd' ? rec : null
  }

  resolve (p: string): Resolved | null {
    const e = this.entries.get(p)
    if (e) {
      if (e.kind === 'w') return null
      if (e.kind === 'h') {
        const key = inoKey(e.ino)
        const rec = this.record(key)
        return rec ? { kind: 'upper', entry: rec, key } : null
      }
      return { kind: 'upper', entry: e, key: p }
    }
    const op = this.lowerPathFor(p)
    if (op === null) return null
    const st = this.lower.stat(op)
    if (!st) return null
    if (st.kind !== 'd' && ('nlink' in st ? st.nlink : st.links ?? 1) > 1) {
      // A real file with several names: one inode, whichever name reaches it.
      const key = inoKey(st.ino)
      const rec = this.record(key)
      if (rec && rec.kind === st.kind) return { kind: 'upper', entry: rec, key }
      return { kind: 'lower', lowerPath: op, stat: st, key }
    }
    return { kind: 'lower', lowerPath: op, stat: st, key: p }
  }

  readdir (p: string): string[] {
    const names = new Set<string>()
    const op = this.dirLowerPath(p)
    if (op !== null) {
      const st = this.lower.stat(op)
      if (st && st.kind === 'd') for (const n of this.lower.readdir(op)) names.add(n)
    }
    const kids = this.children.get(p)
    if (kids) {
      for (const n of kids) {
        const q = join(p, n)
        const e = this.entries.get(q)
        if (!e) continue // only an ancestor of deeper entries
        if (e.kind === 'w' || (e.kind === 'h' && !this.record(inoKey(e.ino)))) names.delete(n)
        else names.add(n)
      }
    }
    return [...names]
  }

  /**
   * Does directory p hold anything: a name the view lists, or a real entry cpfs cannot show (a
   * name that is not UTF-8, lower.ts realDirents)? Such a directory is never removed.
   */
  hasEntries (p: string): boolean {
    if (this.readdir(p).length > 0) return true
    const op = this.dirLowerPath(p)
    return op !== null && this.lower.holdsUnshown(op)
  }

  /** Upper entries at or below p (for moving a directory). */
  subtree (p: string): Array<[string, Entry]> {
    const out: Array<[string, Entry]> = []
    for (const q of this.below(p)) out.push([q, this.entries.get(q)!])
    return out
  }
}
