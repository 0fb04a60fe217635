// The kernel's view of our inodes: node ids handed out in entry replies, each with a lookup
// count the kernel later gives back with FORGET. A node id names one overlay inode (its st_ino)
// for as long as the kernel remembers it; ids are never reused, so the generation is always 0.
// Requests arrive by node id, the overlay speaks paths: each node keeps the path it is reachable
// by now, kept right across renames and unlinks made through the mount, and re-checked after
// the daemon changes the tree itself (rewind, redo, restore).
import { fsError } from '../errors.js'
import type { FileNode } from '../overlay/overlay.js'
import { isWithin, rebase } from '../overlay/paths.js'
import { ROOT_ID } from './kernel.js'

export interface Node {
  id: number
  ino: number
  /** The path this inode is reachable by; null once it has no name (unlinked, replaced, rewound away). */
  path: string | null
  /** An open file that lost its name: still served by node id until the kernel forgets it. */
  file: FileNode | null
  nlookup: number
}

export class Nodes {
  private readonly byId = new Map<number, Node>()
  private readonly byIno = new Map<number, Node>()
  private readonly byPath = new Map<string, Node>()
  private nextId = ROOT_ID + 1

  constructor (rootIno: number) {
    const root: Node = { id: ROOT_ID, ino: rootIno, path: '/', file: null, nlookup: 1 }
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
    if (n) {
      if (n.path !== path) this.setPath(n, path)
    } else {
      n = { id: this.nextId++, ino, path: null, file: null, nlookup: 0 }
      this.byId.set(n.id, n)
      this.byIno.set(ino, n)
      this.setPath(n, path)
    }
    n.nlookup++
    return n
  }

  forget (id: number, count: number): void {
    const n = this.byId.get(id)
    if (!n || id === ROOT_ID) return
    n.nlookup -= count
    if (n.nlookup > 0) return
    this.byId.delete(id)
    if (this.byIno.get(n.ino) === n) this.byIno.delete(n.ino)
    if (n.path !== null && this.byPath.get(n.path) === n) this.byPath.delete(n.path)
  }

  private setPath (n: Node, path: string | null): void {
    if (n.path !== null && this.byPath.get(n.path) === n) this.byPath.delete(n.path)
    n.path = path
    if (path === null) return
    const old = this.byPath.get(path)
    if (old && old !== n) old.path = null
    this.byPath.set(path, n)
  }

  /** `path` no longer names what it named (unlink, rmdir, replaced by a rename). */
  removed (path: string, file: FileNode | null = null): void {
    const n = this.byPath.get(path)
    if (!n) return
    this.setPath(n, null)
    n.file = file
  }

  /** A rename moved src (and, for a directory, everything below it) to dst. */
  renamed (src: string, dst: string): void {
    const moved: Array<[Node, string]> = []
    for (const [p, n] of this.byPath) if (isWithin(p, src)) moved.push([n, rebase(p, src, dst)])
    for (const [n] of moved) this.setPath(n, null)
    for (const [n, p] of moved) this.setPath(n, p)
  }

  /** After the daemon changed the tree: drop names that no longer lead to the same inode. */
  revalidate (stillSame: (path: string, ino: number) => boolean): void {
    for (const n of [...this.byPath.values()]) {
      if (n.id === ROOT_ID || n.path === null) continue
      if (!stillSame(n.path, n.ino)) this.setPath(n, null)
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
