// A merged view: the upper entries of a stack of layers flattened into one map (later layers
// win, whiteouts and opaque directories remove what they hide), over the origin. Lookups
// walk at most the path's depth in memory and never touch LevelDB. The live overlay keeps
// one View up to date as the head layer changes; plans build read-only Views for any stack.
import type { Entry, Kind, LiveEntry } from '../store/entries.js'
import type { Origin, OriginStat } from './origin.js'
import { ancestors, baseName, join, parentOf, rebase } from './paths.js'

export type Resolved =
  | { kind: 'upper', entry: LiveEntry }
  | { kind: 'origin', originPath: string, stat: OriginStat | LiveEntry }

export function resolvedType (r: Resolved): Kind {
  return r.kind === 'upper' ? r.entry.t : r.stat.t
}

/** Does this entry hide what older layers recorded below its path? */
export function hidesBelow (e: Entry): boolean {
  return e.t !== 'd' || e.fresh === 1
}

export class View {
  readonly entries = new Map<string, Entry>()
  readonly children = new Map<string, Set<string>>()
  readonly origin: Origin

  constructor (origin: Origin) {
    this.origin = origin
  }

  static build (origin: Origin, layers: Iterable<Map<string, Entry>>): View {
    const v = new View(origin)
    for (const layer of layers) v.applyLayer(layer)
    return v
  }

  applyLayer (layer: Map<string, Entry>): void {
    for (const [p, e] of layer) if (hidesBelow(e)) this.removeBelow(p)
    for (const [p, e] of layer) this.set(p, e)
  }

  // `children` links every path that has an entry, and every ancestor of one, to its parent:
  // an entry below a lower directory that has no entry itself must still be reachable
  // when walking down (moving or removing that directory).

  set (p: string, e: Entry): void {
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
    if (!this.entries.delete(p)) return
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

  /** Every path with an upper entry strictly below p, parents before children. */
  below (p: string): string[] {
    const out: string[] = []
    const walk = (dir: string): void => {
      const kids = this.children.get(dir)
      if (!kids) return
      for (const name of kids) {
        const q = join(dir, name)
        if (this.entries.has(q)) out.push(q)
        walk(q)
      }
    }
    walk(p)
    return out
  }

  removeBelow (p: string): void {
    const qs = this.below(p)
    for (let i = qs.length - 1; i >= 0; i--) this.delete(qs[i])
  }

  /** Where p's own state comes from in the origin when no entry exists for p; null if hidden. */
  originPathFor (p: string): string | null {
    for (const a of ancestors(p)) {
      const ea = this.entries.get(a)
      if (!ea) continue
      if (ea.t !== 'd') return null
      if (ea.redirect !== undefined) return rebase(p, a, ea.redirect)
      if (ea.opaque) return null
    }
    return p
  }

  /** Where directory p's origin children come from; null if it has none. */
  dirOriginPath (p: string): string | null {
    const e = this.entries.get(p)
    if (e) {
      if (e.t !== 'd') return null
      if (e.redirect !== undefined) return e.redirect
      if (e.opaque) return null
    }
    return this.originPathFor(p)
  }

  resolve (p: string): Resolved | null {
    const e = this.entries.get(p)
    if (e) return e.t === 'w' ? null : { kind: 'upper', entry: e }
    const op = this.originPathFor(p)
    if (op === null) return null
    const st = this.origin.stat(op)
    return st ? { kind: 'origin', originPath: op, stat: st } : null
  }

  readdir (p: string): string[] {
    const names = new Set<string>()
    const op = this.dirOriginPath(p)
    if (op !== null) {
      const st = this.origin.stat(op)
      if (st && st.t === 'd') for (const n of this.origin.readdir(op)) names.add(n)
    }
    const kids = this.children.get(p)
    if (kids) {
      for (const n of kids) {
        const e = this.entries.get(join(p, n))
        if (!e) continue // only an ancestor of deeper entries
        if (e.t === 'w') names.delete(n)
        else names.add(n)
      }
    }
    return [...names]
  }

  /** Upper entries at or below p (for moving a directory). */
  subtree (p: string): Array<[string, Entry]> {
    const out: Array<[string, Entry]> = []
    for (const q of this.below(p)) out.push([q, this.entries.get(q)!])
    return out
  }
}
