// Fork: write the view at the start of a turn into a new directory DEST, through the same
// planner, applier and verifier as every other plan, and give DEST its own history. The
// files are written into a hidden sibling directory and renamed to DEST only once verified,
// so a crash never leaves a half-written DEST (a leftover sibling is removed next time).
import * as fs from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { CpfsError } from '../errors.js'
import { Lower } from '../real/lower.js'
import { View } from '../overlay/view.js'
import type { Session } from '../session/session.js'
import type { FileEntry } from '../store/entries.js'
import { readEntry } from '../real/lower.js'
import { applyOps, removeAnchors } from './applier.js'
import { NO_FAULTS, type Faults } from './faults.js'
import { checkNames } from './names.js'
import { isSafePath } from '../paths/paths.js'
import { planViews } from './planner.js'
import { expectOf, linkExpectations } from './expect.js'
import { viewOf } from './views.js'
import type { PlanSummary } from './finish.js'
import { verifyPaths, type Expect } from './verifier.js'
import { phase } from '../progress.js'

export interface ForkResult {
  turn: number
  dest: string
  summary: PlanSummary
}

export function checkDest (dest: string, workspace: string | undefined, code: 'FORK_DEST' | 'CLONE_DEST' = 'FORK_DEST'): void {
  if (workspace !== undefined && (dest === workspace || dest.startsWith(workspace + '/') || workspace.startsWith(dest + '/'))) {
    throw new CpfsError(code, `${dest} overlaps the workspace ${workspace}`, 'fork into a directory outside the workspace')
  }
  let st: fs.Stats | undefined
  try {
    st = fs.statSync(dest)
  } catch {}
  if (st && (!st.isDirectory() || fs.readdirSync(dest).length > 0)) {
    throw new CpfsError(code, `${dest} exists and is not an empty directory`, 'name a new directory, or an empty one')
  }
  const parent = dirname(dest)
  if (!fs.existsSync(parent)) throw new CpfsError(code, `${parent} does not exist`, 'create the parent directory first')
}

/** Write the view at the start of `turn` into the new directory `dest` (verified). */
export async function forkView (session: Session, turn: number, destArg: string, faults: Faults = NO_FAULTS): Promise<{ dest: string, summary: PlanSummary }> {
  const dest = resolve(destArg)
  checkDest(dest, session.workspace)
  const target = await viewOf(session, session.meta.stack.slice(0, turn - 1))
  return { dest, summary: await writeViewInto(session, target, dest, faults) }
}

/**
 * Write `target` into `dest` (absent or an empty directory), verified: into a hidden sibling
 * first, renamed to `dest` once verified (fork, and clone: remote/clone.ts).
 */
export async function writeViewInto (session: Session, target: View, dest: string, faults: Faults = NO_FAULTS): Promise<PlanSummary> {
  const parent = dirname(dest)
  const prefix = `.${basename(dest)}.cpfs-fork-`
  for (const name of fs.readdirSync(parent)) {
    if (name.startsWith(prefix)) fs.rmSync(join(parent, name), { recursive: true, force: true })
  }
  const tmp = join(parent, prefix + process.pid)
  fs.mkdirSync(tmp, { mode: 0o700 })
  const fd = fs.openSync(tmp, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  try {
    const destLower = new Lower(fd, new Map(), session.chunks)
    const plan = planViews(new View(destLower), target, ['/'], { full: true })
    const readContent = (op: { path: string }) => {
      const r = target.resolve(op.path)!
      if (r.kind === 'lower' && 'nlink' in r.stat) {
        const from = r.lowerPath
        return (b: Buffer, off: number, len: number, pos: number) => session.lower.read(from, b, off, len, pos)
      }
      const e = (r.kind === 'upper' ? r.entry : r.stat) as FileEntry
      return (b: Buffer, off: number, len: number, pos: number) => readEntry(e, session.chunks, b, off, len, pos,
        e.src === undefined ? null : (bb, o, l, p) => session.lower.read(e.src!, bb, o, l, p))
    }
    // Containment, as runPlan's: whatever the view holds (a clone's comes from a remote),
    // nothing is written outside DEST.
    const unsafe = plan.ops.filter(op => !isSafePath(op.path)).map(op => JSON.stringify(op.path))
    if (unsafe.length) throw new CpfsError('UNSAFE_PATH', `the view holds paths that would leave ${dest}: ${unsafe.slice(0, 3).join(', ')}`, 'nothing was written there')
    checkNames(plan.ops, fd)
    for (const op of plan.ops) if (op.op === 'write' || op.op === 'anchor') delete op.content
    const bytes = plan.ops.reduce((n, op) => n + (op.op === 'write' ? op.size : 0), 0)
    const writing = phase('writing', 'operations', plan.ops.length, bytes)
    const applied = applyOps(destLower, session.chunks, plan.ops, { planId: 'fork', readContent, onOp: () => writing.item(), faults: { afterWrite: faults.afterWrite } })
    writing.end()
    // What each path must hold: the source's content hashed again, not what was just written.
    const hashing = phase('hashing the source', 'paths', plan.ops.length, bytes)
    const expect = new Map<string, Expect>()
    for (const op of plan.ops) {
      expect.set(op.path, expectOf(session, target, op.path, new Map(), false))
      hashing.item()
    }
    hashing.end()
    linkExpectations(plan.ops, expect)
    const verifying = phase('verifying', 'paths', expect.size, bytes)
    const result = verifyPaths(destLower, expect, () => verifying.item())
    verifying.end()
    removeAnchors(destLower, plan.ops, 'fork')
    if (result.mismatches.length) {
      const shown = result.mismatches.slice(0, 5).map(m => `${m.path.slice(1)} (${m.why})`).join(', ')
      throw new CpfsError('VERIFY_FAILED', `verification of ${dest} failed: ${shown}`, 'check the disk holding ' + parent)
    }
    if (fs.existsSync(dest)) fs.rmdirSync(dest)
    fs.renameSync(tmp, dest)
    return { ops: applied.done, verified: result.verified, bytesWritten: applied.bytesWritten, changed: [] }
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true })
    throw err
  } finally {
    fs.closeSync(fd)
  }
}
