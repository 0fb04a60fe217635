// A map keyed by paths that are looked up as new strings. V8 hashes a string of up to 16,383
// characters in full, about 5 ns a character, the first time each string object is used as a
// key, and a path derived from another one (parentOf, a slice, a join) is a new object every
// time: a lookup of a directory 5,000 levels deep cost 50 µs, several per path per plan, for
// memos that exist to make those lookups O(1). Here a path is hashed by its length and last
// KEY_CHARS characters only and then compared whole (memcmp, ~100 times faster than hashing).
// Paths that share that key share a chain.

const KEY_CHARS = 64

/** The key PathMap hashes for path p. */
export function pathKey (p: string): string {
  return p.length <= KEY_CHARS ? p : p.slice(-KEY_CHARS) + p.length
}

interface Node<V> {
  path: string
  value: V
  next: Node<V> | undefined
}

export class PathMap<V> {
  private readonly heads = new Map<string, Node<V>>()
  private count = 0

  get size (): number {
    return this.count
  }

  private node (p: string): Node<V> | undefined {
    for (let n = this.heads.get(pathKey(p)); n !== undefined; n = n.next) if (n.path === p) return n
    return undefined
  }

  get (p: string): V | undefined {
    return this.node(p)?.value
  }

  has (p: string): boolean {
    return this.node(p) !== undefined
  }

  set (p: string, value: V): this {
    const key = pathKey(p)
    const head = this.heads.get(key)
    for (let n = head; n !== undefined; n = n.next) {
      if (n.path === p) {
        n.value = value
        return this
      }
    }
    this.heads.set(key, { path: p, value, next: head })
    this.count++
    return this
  }

  delete (p: string): boolean {
    const key = pathKey(p)
    let prev: Node<V> | undefined
    for (let n = this.heads.get(key); n !== undefined; prev = n, n = n.next) {
      if (n.path !== p) continue
      if (prev) prev.next = n.next
      else if (n.next) this.heads.set(key, n.next)
      else this.heads.delete(key)
      this.count--
      return true
    }
    return false
  }

  clear (): void {
    this.heads.clear()
    this.count = 0
  }

  /** The paths, as a list (so that a caller may delete while it goes through them). */
  paths (): string[] {
    const out: string[] = []
    for (const head of this.heads.values()) for (let n: Node<V> | undefined = head; n !== undefined; n = n.next) out.push(n.path)
    return out
  }
}
