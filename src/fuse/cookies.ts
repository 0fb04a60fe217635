// Directory offsets ("cookies") that say by themselves where a listing resumes. With
// FUSE_NO_OPENDIR_SUPPORT the kernel opens directories without asking, so a READDIR carries no
// per-open state: the offset is all there is. An index into the listing would break as soon as
// the directory changes between two READDIRs (a removal before the cursor skips a name), and
// readdir(3) must return every entry neither added nor removed during the listing exactly once.
// So, as ext4's htree does, names are ordered by a 63-bit hash and an offset is "everything
// after this hash": a name keeps its place whatever else comes and goes.
//
// - 0 is the start, 1 is after '.', 2 after '..'; names hash to 3 and up (positive 63-bit
//   values: telldir(3) returns a long, lseek(2) refuses negative offsets).
// - The hash is keyed (a random key per mount): the cookie of a name is visible to anyone
//   (telldir), so with a fixed function a process could make names that collide on purpose.
// - Names with equal hashes (a random 63-bit collision: about n²/2^64 for n names) form a group
//   that the caller puts in one reply whole. The kernel may still hand only part of a reply to
//   getdents(2) and ask again from the offset of the last entry it used; so every member but
//   the last carries the offset just before the group's hash: a group cut there is sent again
//   from its first member (a name may come twice, none is lost).
import { hash, randomBytes } from 'node:crypto'

/** The smallest cookie a name gets: 0, 1 and 2 are the start, '.' and '..'. */
export const FIRST_COOKIE = 3

/** A 63-bit cookie as two unsigned 32-bit halves (JavaScript numbers hold 53 bits). */
export interface Cookie {
  hi: number
  lo: number
}

export type NameHash = (name: string) => Cookie

/** The keyed hash of names (SHA-1 of key and name; the key is random unless given). */
export function keyedHash (key: string = randomBytes(16).toString('hex')): NameHash {
  return (name) => {
    const d = hash('sha1', key + '/' + name, 'buffer')
    const hi = d.readUInt32LE(0) & 0x7fffffff
    let lo = d.readUInt32LE(4)
    if (hi === 0 && lo < FIRST_COOKIE) lo = FIRST_COOKIE
    return { hi, lo }
  }
}

export function compareCookies (a: Cookie, b: Cookie): number {
  return a.hi !== b.hi ? a.hi - b.hi : a.lo - b.lo
}

/** The cookie just before c (c ≥ 1): where a listing resumes to send c's group again. */
export function cookieBefore (c: Cookie): Cookie {
  return c.lo > 0 ? { hi: c.hi, lo: c.lo - 1 } : { hi: c.hi - 1, lo: 0xffffffff }
}

export interface Listed extends Cookie {
  name: string
}

/** The names of a directory in cookie order (ties by name, so the order is total). */
export class Listing {
  readonly entries: Listed[]

  constructor (names: string[], h: NameHash) {
    this.entries = names.map(name => ({ name, ...h(name) }))
    this.entries.sort((a, b) => compareCookies(a, b) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  }

  get size (): number {
    return this.entries.length
  }

  /** Index of the first entry whose cookie is greater than c (where a listing at offset c resumes). */
  after (c: Cookie): number {
    if (c.hi === 0 && c.lo < FIRST_COOKIE) return 0
    let lo = 0
    let hi = this.entries.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (compareCookies(this.entries[mid], c) <= 0) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** End (exclusive) of the group of entries that share entry i's cookie. */
  groupEnd (i: number): number {
    let j = i + 1
    while (j < this.entries.length && compareCookies(this.entries[j], this.entries[i]) === 0) j++
    return j
  }
}

/** A name a reply carries, the offset that follows it, and what `look` gave for it. */
export interface Placed<T> {
  name: string
  next: Cookie
  value: T
}

/**
 * The names a reply resuming after cookie `from` carries, in order, in at most `room` bytes
 * (`recLen`: the bytes of one name's record). Groups of names with one cookie go whole or not at
 * all; every member but the group's last carries the cookie before the group's. `look` gives what
 * the caller needs of a name, or null for a name gone since the listing was taken (left out).
 * 'too big': the first group alone does not fit.
 */
export function replyAfter<T> (listing: Listing, from: Cookie, room: number, recLen: (name: string) => number, look: (name: string) => T | null): Array<Placed<T>> | 'too big' {
  const out: Array<Placed<T>> = []
  const entries = listing.entries
  let used = 0
  for (let i = listing.after(from); i < entries.length;) {
    const end = listing.groupEnd(i)
    let need = 0
    for (let k = i; k < end; k++) need += recLen(entries[k].name)
    if (used + need > room) return used === 0 && out.length === 0 ? 'too big' : out
    const found: Array<Placed<T>> = []
    for (let k = i; k < end; k++) {
      const value = look(entries[k].name)
      if (value !== null) found.push({ name: entries[k].name, next: cookieBefore(entries[i]), value })
    }
    if (found.length > 0) found[found.length - 1].next = { hi: entries[i].hi, lo: entries[i].lo }
    for (const f of found) {
      used += recLen(f.name)
      out.push(f)
    }
    i = end
  }
  return out
}

/**
 * Listings kept between READDIRs of one directory, by node id: a listing is taken afresh at
 * offset 0 (opendir, rewinddir) and reused for the offsets that follow, so a big directory is
 * listed once, not once per reply. Any listing taken after a stream began holds every name that
 * stream must return, whichever stream took it; the owner drops them all when the daemon changes
 * the tree itself (rewind, restore, writes recorded from underneath). Bounded: least recently
 * used first out.
 */
export class Listings {
  private readonly byNode = new Map<number, { path: string, listing: Listing }>()
  private names = 0

  constructor (private readonly maxDirs = 64, private readonly maxNames = 1 << 20) {}

  /** The listing of directory node `id` at `path`: a fresh one when `fresh` or none is kept. */
  get (id: number, path: string, fresh: boolean, list: () => Listing): Listing {
    const kept = this.byNode.get(id)
    if (kept) {
      this.byNode.delete(id)
      this.names -= kept.listing.size
      if (!fresh && kept.path === path) return this.keep(id, path, kept.listing)
    }
    return this.keep(id, path, list())
  }

  clear (): void {
    this.byNode.clear()
    this.names = 0
  }

  private keep (id: number, path: string, listing: Listing): Listing {
    this.byNode.set(id, { path, listing })
    this.names += listing.size
    for (const [old, v] of this.byNode) {
      if (old === id || (this.byNode.size <= this.maxDirs && this.names <= this.maxNames)) break
      this.byNode.delete(old)
      this.names -= v.listing.size
    }
    return listing
  }
}
