// The base map of the lower (lower.ts): what plans captured of real paths before changing
// them, with the two indexes that keep a lookup O(1) map operations per path whatever the
// depth — the children of each directory, and which directories lie below a base entry that
// is not a directory (such an entry hides whatever the real directory has below it).
import type { Entry } from '../store/entries.js'
import { isWithin, parentOf } from '../paths/paths.js'
import { PathMap } from '../paths/path-map.js'

/** Directories whose hiding is remembered before the memo starts over (a cache, not state). */
const HIDDEN_MAX = 500_000

export class BaseMap {
  readonly entries: Map<string, Entry>
  /** Names with a base entry, by directory. */
  private readonly kids = new Map<string, Set<string>>()
  /** Base entries that are not directories: only they hide what lies below them. */
  private hiders = 0
  /**
   * Directories looked at, each with whether it or one of its ancestors has a base entry that
   * is not a directory. Without it, `cover` scanned every ancestor of a path without an entry
   * of its own: O(depth) lookups of O(depth)-long keys, O(depth³) characters for a plan that
   * captures a 10,000-level tree (its top directory is a whiteout that hides every level, and
   * found only after walking all the way up from each level). Like View.lowerPaths it is closed
   * upwards (a directory's ancestors are in it whenever it is), so a change at a path that is
   * not in it cannot affect anything in it (`set`). A PathMap: its lookups are of new strings.
   */
  private readonly hidden = new PathMap<boolean>()

  constructor (entries: Map<string, Entry>) {
    this.entries = entries
    for (const [p, e] of entries) {
      this.index(p)
      if (e.kind !== 'd') this.hiders++
    }
  }

  get (p: string): Entry | undefined {
    return this.entries.get(p)
  }

  set (p: string, e: Entry): void {
    const old = this.entries.get(p)
    if (!old) this.index(p)
    this.entries.set(p, e)
    const was = old !== undefined && old.kind !== 'd'
    const is = e.kind !== 'd'
    if (was === is) return
    this.hiders += is ? 1 : -1
    // Whether p hides what is below it changed: so does the memo at and below p, if p is in it.
    if (!this.hidden.has(p)) return
    for (const q of this.hidden.paths()) if (isWithin(q, p)) this.hidden.delete(q)
  }

  /** The names in directory p that have a base entry. */
  children (p: string): Set<string> | undefined {
    return this.kids.get(p)
  }

  private index (p: string): void {
    if (p === '/') return
    const dir = parentOf(p)
    let set = this.kids.get(dir)
    if (!set) this.kids.set(dir, set = new Set())
    set.add(p.slice(dir === '/' ? 1 : dir.length + 1))
  }

  /** The base entry covering p: its own, or 'hidden' when an ancestor's entry is not a directory. */
  cover (p: string): Entry | 'hidden' | undefined {
    if (this.entries.size === 0) return undefined
    const e = this.entries.get(p)
    if (e) return e
    // No entry that could hide anything (a plan that only adds to the real directory has
    // captured nothing but directories yet): nothing to look up.
    if (this.hiders === 0 || p === '/') return undefined
    return this.isHidden(parentOf(p)) ? 'hidden' : undefined
  }

  /** Does directory d, or one of its ancestors, have a base entry that is not a directory? */
  private isHidden (d: string): boolean {
    const known = this.hidden.get(d)
    if (known !== undefined) return known
    // Up to the nearest directory already known (or the root), then down again, filling in
    // each level: O(depth) once per directory, O(1) after.
    if (this.hidden.size >= HIDDEN_MAX) this.hidden.clear() // empty is closed upwards too
    const todo: string[] = []
    let above = false
    for (let q = d; ; q = parentOf(q)) {
      const k = this.hidden.get(q)
      if (k !== undefined) {
        above = k
        break
      }
      todo.push(q)
      if (q === '/') break
    }
    for (let i = todo.length - 1; i >= 0; i--) {
      const e = this.entries.get(todo[i])
      above = above || (e !== undefined && e.kind !== 'd')
      this.hidden.set(todo[i], above)
    }
    return above
  }
}
