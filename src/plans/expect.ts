// What a plan expects of every path it touches: the verifier compares the real directory with
// these once the plan is applied, and the drift check compares it with them before.
import { resolvedType, type Resolved, type View } from '../overlay/view.js'
import type { Session } from '../session/session.js'
import type { FileEntry } from '../store/entries.js'
import type { Content, PlanOp } from './planner.js'
import { lstatReal } from '../real/read.js'
import { realXattrs } from '../real/lower.js'
import { sameXattrs, xattrsOf } from './planner.js'
import { realContent, sameContent, viewContent, type Sparse } from './content.js'
import type { Expect } from './verifier.js'
import { phase } from '../progress.js'

export function expectOf (session: Session, view: View, p: string, contents: Map<string, Sparse>, store = true): Expect {
  const r = view.resolve(p)
  if (!r) return { type: null }
  const type = resolvedType(r)
  const meta = r.kind === 'upper' ? r.entry : r.stat
  const mode = meta.mode & 0o7777
  const x = xattrsOf(view, r)
  const owner = { ...(process.getuid?.() === 0 ? { uid: meta.uid, gid: meta.gid } : {}), xattrs: x ?? null }
  if (type === 'd') return { type, mode, ...owner }
  if (type === 'n') {
    const s: any = r.kind === 'upper' ? r.entry : r.stat
    return { type, mode, fmt: 'nlink' in s ? s.mode & 0o170000 : s.fmt, rdev: s.rdev, ...owner }
  }
  if (type === 'l') {
    const target = r.kind === 'upper' ? (r.entry as any).target : ('nlink' in r.stat ? view.lower.readlink(r.lowerPath) : (r.stat as any).target)
    return { type, target, ...owner }
  }
  const size = r.kind === 'upper' ? (r.entry as FileEntry).size : (r.stat as any).size
  const data = contents.get(p) ?? viewContent(session.lower, session.chunks, contentOf(r), size, store)
  return { type, mode, size, data, ...owner }
}

function contentOf (r: Resolved): Content {
  if (r.kind === 'upper') return { from: 'entry', entry: r.entry as FileEntry }
  if (!('nlink' in r.stat)) return { from: 'entry', entry: r.stat as FileEntry }
  return { from: 'lower', path: r.lowerPath }
}

/**
 * Turn planned operations into journal-ready ones: file content as chunk lists (stored), and
 * rewrites whose bytes, mode and owner already match dropped. Returns them with what the
 * verifier will expect of every path they touch.
 */
export function materialise (session: Session, target: View, planned: PlanOp[]): { ops: PlanOp[], expect: Map<string, Expect> } {
  const lower = session.lower
  const contents = new Map<string, Sparse>()
  const ops: PlanOp[] = []
  const anchorData = new Map<number, Sparse>()
  const writes = planned.filter(op => op.op === 'write')
  const preparing = phase('preparing', 'files', writes.length, writes.reduce((n, op) => n + (op.op === 'write' ? op.size : 0), 0))
  for (const op of planned) {
    if (op.op === 'anchor' && op.content) {
      op.data = viewContent(lower, session.chunks, op.content, op.size)
      delete op.content
      anchorData.set(op.ino, op.data)
    }
    if (op.op === 'link') {
      const data = anchorData.get(op.ino)
      if (data) contents.set(op.path, data)
    }
    if (op.op === 'write') {
      op.data = viewContent(lower, session.chunks, op.content!, op.size)
      preparing.item()
      delete op.content
      contents.set(op.path, op.data)
      if (op.ifDiffers) {
        const real = lstatReal(lower, op.path)
        const ownerOk = process.getuid?.() !== 0 || (real.uid === op.uid && real.gid === op.gid)
        if (real.type === 'f' && real.mode === op.mode && real.size === op.size && ownerOk && sameContent(realContent(lower, op.path, null).data, op.data)) {
          // The bytes are there already: no rewrite. But what else the view changed (an xattr
          // set in the mount, a touch) still has to reach the real file, as metadata alone.
          const sameTimes = real.mtime === op.mtime && real.mtimeNs === op.mtimeNs
          if (!sameTimes || !sameXattrs(realXattrs(lower.realPath(op.path)), op.xattrs)) {
            const { path, mode, atime, mtime, atimeNs, mtimeNs, uid, gid, xattrs } = op
            ops.push({ op: 'chmod', path, mode, atime, mtime, atimeNs, mtimeNs, uid, gid, ...(xattrs ? { xattrs } : {}) })
          }
          continue
        }
      }
      delete op.ifDiffers
    }
    ops.push(op)
  }
  preparing.end()
  const expect = new Map<string, Expect>()
  for (const op of ops) expect.set(op.path, { type: null })
  for (const p of expect.keys()) expect.set(p, expectOf(session, target, p, contents))
  linkExpectations(ops, expect)
  return { ops, expect }
}

/**
 * Names linked to one inode record: the first is checked in full, every other one for being the
 * same real inode as the first (content is read once).
 */
export function linkExpectations (ops: PlanOp[], expect: Map<string, Expect>): void {
  const first = new Map<number, string>()
  for (const op of ops) {
    if (op.op !== 'link') continue
    const f = first.get(op.ino)
    const want = expect.get(op.path)
    if (f === undefined) first.set(op.ino, op.path)
    else if (want && want.type !== null) {
      want.linkOf = f
      delete want.data
    }
  }
}
