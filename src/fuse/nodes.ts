// The kernel's view of our inodes: node ids handed out in entry replies, each with a lookup
// count the kernel later gives back with FORGET. A node id names one overlay inode (its st_ino)
// for as long as the kernel remembers it; ids are never reused, so the generation is always 0.
// Requests arrive by node id, the overlay speaks paths: each node keeps the paths it is reachable
// by now (several for a file with hard links: one node, one st_ino, for all its names), kept
// right across renames and unlinks made through the mount, and re-checked after the daemon
// changes the tree itself (rewind, redo, restore).
import { fsError } from '../errors.js'
import type { FileNode } from '../overlay/overlay.js'
import { isWithin, rebase } from '../paths/paths.js'
import { ROOT_ID } from './kernel.js'

export interface Node {
  id: number
  ino: number
  /** A path this inode is reachable by (the latest looked up); null once it has none (unlinked, replaced, rewound away). */
  path: string | null
  /**
   * Every path the kernel knows this inode by: one name, or a Set once it has several (hard
   * links). A Set per node was ~150 bytes for each of the 10,000s of nodes a build leaves; see
   * `namesOf`.
   */
  names: string | Set<string> | null
  /** An open file that lost its name: still served by node id until the kernel forgets it. */
  file: FileNode | null
  nlookup: number
}

/** The paths the kernel knows node n by. */
export function namesOf (n: Node): Iterable<string> {
  return n.names === null ? [] : typeof n.names === 'string' ? [n.names] : n.names
}

/** How many paths the kernel knows node n by. */
export function nameCount (n: Node): number {
  return n.names === null ? 0 : typeof n.names === 'string' ? 1 : n.names.size
}

export class Nodes {
  private readonly byId = new Map<number, Node>()
  private readonly byIno = new Map<number, Node>()
  private readonly byPath = new Map<string, Node>()
  private nextId = ROOT_ID + 1

  constructor (rootIno: number) {
    const root: Node = { id: ROOT_ID, ino: rootIno, path: '/', names: '/', file: null, nlookup: 1 }
    this.byId.set(ROOT_ID, root)
    this.byIno.set(rootIno, root)
    this.byPath.set('/', root)
  }

  get size (): number {
    return this.byId.size
  }

  get (id: number): Node {
    const n = this.byId.get(id)
    if (!n) throw fsError('ESTALE', `node ${id}`)
    return n
  }

  /** The path of node id; ESTALE when it has none any more. */
  path (id: number): string {
    const n = this.get(id)
    if (n.path === null) throw fsError(n.file ? 'ENOENT' : 'ESTALE', `node ${id}`)
    return n.path
  }

  /** The kernel learned (again) that `path` is inode `ino`: one more lookup. */
  remember (ino: number, path: string): Node {
    let n = this.byIno.get(ino)
    if (!n) {
      n = { id: this.nextId++, ino, path: null, names: null, file: null, nlookup: 0 }
      this.byId.set(n.id, n)
      this.byIno.set(ino, n)
    }
    this.addPath(n, path)
    n.nlookup++
    return n
  }

  /** The kernel gave back count lookups of node id; true when it forgot the node entirely. */
  forget (id: number, count: number): boolean {
    const n = this.byId.get(id)
    if (!n || id === ROOT_ID) return false
    n.nlookup -= count
    if (n.nlookup > 0) return false
    this.byId.delete(id)
    if (this.byIno.get(n.ino) === n) this.byIno.delete(n.ino)
    for (const p of namesOf(n)) if (this.byPath.get(p) === n) this.byPath.delete(p)
    n.names = null
    n.path = null
    return true
  }

  /** n is (also) reachable by path now, which names nothing else. */
  private addPath (n: Node, path: string): void {
    const old = this.byPath.get(path)
    if (old && old !== n) this.dropPath(old, path)
    if (n.names === null) n.names = path
    else if (n.names instanceof Set) n.names.add(path)
    else if (n.names !== path) n.names = new Set([n.names, path])
    n.path = path
    this.byPath.set(path, n)
  }

  private dropPath (n: Node, path: string): void {
    if (n.names === path) n.names = null
    else if (n.names instanceof Set) {
      n.names.delete(path)
      if (n.names.size === 1) n.names = n.names.values().next().value as string
    }
    if (this.byPath.get(path) === n) this.byPath.delete(path)
    if (n.path === path) n.path = namesOf(n)[Symbol.iterator]().next().value ?? null
  }

  /**
   * `path` no longer names what it named (unlink, rmdir, replaced by a rename). When that was
   * the node's last known name, `file` (the open file, if any) keeps serving it by node id.
   */
  removed (path: string, file: FileNode | null = null): void {
    const n = this.byPath.get(path)
    if (!n) return
    this.dropPath(n, path)
    if (n.path === null) n.file = file
  }

  /** A rename moved src (and, for a directory, everything below it) to dst. */
  renamed (src: string, dst: string): void {
    const moved: Array<[Node, string, string]> = []
    for (const [p, n] of this.byPath) if (isWithin(p, src)) moved.push([n, p, rebase(p, src, dst)])
    for (const [n, p] of moved) this.dropPath(n, p)
    for (const [n, , q] of moved) this.addPath(n, q)
  }

  /** After the daemon changed the tree: drop names that no longer lead to the same inode. */
  revalidate (stillSame: (path: string, ino: number) => boolean): void {
    for (const [p, n] of [...this.byPath]) {
      if (n.id === ROOT_ID) continue
      if (!stillSame(p, n.ino)) this.dropPath(n, p)
    }
  }

  /** The node the kernel knows under this path, if any. */
  at (path: string): Node | undefined {
    return this.byPath.get(path)
  }

  /** Nodes the kernel knows (for invalidation after a rewind). */
  * all (): Generator<Node> {
    yield * this.byId.values()
  }
}
