// The root tree: the workspace as it was before cpfs changed it (the lower: base entries
// where plans captured the real version, the real directory elsewhere), every path with its
// whole content. Turn 1's view is this tree; later layers point into it (`src`, `redirect`),
// so a clone needs it whole. The lower never changes, so a push builds it once per remote.
import { realContentSteps, realEntry, type ChunkSink } from '../real/read.js'
import type { Session } from '../session/session.js'
import { hashChunk } from '../store/chunks.js'
import { encodeEntry } from '../store/codec.js'
import type { LiveEntry } from '../store/entries.js'
import { join } from '../paths/paths.js'
import { phase } from '../progress.js'
import type { Packer } from './packer.js'
import type { RemoteRoot } from './objects.js'

export interface BuiltRoot {
  root: RemoteRoot
  /** Every chunk the tree holds (hex), to find the packs it needs. */
  chunks: Set<string>
  bytes: number
}

export async function buildRoot (session: Session, packer: Packer): Promise<BuiltRoot> {
  const lower = session.lower
  const entries: Array<[string, Buffer]> = []
  const chunks = new Set<string>()
  let bytes = 0
  const sink: ChunkSink = {
    put (data: Buffer): Buffer {
      const h = hashChunk(data)
      packer.add(h, data)
      return h
    }
  }
  const reading = phase('reading the workspace', 'paths')
  // Depth first with an explicit stack: a tree can be deeper than the call stack.
  const todo = ['/']
  for (let p = todo.pop(); p !== undefined; p = todo.pop()) {
    const st = lower.stat(p)
    if (st === null) continue
    let e: LiveEntry
    if ('nlink' in st) {
      // A real path: read (and send) its content now.
      let content
      if (st.kind === 'f') {
        const steps = realContentSteps(lower, p, sink)
        let r = steps.next()
        for (; !r.done; r = steps.next()) await packer.settle()
        content = r.value
      }
      const got = realEntry(lower, sink, p, content)
      if (got.kind === 'w') continue // gone since it was listed
      e = got
    } else {
      e = st
      if (e.kind === 'f') {
        for (const ref of e.chunks.values()) {
          if (ref === null) continue
          packer.add(ref, session.chunks.get(ref))
          await packer.settle()
        }
      }
    }
    if (e.kind === 'f') {
      for (const ref of e.chunks.values()) if (ref) chunks.add(ref.toString('hex'))
      bytes += e.size
    }
    entries.push([p, encodeEntry(e)])
    reading.item()
    if (e.kind === 'd') {
      const names = lower.readdir(p).sort()
      for (let i = names.length - 1; i >= 0; i--) todo.push(join(p, names[i]))
    }
  }
  reading.end()
  entries.sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
  return { root: { kind: 'root', entries }, chunks, bytes }
}
