// The root tree: the workspace as it was before cpfs changed it (the lower: base entries
// where plans captured the real version, the real directory elsewhere), every path with its
// whole content. Turn 1's view is this tree; later layers point into it (`src`, `redirect`),
// so a clone needs it whole.
//
// The lower is the real directory wherever no plan captured a path, and an edit made there
// while nothing is mounted changes it (that is cpfs's contract for untouched paths): every push
// walks it again, but with lstat only where it can — a file whose kind, size, mode, times and
// inode match what the last push read is taken from the cache (`remote-root` in the store
// directory) without reading it. Atimes are left out (set to the mtime): reading a file
// changes its atime, which would give the tree a new name at every push.
import { realContentSteps, realEntry, type ChunkSink } from '../real/read.js'
import type { Session } from '../session/session.js'
import { hashChunk } from '../store/chunks.js'
import { encodeEntry } from '../store/codec.js'
import type { LiveEntry } from '../store/entries.js'
import { join } from '../paths/paths.js'
import * as fs from 'node:fs'
import { join as joinFs } from 'node:path'
import { decode, encode, decodeEntry } from '../store/codec.js'
import type { LowerStat } from '../real/lower.js'
import type { ChunkIndex } from './chunk-index.js'
import { phase } from '../progress.js'
import type { Packer } from './packer.js'
import type { RemoteRoot } from './objects.js'

export interface BuiltRoot {
  root: RemoteRoot
  /** Every chunk the tree holds (hex), to find the packs it needs. */
  chunks: Set<string>
  bytes: number
}

const CACHE = 'remote-root'

/**
 * What must match for a real path to be taken from the cache. A directory's times and size
 * are left out: they change when cpfs's own plans add or remove names in it (applying turns),
 * and the root tree is the directory as it was before — the cached entry.
 */
export function fingerprint (st: LowerStat): string {
  if (st.kind === 'd') return `d:${st.mode}:${st.uid}:${st.gid}:${st.ino}`
  return `${st.kind}:${st.mode}:${st.uid}:${st.gid}:${st.size}:${st.mtime}:${st.mtimeNs}:${st.ctime}:${st.ctimeNs}:${st.ino}:${st.nlink}`
}

function loadCache (storePath: string): Map<string, [string, Buffer]> {
  try {
    return new Map(decode<Array<[string, string, Buffer]>>(fs.readFileSync(joinFs(storePath, CACHE))).map(([p, fp, raw]) => [p, [fp, Buffer.from(raw)]]))
  } catch {
    return new Map()
  }
}

export function saveCache (storePath: string, cache: Array<[string, string, Buffer]>): void {
  const tmp = joinFs(storePath, CACHE + '.tmp')
  fs.writeFileSync(tmp, encode(cache), { mode: 0o600 })
  fs.renameSync(tmp, joinFs(storePath, CACHE))
}

/** The entry with its atime set to its mtime: reading a file changes its atime. */
function withoutAtime (e: LiveEntry): LiveEntry {
  const out: LiveEntry = { ...e, atime: e.mtime }
  if (e.mtimeNs === undefined) delete out.atimeNs
  else out.atimeNs = e.mtimeNs
  return out
}

export async function buildRoot (session: Session, packer: Packer, index: ChunkIndex): Promise<BuiltRoot> {
  const lower = session.lower
  const cached = loadCache(session.store.path)
  const nextCache: Array<[string, string, Buffer]> = []
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
    const fp = 'nlink' in st ? fingerprint(st) : null
    const hit = fp === null ? undefined : cached.get(p)
    const reuse = hit !== undefined && hit[0] === fp ? decodeEntry(hit[1]) : undefined
    if (reuse !== undefined && reuse.kind !== 'w' && reuse.kind !== 'h' && (reuse.kind !== 'f' || [...reuse.chunks.values()].every(r => r === null || index.has(r.toString('hex'))))) {
      // Unchanged since the last push read it, and its chunks are on the remote.
      e = reuse
    } else if ('nlink' in st) {
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
      e = withoutAtime(got)
    } else {
      // A base entry (a plan or the first write captured the real version): atimes left out.
      e = withoutAtime(st)
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
    const raw = encodeEntry(e)
    entries.push([p, raw])
    if (fp !== null) nextCache.push([p, fp, raw])
    reading.item()
    if (e.kind === 'd') {
      const names = lower.readdir(p).sort()
      for (let i = names.length - 1; i >= 0; i--) todo.push(join(p, names[i]))
    }
  }
  reading.end()
  saveCache(session.store.path, nextCache)
  entries.sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
  return { root: { kind: 'root', entries }, chunks, bytes }
}
