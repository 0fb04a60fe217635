// Paths inside the overlay are absolute within the workspace: '/' is the workspace root,
// '/a/b' a file below it. They are always normalised: no trailing slash, no '.' or '..'
// components, no empty components. Recorded paths are checked with `isSafePath` before a
// plan touches the real directory (containment, design invariant 6).
import { PathMap } from './path-map.js'

export function parentOf (p: string): string {
  if (p === '/') return '/'
  const i = p.lastIndexOf('/')
  return i <= 0 ? '/' : p.slice(0, i)
}

export function baseName (p: string): string {
  return p.slice(p.lastIndexOf('/') + 1)
}

export function join (dir: string, name: string): string {
  return dir === '/' ? '/' + name : dir + '/' + name
}

/** True when `p` is `dir` itself or lies below it. */
export function isWithin (p: string, dir: string): boolean {
  if (dir === '/') return true
  // A slice compared with === (memcmp), not startsWith (character by character, ten times
  // slower): both are O(length), and paths in a deep tree are 20,000 characters long.
  if (p.length <= dir.length) return p === dir
  return p.charCodeAt(dir.length) === 47 /* / */ && p.slice(0, dir.length) === dir
}

/** Rebase `p` (which lies within `from`) onto `to`. */
export function rebase (p: string, from: string, to: string): string {
  if (p === from) return to
  const rest = from === '/' ? p : p.slice(from.length)
  return to === '/' ? rest : to + rest
}

/** Ancestors of p, nearest first, ending with '/'. Excludes p itself. */
export function * ancestors (p: string): Generator<string> {
  let cur = p
  while (cur !== '/') {
    cur = parentOf(cur)
    yield cur
  }
}

/**
 * Ancestors of p, outermost first, without '/': from `from` on (`from` included; an ancestor
 * of p other than '/'), else all. Found by scanning p forward, so a walk that stops at the
 * first missing directory costs what it looked at, not all of p's depth ([...ancestors(p)]
 * reversed made every ancestor first: O(depth) strings per path).
 */
export function * ancestorsDown (p: string, from = '/'): Generator<string> {
  for (let i = from === '/' ? p.indexOf('/', 1) : from.length; i !== -1; i = p.indexOf('/', i + 1)) yield p.slice(0, i)
}

/**
 * A test of whether a path lies strictly below one of `tops`, memoised per directory (each
 * with whether it or an ancestor is in `tops`), so that it costs O(1) map operations per
 * path once its directory is known: looking at every ancestor of every path was O(depth)
 * strings per path, each hashed in full, O(depth³) characters over a deep tree. `tops` may
 * grow meanwhile if nothing added is above a directory the memo holds: paths tested in order of
 * depth, each added after it was tested, or something below it (absorb.ts).
 */
export function belowAny (tops: ReadonlySet<string>): (p: string) => boolean {
  const memo = new PathMap<boolean>()
  const dirIn = (d: string): boolean => {
    const todo: string[] = []
    let v = false
    for (let q = d; ; q = parentOf(q)) {
      const k = memo.get(q)
      if (k !== undefined) {
        v = k
        break
      }
      todo.push(q)
      if (q === '/') break
    }
    for (let i = todo.length - 1; i >= 0; i--) {
      v = v || tops.has(todo[i])
      memo.set(todo[i], v)
    }
    return v
  }
  return p => p !== '/' && dirIn(parentOf(p))
}

export function depth (p: string): number {
  if (p === '/') return 0
  let n = 0
  for (let i = 0; i < p.length; i++) if (p.charCodeAt(i) === 47) n++
  return n
}

/** A recorded path that is safe to use against the real directory. */
export function isSafePath (p: string): boolean {
  if (typeof p !== 'string' || !p.startsWith('/') || p.includes('\0')) return false
  if (p === '/') return true
  // An empty, '.' or '..' component (or a trailing '/'), found in one scan: split('/') made
  // O(depth) strings per path, O(depth²) for a plan over a deep tree (every op's path is checked).
  return !UNSAFE_COMPONENT.test(p)
}

const UNSAFE_COMPONENT = /\/\.{0,2}(?:\/|$)/

/** Normalise a user-supplied relative or absolute workspace path; null if it escapes. */
export function normaliseUserPath (p: string): string | null {
  const parts: string[] = []
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..') {
      if (parts.length === 0) return null
      parts.pop()
      continue
    }
    parts.push(part)
  }
  return '/' + parts.join('/')
}
