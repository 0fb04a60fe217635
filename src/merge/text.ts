// The three-way merge of text files, as git merges them: line by line with diff3 (node-diff3).
// Bytes are handled as latin1 strings — one character per byte, every byte value allowed — so
// a file in any encoding, UTF-8 or not, comes out byte for byte; only '\n' ends a line.
import { diff3Merge } from 'node-diff3'

/** git's test for binary content: a NUL in the first 8000 bytes. Big files are not merged as text either. */
export function isBinary (b: Buffer): boolean {
  return tooBig(b.length) || b.subarray(0, 8000).includes(0)
}

/** Text merges above this size are refused as binary: diff3 is quadratic in the worst case. */
const MAX_TEXT = 16 * 1024 * 1024

/** Too big to merge (or show) as text: known from the size, without reading the file. */
export function tooBig (size: number): boolean {
  return size > MAX_TEXT
}

/** Lines with their '\n' kept, so that joining them gives the bytes back exactly. */
function lines (b: Buffer): string[] {
  const s = b.toString('latin1')
  const out: string[] = []
  let start = 0
  for (let i = s.indexOf('\n'); i >= 0; i = s.indexOf('\n', start)) {
    out.push(s.slice(start, i + 1))
    start = i + 1
  }
  if (start < s.length) out.push(s.slice(start))
  return out
}

export interface TextMerge {
  /** True when both sides changed the same lines. */
  conflict: boolean
  /** The merged bytes; with a conflict, git's markers around each conflicting region. */
  merged: Buffer
}

/** Merge ours and theirs, both made from base. Markers: <<<<<<< ours, ||||||| base, =======, >>>>>>> theirs (git's diff3 style). */
export function mergeText (base: Buffer, theirs: Buffer, ours: Buffer): TextMerge {
  const regions = diff3Merge(lines(ours), lines(base), lines(theirs), { excludeFalseConflicts: true })
  let conflict = false
  const out: string[] = []
  // A side's last line without '\n' gets one before the next marker, as git writes it.
  const side = (ls: string[]): void => {
    for (const l of ls) out.push(l)
    if (ls.length && !ls[ls.length - 1].endsWith('\n')) out.push('\n')
  }
  for (const r of regions) {
    if (r.ok) {
      for (const l of r.ok) out.push(l)
      continue
    }
    conflict = true
    const c = r.conflict!
    out.push('<<<<<<< ours\n')
    side(c.a)
    out.push('||||||| base\n')
    side(c.o)
    out.push('=======\n')
    side(c.b)
    out.push('>>>>>>> theirs\n')
  }
  return { conflict, merged: Buffer.from(out.join(''), 'latin1') }
}
