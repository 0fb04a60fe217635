// Capture: the real directory's current state of a path, as an entry whose content is in the
// chunk store. Plans capture every real path before they change it (its base entry: the
// pre-session state stays restorable); `absorb` records outside changes as a turn; `freeze`
// keeps history exact when it depends on real files that outside edits could change later.
import * as fs from 'node:fs'
import { lstatReal } from '../overlay/real.js'
import { realDirents, realNames } from '../overlay/origin.js'
import { join } from '../overlay/paths.js'
import type { Session } from '../session/session.js'
import type { BatchOp } from '../store/keys.js'

/**
 * Store the real directory's current version of p (and below, for a directory) as its base
 * entry, once: later captures of the same path keep the first. The fingerprint records what
 * was captured.
 */
export async function capture (session: Session, p: string, recursive: boolean, ops: BatchOp[]): Promise<void> {
  const origin = session.origin
  const op = await session.captureBaseAsync(p)
  if (op) ops.push(op)
  if (recursive) {
    const st = lstatReal(origin, p)
    if (st.type !== 'd') return
    for (const name of realNames(origin.realPath(p))) await capture(session, join(p, name), true, ops)
  }
}

/**
 * A plan about to change one name of a real file with several names captures all of them:
 * once the plan splits the real pair, the older turns must still show those names as one file
 * (their base entries share the real inode number and link count), never one captured name
 * beside a real one that kept the same inode number as a different file.
 */
export async function captureOtherNames (session: Session, paths: Iterable<string>, removedDirs: Iterable<string>, ops: BatchOp[]): Promise<void> {
  const origin = session.origin
  const inos = new Set<number>()
  const note = (p: string): void => {
    const st = lstatReal(origin, p)
    if (st.type === 'f' && st.nlink > 1) inos.add(st.ino)
  }
  for (const p of paths) note(p)
  // A directory the plan removes takes its files' names with it.
  const each = (dir: string, fn: (q: string, d: fs.Dirent) => void): void => {
    let kids: fs.Dirent[]
    try {
      kids = realDirents(origin.realPath(dir))
    } catch {
      return
    }
    for (const d of kids) fn(join(dir, d.name), d)
  }
  const collect = (dir: string): void => each(dir, (q, d) => d.isDirectory() ? collect(q) : d.isFile() ? note(q) : undefined)
  for (const p of removedDirs) if (lstatReal(origin, p).type === 'd') collect(p)
  if (inos.size === 0) return
  const walk = async (dir: string): Promise<void> => {
    let kids: fs.Dirent[]
    try {
      kids = realDirents(origin.realPath(dir))
    } catch {
      return
    }
    for (const d of kids) {
      const q = join(dir, d.name)
      if (d.isDirectory()) await walk(q)
      else if (d.isFile() && inos.has(lstatReal(origin, q).ino)) await capture(session, q, false, ops)
    }
  }
  await walk('/')
}
