// File content as plans see it: a sparse list of [chunk index, SHA-256 hex] for every chunk
// that is not all zeros, in index order. Zeros are never hashed, stored, written or compared
// byte by byte: a 100 GiB sparse file written in the mount is applied as a sparse file, and
// verified by reading only its data (SEEK_DATA / SEEK_HOLE on the real file).
import type { Lower } from '../real/lower.js'
import { chunkHex, realContent, type Sparse } from '../real/read.js'
import { isZero, type ChunkStore } from '../store/chunks.js'
import { CHUNK_SIZE, chunkCount, chunkLen, srcBytes, type FileEntry } from '../store/entries.js'
import type { Content } from './planner.js'
import { countBytes } from '../progress.js'

export { realContent, type Sparse }

export function sameContent (a: Sparse, b: Sparse): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i][0] !== b[i][0] || a[i][1] !== b[i][1]) return false
  return true
}

/** The content a view holds for a file: an entry's chunks and lower ranges, or a lower file. */
export function viewContent (lower: Lower, chunks: ChunkStore, content: Content, size: number, store = true): Sparse {
  const keep = store ? chunks : null
  if (content.from === 'lower') {
    if (lower.servedByReal(content.path)) return realContent(lower, content.path, keep).data
    const base = lower.base.get(content.path) as FileEntry
    return entryContent(lower, chunks, base, keep)
  }
  return entryContent(lower, chunks, content.entry, keep, size)
}

function entryContent (lower: Lower, chunks: ChunkStore, e: FileEntry, keep: ChunkStore | null, size = e.size): Sparse {
  const srcEnd = Math.min(srcBytes(e), size)
  const idxs = new Set<number>()
  for (const [idx, ref] of e.chunks) if (ref && idx < chunkCount(size)) idxs.add(idx)
  for (let idx = 0; idx * CHUNK_SIZE < srcEnd; idx++) if (!e.chunks.has(idx)) idxs.add(idx)
  const out: Sparse = []
  const buf = Buffer.alloc(CHUNK_SIZE)
  for (const idx of [...idxs].sort((a, b) => a - b)) {
    const len = chunkLen(size, idx)
    countBytes(len)
    const piece = buf.subarray(0, len)
    const ref = e.chunks.get(idx)
    if (ref) {
      const data = chunks.get(ref)
      if (data.length === len) {
        if (!isZero(data)) out.push([idx, ref.toString('hex')])
        continue
      }
      piece.fill(0)
      data.copy(piece, 0, 0, Math.min(len, data.length))
    } else {
      piece.fill(0)
      lower.read(e.src!, piece, 0, Math.min(len, srcEnd - idx * CHUNK_SIZE), idx * CHUNK_SIZE)
    }
    const hex = chunkHex(piece, keep)
    if (hex) out.push([idx, hex])
  }
  return out
}
