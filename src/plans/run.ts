// Running a plan against the real directory, the only way cpfs ever changes it:
//   1. plan      the pure planner compares the expected and target views;
//   2. check     every path the plan touches is compared with what the store expects
//                (drift); any difference refuses the whole plan unless `force`;
//   3. capture   the real version of every path about to change is stored as its base
//                entry, so the pre-session content stays restorable;
//   4. journal   the prepared plan (content as chunk hashes) is written to the store in the
//                same synced batch as the captures;
//   5. apply     idempotent operations, temp file + rename;
//   6. verify    every touched path is re-read and compared byte for byte;
//   7. commit    one synced batch records the new applied stack and retires the journal.
// A crash anywhere between 4 and 7 is finished by `recover` on the next command.
import * as fs from 'node:fs'
import { CpfsError, isCpfsError } from '../errors.js'
import { View, resolvedType, type Resolved } from '../overlay/view.js'
import { belowAny, isSafePath, isWithin, join } from '../overlay/paths.js'
import { realNames, type Origin } from '../overlay/origin.js'
import { fingerprintDrift, fingerprintOf } from '../store/fingerprints.js'
import type { Session, StackChange } from '../session/session.js'
import { decode, encode } from '../store/codec.js'
import { isInoKey, type Entry, type FileEntry } from '../store/entries.js'
import type { BatchOp } from '../store/keys.js'
import { Progress, hasJournal, readJournal, retireJournal, writeJournal, type Journal } from './journal.js'
import { checkNames } from './names.js'
import { applyOps, cleanTemps, fingerprint, removeAnchors, type Fingerprint } from './applier.js'
import { planViews, touchedPaths, type Content, type PlanOp } from './planner.js'
import { lstatReal, type RealState } from '../overlay/real.js'
import { realContent, sameContent, viewContent, type Sparse } from './content.js'
import { capture, captureOtherNames } from './capture.js'
import { verifyPaths, type Expect } from './verifier.js'
import { phase } from '../progress.js'
import { chunkLen } from '../store/entries.js'

export interface PlanSummary {
  ops: number
  verified: number
  bytesWritten: number
  /** Paths the plan changed: the first ones only (CHANGED_SHOWN), so that a reply stays small. */
  changed: string[]
  /** How many paths the plan changed in all. */
  changedCount?: number
  recovered?: boolean
  /** Paths another process changed while the plan ran, left as they were. */
  skipped?: string[]
}

/** Store key of the paths the last plan skipped (shown by cpfs status). */
export const SKIPPED_KEY = 'k'


export interface RunOptions {
  force?: boolean
  targetStack: number[]
  after?: StackChange
  /** Store ops that must be durable before the plan starts (a prepared layer's entries). */
  preOps?: BatchOp[]
}

export function expectOf (session: Session, view: View, p: string, contents: Map<string, Sparse>, store = true): Expect {
  const r = view.resolve(p)
  if (!r) return { type: null }
  const type = resolvedType(r)
  const meta = r.kind === 'upper' ? r.entry : r.stat
  const mode = meta.mode & 0o7777
  const x = r.kind === 'upper' ? r.entry.x : 'nlink' in r.stat ? view.origin.xattrs(r.originPath) : r.stat.x
  const owner = { ...(process.getuid?.() === 0 ? { uid: meta.uid, gid: meta.gid } : {}), x: x ?? null }
  if (type === 'd') return { type, mode, ...owner }
  if (type === 'n') {
    const s: any = r.kind === 'upper' ? r.entry : r.stat
    return { type, mode, fmt: 'nlink' in s ? s.mode & 0o170000 : s.fmt, rdev: s.rdev, ...owner }
  }
  if (type === 'l') {
    const target = r.kind === 'upper' ? (r.entry as any).target : ('nlink' in r.stat ? view.origin.readlink(r.originPath) : (r.stat as any).target)
    return { type, target, ...owner }
  }
  const size = r.kind === 'upper' ? (r.entry as FileEntry).size : (r.stat as any).size
  const data = contents.get(p) ?? viewContent(session.origin, session.chunks, contentOf(r), size, store)
  return { type, mode, size, data, ...owner }
}

function contentOf (r: Resolved): Content {
  if (r.kind === 'upper') return { from: 'entry', entry: r.entry as FileEntry }
  if (!('nlink' in r.stat)) return { from: 'entry', entry: r.stat as FileEntry }
  return { from: 'origin', path: r.originPath }
}

/** Why the real state of p differs from what the expected view says, or null. */
function driftOf (session: Session, expected: View, p: string, real: RealState): string | null {
  const r = expected.resolve(p)
  // A path below a non-directory does not exist; whether that ancestor drifted is checked
  // on its own when the plan touches it.
  if (!r) return real.type && !real.blockedBy ? `exists (${real.type}) but cpfs expected nothing there` : null
  if (real.blockedBy) return `is missing (${real.blockedBy.slice(1)} is not a directory)`
  const want = expectOf(session, expected, p, new Map())
  if (real.type !== want.type) return `is ${real.type ?? 'missing'}, cpfs expected ${want.type}`
  if (want.type !== 'l' && real.mode !== want.mode) return `mode ${real.mode.toString(8)}, cpfs expected ${want.mode!.toString(8)}`
  if (want.type === 'l' && real.target !== want.target) return 'symlink target changed'
  if (want.type === 'n' && (real.fmt !== want.fmt || real.rdev !== want.rdev)) return 'node type changed'
  if (want.type === 'f') {
    // Origin content that the real directory itself serves cannot have drifted from itself.
    if (r.kind === 'origin' && r.originPath === p && session.origin.servedByReal(p)) return null
    if (real.size !== want.size) return 'content changed'
    if (!sameContent(realContent(session.origin, p, null).data, want.data!)) return 'content changed'
  }
  return null
}

/**
 * Paths (with the reason) where the real directory differs from what cpfs last knew: its
 * fingerprint where cpfs has one (store/fingerprints.ts), otherwise the expected view. A
 * directory the plan removes is checked all the way down: anything below it that changed
 * since cpfs last looked would be lost with it.
 */
export function findDrift (session: Session, expected: View, ops: PlanOp[]): string[] {
  const drifted: string[] = []
  const seen = new Set<string>()
  const say = (p: string, why: string) => drifted.push(`${p.slice(1) || '.'} (${why})`)
  for (const op of ops) {
    if (seen.has(op.path)) continue
    seen.add(op.path)
    const real = lstatReal(session.origin, op.path)
    const f = session.capture.fingerprints.get(op.path)
    const why = f ? fingerprintDrift(f, real) : driftOf(session, expected, op.path, real) ?? unseen(session, op.path, real)
    if (why) {
      say(op.path, why)
      continue
    }
    if (op.op === 'remove' && op.type === 'd' && real.type === 'd') {
      const since = f?.at ?? session.openedAt
      walkReal(session.origin, op.path, (q, st) => {
        const fq = session.capture.fingerprints.get(q)
        const w = fq ? fingerprintDrift(fq, st) : st.ctime > since ? unseen(session, q, st) ?? 'changed after cpfs last saw it' : null
        if (w) say(q, w)
      })
    }
  }
  return drifted
}

/**
 * A real path cpfs has no fingerprint for is one the history never changed: the view shows the
 * real directory there, so it is what cpfs last knew unless it changed after the session
 * began (made or edited outside the mount while it was live, e.g. in a directory the mount
 * replaced: its entries are listed from the real directory now). Such a path gets a
 * fingerprint saying cpfs knew nothing there, so that a later command (after this plan is
 * refused, the session has ended) still finds it, and --force keeps it in the history as an
 * outside change (plans/absorb.ts).
 */
function unseen (session: Session, p: string, real: RealState): string | null {
  if (real.type === null || real.blockedBy || real.type === 'd' || real.ctime <= session.openedAt) return null
  session.capture.setFingerprint(p, fingerprintOf({ ...real, type: null }, session.openedAt))
  return 'changed outside cpfs after the session began'
}

/**
 * Before a --force plan: outside changes cpfs has no fingerprint for get one (`unseen`), so
 * that keeping the displaced versions (plans/absorb.ts) records them with the others.
 */
export async function noteUnseenChanges (session: Session): Promise<void> {
  const { expected, target, touched } = await realToStack(session, session.meta.stack.slice())
  if (touched.size) findDrift(session, expected, planViews(expected, target, touched).ops)
}

/**
 * Every path below real directory p (not following symlinks), with its state: depth first,
 * a directory's entries before what is below them, with an explicit stack (a tree can be
 * deeper than the call stack).
 */
function walkReal (origin: Origin, p: string, fn: (q: string, st: RealState) => void): void {
  const stack = [p]
  for (let dir = stack.pop(); dir !== undefined; dir = stack.pop()) {
    let names: string[]
    try {
      names = realNames(origin.realPath(dir))
    } catch {
      continue
    }
    const subdirs: string[] = []
    for (const name of names) {
      const q = join(dir, name)
      const st = lstatReal(origin, q)
      fn(q, st)
      if (st.type === 'd') subdirs.push(q)
    }
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i])
  }
}

/** Append `more` to `ops` one by one: `ops.push(...more)` overflows the call stack for big lists. */
export function append<T> (ops: T[], more: Iterable<T>): T[] {
  for (const op of more) ops.push(op)
  return ops
}

/** The directories of `dirs` that are not below another one of them. */
function outermost (dirs: string[]): string[] {
  const out: string[] = []
  for (const d of [...new Set(dirs)].sort((a, b) => a.length - b.length)) if (!out.some(o => isWithin(d, o))) out.push(d)
  return out
}

/** After a plan verified: the real paths it wrote are what cpfs knows of them now. */
function recordFingerprints (session: Session, paths: Iterable<string>, removedDirs: string[]): void {
  const inos = new Set<number>()
  // One pass over the fingerprints for all removed directories (the outermost ones suffice):
  // a pass per directory was quadratic for a plan that removes many.
  const tops = outermost(removedDirs)
  if (tops.length) {
    const gone: string[] = []
    for (const [q, f] of session.capture.fingerprints) {
      if (!tops.some(d => q !== d && isWithin(q, d))) continue
      if (f.t !== null && f.t !== 'd') inos.add(f.ino) // a name that went with its directory
      gone.push(q)
    }
    for (const q of gone) session.capture.setFingerprint(q, null)
  }
  for (const p of paths) {
    const old = session.capture.fingerprints.get(p)
    // A name removed or replaced moved the ctime of the file it was (its other names').
    if (old && old.t !== null && old.t !== 'd') inos.add(old.ino)
    const st = lstatReal(session.origin, p)
    session.capture.setFingerprint(p, fingerprintOf(st))
    if (st.type !== null && st.type !== 'd' && st.nlink > 1) inos.add(st.ino)
  }
  // A file rewritten in place, linked or unlinked changed its other names too (hard links):
  // those still that file are known as they are now.
  if (inos.size) {
    for (const [q, f] of [...session.capture.fingerprints]) {
      if (f.t === null || f.t === 'd' || !inos.has(f.ino)) continue
      const st = lstatReal(session.origin, q)
      if (st.ino === f.ino) session.capture.setFingerprint(q, fingerprintOf(st))
    }
  }
}

function newPlanId (): string {
  return Date.now().toString(36) + Math.random().toString(36).slice(2, 8)
}

function crashHook (index: number): void {
  // Test hook: die like kill -9 right after operation N, to prove recovery.
  const at = process.env.CPFS_TEST_CRASH_AFTER_OP
  if (at !== undefined && Number(at) === index) process.kill(process.pid, 'SIGKILL')
}

export async function runPlan (session: Session, expected: View, target: View, touched: Set<string>, opts: RunOptions): Promise<PlanSummary> {
  // Containment: a recorded path with '..', an empty or '.' component, or NUL never reaches
  // the real directory, whatever the history says.
  const unsafe = [...touched].filter(p => !isInoKey(p) && !isSafePath(p)).map(p => JSON.stringify(p))
  if (unsafe.length) {
    throw new CpfsError('UNSAFE_PATH', `the history holds paths that would leave the workspace: ${unsafe.slice(0, 3).join(', ')}`, 'the store was tampered with; nothing was changed')
  }
  const plan = planViews(expected, target, touched)
  const origin = session.origin
  checkNames(plan.ops, origin.dirFd)

  // 2. drift
  const checking = phase('checking', 'paths', plan.ops.length)
  const drifted = findDrift(session, expected, plan.ops)
  checking.set(plan.ops.length)
  checking.end()
  if (drifted.length && !opts.force) {
    const shown = drifted.slice(0, 5).join(', ') + (drifted.length > 5 ? ` and ${drifted.length - 5} more` : '')
    throw new CpfsError('DRIFT', `the real directory changed outside cpfs: ${shown}`, 'inspect those paths, then run again with --force to replace them (their current content is kept in the store)')
  }

  const { ops, expect } = materialise(session, target, plan.ops)
  // Fingerprints before the captures read anything: a change another process makes after this
  // is seen by the applier's re-check and left alone; one made before it is in the capture.
  const prints = takePrints(origin, ops)

  // 3 + 4. capture and journal, in one synced batch.
  const batch: BatchOp[] = []
  const capturing = phase('keeping originals', 'paths', ops.length)
  for (const op of ops) {
    const real = lstatReal(origin, op.path)
    if (real.blockedBy) await capture(session, real.blockedBy, false, batch)
    await capture(session, op.path, op.op === 'remove' && op.type === 'd', batch)
    capturing.item()
  }
  await captureOtherNames(session, ops.map(op => op.path), ops.filter(op => op.op === 'remove' && op.type === 'd').map(op => op.path), batch)
  capturing.end()
  const journal: Journal = { id: newPlanId(), ops, expect, targetStack: opts.targetStack.slice(), prints }
  if (opts.after) journal.after = opts.after
  if (opts.preOps) append(batch, opts.preOps)
  batch.push(await writeJournal(session.store, journal))
  await session.persister.syncBatch(batch)
  return await finish(session, journal, false)
}

/**
 * What every path a plan touches is now, and everything below a real directory it may
 * remove or replace (a directory is only ever removed entry by entry, each compared with
 * these: what another process puts there in the meantime stays).
 */
function takePrints (origin: Origin, ops: PlanOp[]): Map<string, Fingerprint> {
  const prints = new Map<string, Fingerprint>()
  for (const op of ops) {
    if (prints.has(op.path)) continue
    const f = fingerprint(origin, op.path)
    prints.set(op.path, f)
    if (f.type === 'd' && op.op !== 'mkdir' && op.op !== 'chmod' && op.op !== 'anchor') {
      walkReal(origin, op.path, (q, st) => {
        if (!prints.has(q)) prints.set(q, { type: st.type, size: st.size, mtime: st.mtime, ctime: st.ctime, ino: st.ino })
      })
    }
  }
  return prints
}


/**
 * Turn planned operations into journal-ready ones: file content as chunk lists (stored), and
 * rewrites whose bytes, mode and owner already match dropped. Returns them with what the
 * verifier will expect of every path they touch.
 */
function materialise (session: Session, target: View, planned: PlanOp[]): { ops: PlanOp[], expect: Map<string, Expect> } {
  const origin = session.origin
  const contents = new Map<string, Sparse>()
  const ops: PlanOp[] = []
  const anchorData = new Map<number, Sparse>()
  const writes = planned.filter(op => op.op === 'write')
  const preparing = phase('preparing', 'files', writes.length, writes.reduce((n, op) => n + (op.op === 'write' ? op.size : 0), 0))
  for (const op of planned) {
    if (op.op === 'anchor' && op.content) {
      op.data = viewContent(origin, session.chunks, op.content, op.size)
      delete op.content
      anchorData.set(op.ino, op.data)
    }
    if (op.op === 'link') {
      const data = anchorData.get(op.ino)
      if (data) contents.set(op.path, data)
    }
    if (op.op === 'write') {
      op.data = viewContent(origin, session.chunks, op.content!, op.size)
      preparing.item()
      delete op.content
      contents.set(op.path, op.data)
      if (op.ifDiffers) {
        const real = lstatReal(origin, op.path)
        const ownerOk = process.getuid?.() !== 0 || (real.uid === op.uid && real.gid === op.gid)
        if (real.type === 'f' && real.mode === op.mode && real.size === op.size && ownerOk && sameContent(realContent(origin, op.path, null).data, op.data)) continue
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

/**
 * A plan that cannot finish (a path the real filesystem refuses, a full disk, an I/O error)
 * is rolled back: every path it touched is made what it was before (the plan captured it
 * first), temporary files go, directory modes come back, the journal is retired. The history
 * is unchanged, so the command can simply be run again once the cause is fixed.
 */
async function rollBack (session: Session, j: Journal): Promise<void> {
  const origin = session.origin
  cleanTemps(origin, j.ops, j.id)
  for (const id of [...(j.after?.newLayers ?? []), ...j.targetStack]) if (!session.history.layers.has(id)) session.history.layers.set(id, await session.store.loadLayer(id))
  const before = await viewOf(session, session.meta.applied)
  const planned = await viewOf(session, j.targetStack)
  const touched = new Set(j.ops.map(o => o.path))
  const { ops, expect } = materialise(session, before, planViews(planned, before, touched).ops)
  const batch: BatchOp[] = []
  await session.persister.syncBatch(batch)
  applyOps(origin, session.chunks, ops, { planId: j.id + 'b' })
  const result = verifyPaths(origin, expect)
  removeAnchors(origin, ops, j.id + 'b')
  removeAnchors(origin, j.ops, j.id)
  if (result.mismatches.length) {
    const shown = result.mismatches.slice(0, 5).map(m => `${m.path.slice(1) || '.'} (${m.why})`).join(', ')
    throw new Error(`the roll-back did not verify: ${shown}`)
  }
  for (const p of touched) session.capture.setFingerprint(p, fingerprintOf(lstatReal(origin, p)))
  // What the roll-back made again below a directory (new inodes) is known as it is now too.
  const below = belowAny(touched)
  for (const q of [...session.capture.fingerprints.keys()]) {
    if (!touched.has(q) && below(q)) session.capture.setFingerprint(q, fingerprintOf(lstatReal(origin, q)))
  }
  await writeFingerprints(session)
  await session.store.batch(await retireJournal(session.store), true)
}

function failHook (): ((index: number) => void) | undefined {
  // Test hook: the real filesystem refuses operation N (as a too-long name or a full disk would).
  const at = process.env.CPFS_TEST_FAIL_AT_OP
  if (at === undefined) return undefined
  return (index) => {
    if (index === Number(at)) throw Object.assign(new Error('EIO: injected failure'), { code: 'EIO' })
  }
}

/** The bytes a sparse content list holds (its non-zero chunks). */
function sparseBytes (data: Sparse, size: number): number {
  let n = 0
  for (const [idx] of data) n += chunkLen(size, idx)
  return n
}

/** The bytes a plan writes: the data chunks of its file writes. */
function dataBytes (ops: PlanOp[]): number {
  return ops.reduce((n, op) => n + (op.op === 'write' ? (op.data ? sparseBytes(op.data, op.size) : op.size) : 0), 0)
}

function testEditHook (origin: Session['origin']): ((index: number, op: PlanOp) => void) | undefined {
  // Test hook: another process edits the path of operation N just before the plan reaches it
  // ("N"), or writes a new file at PATH ("N:PATH").
  const hook = process.env.CPFS_TEST_EDIT_BEFORE_OP
  if (hook === undefined) return undefined
  const [at, path] = hook.split(':')
  return (index, op) => {
    if (index !== Number(at)) return
    if (path) fs.writeFileSync(origin.realPath(path), 'made concurrently\n')
    else fs.appendFileSync(origin.realPath(op.path), 'edited concurrently\n')
  }
}

async function finish (session: Session, j: Journal, recovered: boolean): Promise<PlanSummary> {
  const origin = session.origin
  if (recovered) cleanTemps(origin, j.ops, j.id)
  let applied
  const applying = phase('applying', 'operations', j.ops.length, dataBytes(j.ops))
  const fail = failHook()
  const edit = recovered ? undefined : testEditHook(origin)
  const progress = new Progress(session)
  // A plan journaled by cpfs before 0.2 has no fingerprints: it is finished as it was then.
  const prints = j.prints
  const resume = recovered && prints ? { ...progress.read(j.id), expect: j.expect } : undefined
  try {
    applied = applyOps(origin, session.chunks, j.ops, {
      planId: j.id,
      prints,
      resume,
      progress: (i, started) => progress.write(j.id, i, started),
      beforeOp: (i, op) => { edit?.(i, op); fail?.(i) },
      onOp: (i) => { applying.item(); if (!recovered) crashHook(i) }
    })
    applying.end()
  } catch (err: any) {
    progress.close(false)
    if (isCpfsError(err) && err.code === 'UNSAFE_PATH') throw err
    const cause = String(err?.message ?? err).split('\n')[0]
    try {
      await rollBack(session, j)
      progress.close(true)
    } catch (back: any) {
      throw new CpfsError('APPLY_FAILED', `cannot write the real directory (${cause}), and cannot roll back (${back?.message ?? back})`, 'fix the cause (space, permissions), then run cpfs unmount again; cpfs status and cpfs unmount --discard still work')
    }
    throw new CpfsError('APPLY_FAILED', `cannot write the real directory: ${cause}; rolled back, the real directory is as it was`, 'fix the cause (space, permissions), then run the command again')
  }
  const skipped = applied.skipped
  const expect = skipped.length ? new Map([...j.expect].filter(([p]) => !skipped.some(q => p === q || p.startsWith(q + '/')))) : j.expect
  const verifying = phase('verifying', 'paths', expect.size, [...expect.values()].reduce((n, e) => n + (e.data ? sparseBytes(e.data, e.size!) : 0), 0))
  const result = verifyPaths(origin, expect, () => verifying.item())
  verifying.end()
  progress.close(false)
  if (result.mismatches.length) {
    // What is on the disk is not what the plan wrote (a failing disk, a write another process
    // raced): never leave it so. The roll-back makes every path the plan touched what it was
    // before, from the captures, and is itself verified.
    const shown = result.mismatches.slice(0, 5).map(m => `${m.path.slice(1) || '.'} (${m.why})`).join(', ')
    try {
      await rollBack(session, j)
      progress.close(true)
    } catch (back: any) {
      removeAnchors(origin, j.ops, j.id)
      await session.store.batch(await retireJournal(session.store), true)
      progress.close(true)
      throw new CpfsError('VERIFY_FAILED', `verification failed after applying: ${shown}; the roll-back failed too (${String(back?.message ?? back).split('\n')[0]})`, 'the store still holds every version; check the disk, then run the command again')
    }
    throw new CpfsError('VERIFY_FAILED', `verification failed after applying: ${shown}; rolled back, the real directory is as it was`, 'the store still holds every version; check the disk, then run the command again')
  }
  // Skipped paths keep the other process's version: for the store they are drift now, which
  // the next plan that touches them reports (and --force replaces).
  recordFingerprints(session, expect.keys(), j.ops.filter(o => o.op === 'remove' && o.type === 'd').map(o => o.path))
  const anchors = j.ops.some(o => o.op === 'anchor')
  await commitPlan(session, j.targetStack, j.after, [
    ...await retireJournal(session.store),
    skipped.length ? { type: 'put', key: SKIPPED_KEY, value: encode(skipped) } : { type: 'del', key: SKIPPED_KEY },
    // The anchors go once committed; a crash in between leaves this note for the next command.
    ...(anchors ? [{ type: 'put' as const, key: ANCHORS_KEY, value: encode({ id: j.id, ops: j.ops.filter(o => o.op === 'anchor') }) }] : [])
  ])
  progress.close(true)
  if (anchors) await dropAnchors(session)
  const summary: PlanSummary = {
    ops: applied.done,
    verified: result.verified,
    bytesWritten: applied.bytesWritten,
    ...changedPaths(j.ops),
    recovered
  }
  if (skipped.length) {
    const shown = skipped.slice(0, 5).map(p => p.slice(1) || '.').join(', ') + (skipped.length > 5 ? ` and ${skipped.length - 5} more` : '')
    const when = recovered ? 'after an interrupted plan stopped' : 'while cpfs was applying'
    throw new CpfsError('SKIPPED', `another process changed ${shown} ${when}; left as that process wrote ${skipped.length === 1 ? 'it' : 'them'} (${applied.done} operations applied, ${result.verified} paths verified)`, 'check those paths; cpfs restore or a --force rewind replaces them')
  }
  return summary
}

/**
 * How many changed paths a summary lists, and how many characters of them at most: a plan of
 * 1,000,000 files, or of a tree 10,000 levels deep (paths of 20,000 characters), made a reply
 * of hundreds of megabytes that the daemon could not even send before it exited.
 */
const CHANGED_SHOWN = 1000
const CHANGED_CHARS = 256 * 1024

function changedPaths (ops: PlanOp[]): { changed: string[], changedCount: number } {
  const all = new Set<string>()
  for (const op of ops) all.add(op.path)
  const changed: string[] = []
  let chars = 0
  for (const p of all) {
    if (changed.length >= CHANGED_SHOWN || chars + p.length > CHANGED_CHARS) break
    changed.push(p)
    chars += p.length
  }
  return { changed, changedCount: all.size }
}

/** Store key of the anchors (hard links) a committed plan still has to remove. */
const ANCHORS_KEY = 'a'

/** Remove the anchors a committed plan left (applier.ts), then forget them. */
async function dropAnchors (session: Session): Promise<void> {
  const raw = session.store.getSync(ANCHORS_KEY)
  if (!raw) return
  const { id, ops } = decode<{ id: string, ops: PlanOp[] }>(raw)
  const inos = removeAnchors(session.origin, ops, id)
  // Losing the anchor name moved those files' ctime: their names are known as they are now,
  // or the next plan would take that for a change made outside cpfs.
  for (const [q, f] of [...session.capture.fingerprints]) if (f.t !== null && f.t !== 'd' && inos.has(f.ino)) session.capture.setFingerprint(q, fingerprintOf(lstatReal(session.origin, q)))
  await session.store.batch([...session.capture.fingerprintOps(), { type: 'del', key: ANCHORS_KEY }], true)
}

/** Finish a plan that a crash interrupted; null when there was none. */
export async function recover (session: Session): Promise<PlanSummary | null> {
  await dropAnchors(session)
  if (!hasJournal(session.store)) return null
  // Test hook: a journaled plan that can be neither finished nor rolled back (as one that hit
  // a bug in cpfs would be), to prove it never blocks unmount --discard, status, log or forget.
  if (process.env.CPFS_TEST_RECOVER_FAILS) throw new Error('injected: the interrupted plan cannot be finished')
  return await finish(session, readJournal(session.store)!, true)
}

/**
 * `unmount --discard` after an interrupted plan that cannot be finished (recover threw, and
 * could not roll it back either): the user asks to leave the real directory as it is, so the
 * plan is given up instead of blocking every command for good. Its temporary files go and its
 * journal is retired; the applied stack stays what it was, so the paths it did change differ
 * from their fingerprints — the next plan reports them as drift and the next mount records
 * them as outside changes: nothing in the history is lost. Returns false when there was no
 * journal left (recover rolled back before failing).
 */
export async function setAsidePlan (session: Session): Promise<boolean> {
  if (!hasJournal(session.store)) return false
  try {
    const j = readJournal(session.store)!
    cleanTemps(session.origin, j.ops, j.id)
    removeAnchors(session.origin, j.ops, j.id)
  } catch {} // an unreadable journal is retired all the same
  await session.store.batch([...await retireJournal(session.store), { type: 'del', key: ANCHORS_KEY }], true)
  new Progress(session).close(true)
  return true
}

export async function layersOf (session: Session, stack: number[]): Promise<Array<Map<string, Entry>>> {
  const out: Array<Map<string, Entry>> = []
  for (const id of stack) {
    let l = session.history.layers.get(id)
    if (!l) {
      l = await session.store.loadLayer(id)
      session.history.layers.set(id, l)
    }
    out.push(l)
  }
  return out
}

/** Bring the real directory from the applied view to the view of `stack` (default: head). */
export async function viewOf (session: Session, stack: number[]): Promise<View> {
  return View.build(session.origin, await layersOf(session, stack))
}

/** The expected, target and touched paths for moving the real directory to `stack`. */
export async function realToStack (session: Session, stack: number[]): Promise<{ expected: View, target: View, touched: Set<string> }> {
  const applied = session.meta.applied
  let cp = 0
  while (cp < stack.length && cp < applied.length && stack[cp] === applied[cp]) cp++
  return {
    expected: await viewOf(session, applied),
    target: await viewOf(session, stack),
    touched: touchedPaths(await layersOf(session, stack.slice(cp)), await layersOf(session, applied.slice(cp)))
  }
}

/**
 * One synced batch: the real directory holds the view of `stack` now, and the history change
 * that goes with it (if any) takes effect — never one without the other.
 */
async function commitPlan (session: Session, stack: number[], after: StackChange | undefined, extra: BatchOp[]): Promise<void> {
  const ops: BatchOp[] = []
  if (after) {
    for (const id of [...after.newLayers, ...after.stack]) if (!session.history.layers.has(id)) session.history.layers.set(id, await session.store.loadLayer(id))
    append(ops, session.applyChange(after))
  }
  // The records `after` writes are not in the store yet: sealing the head must see its own.
  append(ops, session.appliedOps(stack, after?.records))
  await writeFingerprints(session)
  ops.push(session.store.metaOp())
  append(ops, extra)
  await session.store.batch(ops, true)
}

/**
 * Fingerprints changed by a plan go to LevelDB in unsynced slices, ahead of the synced batch
 * that commits it (which makes them durable: LevelDB writes its log in order). In that batch
 * they were a few hundred megabytes for 1,000,000 files. Written before the commit they say
 * what the real directory already holds; a crash before the commit leaves the journal, and
 * `recover` verifies and writes them again.
 */
async function writeFingerprints (session: Session): Promise<void> {
  for (let ops = session.capture.fingerprintOps(FINGERPRINTS_PER_BATCH); ops.length; ops = session.capture.fingerprintOps(FINGERPRINTS_PER_BATCH)) {
    await session.store.batch(ops)
  }
}

const FINGERPRINTS_PER_BATCH = 20_000

/** Bring the real directory to the view of `stack` (default: the head's), then commit `after`. */
export async function applyStack (session: Session, opts: { force?: boolean, stack?: number[], after?: StackChange } = {}): Promise<PlanSummary> {
  const stack = (opts.stack ?? session.meta.stack).slice()
  const { expected, target, touched } = await realToStack(session, stack)
  if (touched.size === 0) {
    await commitPlan(session, stack, opts.after, [])
    return { ops: 0, verified: 0, bytesWritten: 0, changed: [] }
  }
  return await runPlan(session, expected, target, touched, { force: opts.force, targetStack: stack, after: opts.after })
}
