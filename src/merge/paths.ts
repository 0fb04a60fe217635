// Which paths a merge compares: every path the layers between base and theirs recorded, the
// names of the inode records they changed, and — below a directory those layers removed,
// replaced or made afresh (whiteouts, opaque or moved directories, files where a directory
// was) — every path any of the three sides has there. A directory is never taken or dropped
// whole without each path below it having been looked at.
import { hidesBelow, resolvedType, type View } from '../overlay/view.js'
import { join } from '../paths/paths.js'
import { inoOfKey, isInoKey, type Entry } from '../store/entries.js'

export function mergePaths (layers: Iterable<Map<string, Entry>>, views: View[]): Set<string> {
  const out = new Set<string>()
  const deep = new Set<string>()
  for (const layer of layers) {
    for (const [k, e] of layer) {
      if (isInoKey(k)) {
        for (const v of views) for (const n of namesOf(v, k)) out.add(n)
        continue
      }
      out.add(k)
      if (hidesBelow(e) || (e.kind === 'd' && e.redirect !== undefined)) deep.add(k)
    }
  }
  for (const d of deep) for (const v of views) for (const q of subtree(v, d)) out.add(q)
  return out
}

/** The names inode record `key` has in v: its link entries, and the real path it came from. */
function namesOf (v: View, key: string): string[] {
  const names = v.namesOf(inoOfKey(key))
  const real = v.record(key)?.realPath
  if (real !== undefined && v.resolve(real)?.key === key) names.push(real)
  return names
}

/** Every path below directory p in v (none when p is not a directory there). */
export function subtree (v: View, p: string): string[] {
  const out: string[] = []
  const r = v.resolve(p)
  if (!r || resolvedType(r) !== 'd') return out
  // An explicit stack: a tree may be deeper than the call stack.
  const stack = [p]
  for (let dir = stack.pop(); dir !== undefined; dir = stack.pop()) {
    for (const name of v.readdir(dir)) {
      const q = join(dir, name)
      const rq = v.resolve(q)
      if (!rq) continue
      out.push(q)
      if (resolvedType(rq) === 'd') stack.push(q)
    }
  }
  return out
}
