// Lookups: what a path or an open file shows (stat, directory listing, symlink target). They
// never change anything, and never copy up.
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import { chunkLen, type SymlinkEntry } from '../store/entries.js'
import { attrOf, type Attr } from './attr.js'
import type { FileNode } from './file-node.js'
import type { HeadLayer } from './head-layer.js'
import type { OpenFiles } from './open-files.js'
import type { Lower } from '../real/lower.js'
import { resolvedType } from './view.js'

export class Lookups {
  constructor (private readonly layer: HeadLayer, private readonly files: OpenFiles, private readonly lower: Lower) {}

  getattr (p: string): Attr {
    const r = this.layer.resolve(p)
    const a = attrOf(r)
    if (resolvedType(r) === 'd') a.nlink = this.layer.view.dirNlink(p, r)
    return a
  }

  /** Attributes through an open handle (fstat), or by path when the handle is unknown. */
  fgetattr (fh: number, p: string | null): Attr {
    const h = this.files.find(fh)
    if (!h) {
      if (p === null) throw fsError('EBADF', String(fh))
      return this.getattr(p)
    }
    return this.nodeAttr(this.files.live(h))
  }

  /** Attributes of an open file, whether or not it still has a name (nlink 0 when not). */
  nodeAttr (node: FileNode): Attr {
    if (node.stale) throw fsError('ESTALE', node.label)
    const a = attrOf(node.entry ? { kind: 'upper', entry: node.entry, key: node.label } : this.layer.resolveNode(node))
    if (node.key === null) a.nlink = 0
    if (node.dirty.size && node.entry) {
      // Unflushed chunks count as stored.
      let extra = 0
      for (const idx of node.dirty.keys()) if (!node.entry.chunks.get(idx)) extra += chunkLen(node.entry.size, idx)
      a.blocks += Math.ceil(extra / 512)
    }
    return a
  }

  readdir (p: string): string[] {
    const r = this.layer.resolve(p)
    if (resolvedType(r) !== 'd') throw fsError('ENOTDIR', p)
    return this.layer.view.readdir(p)
  }

  readlink (p: string): string {
    const r = this.layer.resolve(p)
    if (resolvedType(r) !== 'l') throw fsError('EINVAL', p)
    return r.kind === 'upper' ? (r.entry as SymlinkEntry).target : this.lower.readlink(r.lowerPath)
  }

  access (p: string): void {
    this.layer.resolve(p)
  }

  statfs (): fs.StatsFs {
    return fs.statfsSync(this.lower.realPath('/'))
  }
}
