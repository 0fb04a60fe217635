// Capture: the real directory's current state of a path, as an entry whose content is in the
// chunk store. Plans capture every real path before they change it (its base entry: the
// pre-session state stays restorable); `absorb` records outside changes as a turn; `freeze`
// keeps history exact when it depends on real files that outside edits could change later.
import * as fs from 'node:fs'
import { lstatReal } from '../overlay/real.js'
import { join } from '../overlay/paths.js'
import type { Session } from '../session/session.js'
import type { BatchOp } from '../store/keys.js'

/**
 * Store the real directory's current version of p (and below, for a directory) as its base
 * entry, once: later captures of the same path keep the first. The fingerprint records what
 * was captured.
 */
export function capture (session: Session, p: string, recursive: boolean, ops: BatchOp[]): void {
  const origin = session.origin
  const op = session.captureBase(p)
  if (op) ops.push(op)
  if (recursive) {
    const st = lstatReal(origin, p)
    if (st.type !== 'd') return
    for (const name of fs.readdirSync(origin.realPath(p))) capture(session, join(p, name), true, ops)
  }
}
