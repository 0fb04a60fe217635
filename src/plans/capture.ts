// Capture: the real directory's current state of a path, as an entry whose content is in the
// chunk store. Plans capture every real path before they change it (its base entry: the
// pre-session state stays restorable); `absorb` records outside changes as a turn; `freeze`
// keeps history exact when it depends on real files that outside edits could change later.
import * as fs from 'node:fs'
import { lstatReal } from '../real/read.js'
import { realDirents, realNames } from '../real/lower.js'
import { join } from '../paths/paths.js'
import type { Session } from '../session/session.js'
import type { BatchOp } from '../store/keys.js'

/**
 * Store the real directory's current version of p (and below, for a directory) as its base
 * entry, once: later captures of the same path keep the first. The fingerprint records what
 * was captured.
 */
export async function capture (session: Session, p: string, recursive: boolean, ops: BatchOp[]): Promise<void> {
  const lower = session.lower
  // Depth first with an explicit stack: a tree can be deeper than the call stack.
  const stack = [p]
  for (let q = stack.pop(); q !== undefined; q = stack.pop()) {
    const op = await session.capture.captureBaseAsync(q)
    if (op) ops.push(op)
    if (!recursive || lstatReal(lower, q).type !== 'd') continue
    const names = realNames(lower.realPath(q))
    for (let i = names.length - 1; i >= 0; i--) stack.push(join(q, names[i]))
  }
}

/**
 * A plan about to change one name of a real file with several names captures all of them:
 * once the plan splits the real pair, the older turns must still show those names as one file
 * (their base entries share the real inode number and link count), never one captured name
 * beside a real one that kept the same inode number as a different file.
 */
export async function captureOtherNames (session: Session, paths: Iterable<string>, removedDirs: Iterable<string>, ops: BatchOp[]): Promise<void> {
  const lower = session.lower
  const inos = new Set<number>()
  const note = (p: string): void => {
    const st = lstatReal(lower, p)
    if (st.type === 'f' && st.nlink > 1) inos.add(st.ino)
  }
  for (const p of paths) note(p)
  // A directory the plan removes takes its files' names with it.
  for (const p of removedDirs) if (lstatReal(lower, p).type === 'd') eachReal(lower, p, (q, d) => { if (d.isFile()) note(q) })
  if (inos.size === 0) return
  const found: string[] = []
  eachReal(lower, '/', (q, d) => { if (d.isFile() && inos.has(lstatReal(lower, q).ino)) found.push(q) })
  for (const q of found) await capture(session, q, false, ops)
}

/**
 * Every entry below real directory `dir` (not following symlinks), depth first, with an
 * explicit stack: a tree can be deeper than the call stack. Unreadable directories are skipped.
 */
function eachReal (lower: Session['lower'], dir: string, fn: (q: string, d: fs.Dirent) => void): void {
  const stack = [dir]
  for (let cur = stack.pop(); cur !== undefined; cur = stack.pop()) {
    let kids: fs.Dirent[]
    try {
      kids = realDirents(lower.realPath(cur))
    } catch {
      continue
    }
    const subdirs: string[] = []
    for (const d of kids) {
      const q = join(cur, d.name)
      fn(q, d)
      if (d.isDirectory()) subdirs.push(q)
    }
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i])
  }
}
