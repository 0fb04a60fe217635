// The verifier: after a plan ran, re-read every path it touched from the real directory and
// compare type, permission bits, symlink target and content (SHA-256 per chunk) with what
// the plan was meant to produce. It trusts nothing the applier reported.
import type { Lower } from '../real/lower.js'
import { lstatReal } from '../real/read.js'
import { realXattrs } from '../real/lower.js'
import { sameXattrs } from './planner.js'
import { realContent, sameContent, type Sparse } from './content.js'
import type { Kind } from '../store/entries.js'

export interface Expect {
  type: Kind | null
  /** A special node's S_IFMT type and device number. */
  fmt?: number
  rdev?: number
  mode?: number
  target?: string
  size?: number
  /** Non-zero chunks, [index, SHA-256 hex] (see content.ts). */
  data?: Sparse
  uid?: number
  gid?: number
  /** Extended attributes, the whole set (undefined: not checked). */
  xattrs?: Record<string, Buffer> | null
  /** A hard link: the same real inode as this path (whose content is checked instead). */
  linkOf?: string
}

export interface VerifyResult {
  verified: number
  mismatches: Array<{ path: string, why: string }>
}

export function verifyPaths (lower: Lower, expect: Map<string, Expect>, onPath?: () => void): VerifyResult {
  const mismatches: VerifyResult['mismatches'] = []
  for (const [p, want] of expect) {
    const st = lstatReal(lower, p)
    const why = compare(lower, p, st, want)
    if (why) mismatches.push({ path: p, why })
    onPath?.()
  }
  return { verified: expect.size, mismatches }
}

function compare (lower: Lower, p: string, st: ReturnType<typeof lstatReal>, want: Expect): string | null {
  if (st.type !== want.type) return `is ${st.type ?? 'missing'}, expected ${want.type ?? 'missing'}`
  if (want.type === null) return null
  if (want.type !== 'l' && want.mode !== undefined && st.mode !== want.mode) return `mode ${st.mode.toString(8)}, expected ${want.mode.toString(8)}`
  if (want.type === 'l' && st.target !== want.target) return `links to ${st.target}, expected ${want.target}`
  if (want.type === 'n' && (st.fmt !== want.fmt || st.rdev !== want.rdev)) return `node type ${st.fmt.toString(8)}:${st.rdev}, expected ${want.fmt!.toString(8)}:${want.rdev}`
  if (want.xattrs !== undefined && !sameXattrs(realXattrs(lower.realPath(p)), want.xattrs ?? undefined)) return 'extended attributes differ'
  if (want.uid !== undefined && (st.uid !== want.uid || st.gid !== want.gid)) return `owner ${st.uid}:${st.gid}, expected ${want.uid}:${want.gid}`
  if (want.linkOf !== undefined) {
    const other = lstatReal(lower, want.linkOf)
    if (other.type === null || other.ino !== st.ino) return `is not a hard link of ${want.linkOf.slice(1)}`
  }
  if (want.type === 'f') {
    if (want.size !== undefined && st.size !== want.size) return `size ${st.size}, expected ${want.size}`
    if (want.data && !sameContent(realContent(lower, p, null).data, want.data)) return 'content differs'
  }
  return null
}
