// Paths inside the overlay are absolute within the workspace: '/' is the workspace root,
// '/a/b' a file below it. They are always normalised: no trailing slash, no '.' or '..'
// components, no empty components. Recorded paths are checked with `isSafePath` before a
// plan touches the real directory (containment, design invariant 6).

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
  return p === dir || (p.startsWith(dir) && p.charCodeAt(dir.length) === 47 /* / */)
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
  if (p.endsWith('/')) return false
  for (const part of p.slice(1).split('/')) {
    if (part === '' || part === '.' || part === '..') return false
  }
  return true
}

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
