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
import { CpfsError } from '../errors.js'
import { View, resolvedType, type Resolved } from '../overlay/view.js'
import { isSafePath, join } from '../overlay/paths.js'
import type { Session } from '../session/session.js'
import { hashChunk } from '../store/chunks.js'
import { decode, encode } from '../store/codec.js'
import { CHUNK_SIZE, chunkCount, type Entry, type FileEntry, type Meta } from '../store/entries.js'
import { JOURNAL_KEY, type BatchOp } from '../store/keys.js'
import { applyOps, cleanTemps, fingerprint, type Fingerprint } from './applier.js'
import { planViews, touchedPaths, type Content, type PlanOp } from './planner.js'
import { hashReal, lstatReal, type RealState } from './real.js'
import { verifyPaths, type Expect } from './verifier.js'

export interface PlanSummary {
  ops: number
  verified: number
  bytesWritten: number
  changed: string[]
  recovered?: boolean
  /** Paths another process changed while the plan ran, left as they were. */
  skipped?: string[]
}

/** Store key of the paths the last plan skipped (shown by cpfs status). */
export const SKIPPED_KEY = 'k'

interface Journal {
  id: string
  ops: PlanOp[]
  expect: Array<[string, Expect]>
  targetStack: number[]
}

export interface RunOptions {
  force?: boolean
  targetStack: number[]
}

export function chunkHexes (session: Session, content: Content, size: number, store = true): string[] {
  const out: string[] = []
  const buf = Buffer.alloc(CHUNK_SIZE)
  const origin = session.origin
  for (let idx = 0; idx < chunkCount(size); idx++) {
    const valid = Math.min(CHUNK_SIZE, size - idx * CHUNK_SIZE)
    const piece = buf.subarray(0, valid)
    piece.fill(0)
    if (content.from === 'origin') {
      origin.read(content.path, piece, 0, valid, idx * CHUNK_SIZE)
    } else {
      const e: FileEntry = content.entry
      const ref = e.chunks[idx]
      if (Buffer.isBuffer(ref)) {
        const data = session.chunks.get(ref)
        if (data.length === valid) {
          out.push(ref.toString('hex'))
          continue
        }
        data.copy(piece, 0, 0, Math.min(valid, data.length))
      } else if (ref === 1 && e.src !== undefined) {
        origin.read(e.src, piece, 0, valid, idx * CHUNK_SIZE)
      }
    }
    out.push((store ? session.chunks.put(piece) : hashChunk(piece)).toString('hex'))
  }
  return out
}

export function expectOf (session: Session, view: View, p: string, hexes: Map<string, string[]>, store = true): Expect {
  const r = view.resolve(p)
  if (!r) return { type: null }
  const type = resolvedType(r)
  const meta = r.kind === 'upper' ? r.entry : r.stat
  const mode = meta.mode & 0o7777
  const owner = process.getuid?.() === 0 ? { uid: meta.uid, gid: meta.gid } : {}
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
  let chunks = hexes.get(p)
  if (!chunks) chunks = chunkHexes(session, contentOf(r), size, store)
  return { type, mode, size, chunks, ...owner }
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
    const got = hashReal(session.origin, p, null, hashChunk)
    if (got.some((h, i) => h !== want.chunks![i])) return 'content changed'
  }
  return null
}

/** Store the real directory's current version of p (and below, for a directory) as base. */
function capture (session: Session, p: string, recursive: boolean, ops: BatchOp[]): void {
  const origin = session.origin
  if (origin.servedByReal(p)) {
    const st = lstatReal(origin, p)
    let e: Entry
    const meta: Meta = { mode: st.mode, uid: st.uid, gid: st.gid, atime: st.atime, mtime: st.mtime, ctime: st.ctime, ino: st.ino }
    if (st.atimeNs) meta.atimeNs = st.atimeNs
    if (st.mtimeNs) meta.mtimeNs = st.mtimeNs
    if (st.ctimeNs) meta.ctimeNs = st.ctimeNs
    if (st.blockedBy || st.type === null) e = { t: 'w' }
    else if (st.type === 'd') e = { t: 'd', ...meta }
    else if (st.type === 'l') e = { t: 'l', ...meta, target: st.target! }
    else if (st.type === 'n') e = { t: 'n', ...meta, fmt: st.fmt, rdev: st.rdev }
    else {
      const hashes = hashReal(origin, p, session.chunks, hashChunk).map(h => Buffer.from(h, 'hex'))
      e = { t: 'f', ...meta, size: st.size, chunks: hashes }
    }
    origin.setBase(p, e)
    ops.push(session.store.baseOp(p, e))
  }
  if (recursive) {
    const st = lstatReal(origin, p)
    if (st.type !== 'd') return
    for (const name of fs.readdirSync(origin.realPath(p))) capture(session, join(p, name), true, ops)
  }
}

/** Paths (with the reason) where the real directory differs from what the store expects. */
export function findDrift (session: Session, expected: View, ops: PlanOp[]): string[] {
  const drifted: string[] = []
  const seen = new Set<string>()
  for (const op of ops) {
    if (seen.has(op.path)) continue
    seen.add(op.path)
    const why = driftOf(session, expected, op.path, lstatReal(session.origin, op.path))
    if (why) drifted.push(`${op.path.slice(1) || '.'} (${why})`)
  }
  return drifted
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
  const unsafe = [...touched].filter(p => !isSafePath(p)).map(p => JSON.stringify(p))
  if (unsafe.length) {
    throw new CpfsError('UNSAFE_PATH', `the history holds paths that would leave the workspace: ${unsafe.slice(0, 3).join(', ')}`, 'the store was tampered with; nothing was changed')
  }
  const plan = planViews(expected, target, touched)
  const origin = session.origin

  // 2. drift
  const drifted = findDrift(session, expected, plan.ops)
  if (drifted.length && !opts.force) {
    const shown = drifted.slice(0, 5).join(', ') + (drifted.length > 5 ? ` and ${drifted.length - 5} more` : '')
    throw new CpfsError('DRIFT', `the real directory changed outside cpfs: ${shown}`, 'inspect those paths, then run again with --force to replace them (their current content is kept in the store)')
  }

  // Materialise target content; drop rewrites whose bytes and mode already match.
  const hexes = new Map<string, string[]>()
  const ops: PlanOp[] = []
  for (const op of plan.ops) {
    if (op.op === 'write') {
      op.chunks = chunkHexes(session, op.content!, op.size)
      delete op.content
      hexes.set(op.path, op.chunks)
      if (op.ifDiffers) {
        const real = lstatReal(origin, op.path)
        const ownerOk = process.getuid?.() !== 0 || (real.uid === op.uid && real.gid === op.gid)
        if (real.type === 'f' && real.mode === op.mode && real.size === op.size && ownerOk) {
          const got = hashReal(origin, op.path, null, hashChunk)
          if (got.length === op.chunks.length && got.every((h, i) => h === op.chunks![i])) continue
        }
      }
      delete op.ifDiffers
    }
    ops.push(op)
  }

  const expect = new Map<string, Expect>()
  for (const op of ops) expect.set(op.path, { type: null })
  for (const p of expect.keys()) expect.set(p, expectOf(session, target, p, hexes))

  // 3 + 4. capture and journal, in one synced batch.
  const batch: BatchOp[] = []
  for (const op of ops) {
    const real = lstatReal(origin, op.path)
    if (real.blockedBy) capture(session, real.blockedBy, false, batch)
    capture(session, op.path, op.op === 'remove' && op.type === 'd', batch)
  }
  const journal: Journal = { id: newPlanId(), ops, expect: [...expect], targetStack: opts.targetStack.slice() }
  session.chunks.drain(batch)
  batch.push({ type: 'put', key: JOURNAL_KEY, value: encode(journal) })
  await session.store.batch(batch, true)
  // Fingerprints last, after the captures read every file: the re-check compares with these.
  const prints = new Map<string, Fingerprint>()
  for (const op of ops) if (!prints.has(op.path)) prints.set(op.path, fingerprint(origin, op.path))
  return await finish(session, journal, false, prints)
}

function progress (total: number, bytes: number): ((i: number) => void) | undefined {
  if (!process.stderr.isTTY || process.env.CPFS_QUIET || (total < 1000 && bytes < 100 * 1024 * 1024)) return undefined
  let last = 0
  return (i: number) => {
    const now = Date.now()
    if (now - last < 100 && i + 1 < total) return
    last = now
    process.stderr.write(`\rcpfs: applying ${i + 1}/${total} operations${i + 1 === total ? '\n' : ''}`)
  }
}

function testEditHook (origin: Session['origin']): ((index: number, op: PlanOp) => void) | undefined {
  // Test hook: another process edits the path of operation N just before the plan reaches it.
  const at = process.env.CPFS_TEST_EDIT_BEFORE_OP
  if (at === undefined) return undefined
  return (index, op) => {
    if (index === Number(at)) fs.appendFileSync(origin.realPath(op.path), 'edited concurrently\n')
  }
}

async function finish (session: Session, j: Journal, recovered: boolean, prints?: Map<string, Fingerprint>): Promise<PlanSummary> {
  const origin = session.origin
  if (recovered) cleanTemps(origin, j.ops, j.id)
  let applied
  const bytes = j.ops.reduce((n, op) => n + (op.op === 'write' ? op.size : 0), 0)
  const tick = progress(j.ops.length, bytes)
  try {
    applied = applyOps(origin, session.chunks, j.ops, {
      planId: j.id,
      prints,
      beforeOp: recovered ? undefined : testEditHook(origin),
      onOp: (i) => { tick?.(i); if (!recovered) crashHook(i) }
    })
  } catch (err: any) {
    if (err instanceof CpfsError) throw err
    throw new CpfsError('APPLY_FAILED', `cannot finish writing the real directory: ${err?.message ?? err}`, 'fix the cause (space, permissions), then run any cpfs command on the workspace to finish the journaled plan')
  }
  const skipped = applied.skipped
  const expect = new Map(j.expect.filter(([p]) => !skipped.some(q => p === q || p.startsWith(q + '/'))))
  const result = verifyPaths(origin, expect)
  if (result.mismatches.length) {
    await session.store.batch([{ type: 'del', key: JOURNAL_KEY }], true)
    const shown = result.mismatches.slice(0, 5).map(m => `${m.path.slice(1) || '.'} (${m.why})`).join(', ')
    throw new CpfsError('VERIFY_FAILED', `verification failed after applying: ${shown}`, 'the store still holds every version; check the disk, then run the command again')
  }
  // Skipped paths keep the other process's version: for the store they are drift now, which
  // the next plan that touches them reports (and --force replaces).
  session.meta.applied = j.targetStack.slice()
  await session.store.batch([
    session.store.metaOp(),
    { type: 'del', key: JOURNAL_KEY },
    skipped.length ? { type: 'put', key: SKIPPED_KEY, value: encode(skipped) } : { type: 'del', key: SKIPPED_KEY }
  ], true)
  const summary: PlanSummary = {
    ops: applied.done,
    verified: result.verified,
    bytesWritten: applied.bytesWritten,
    changed: [...new Set(j.ops.map(o => o.path))],
    recovered
  }
  if (skipped.length) {
    const shown = skipped.slice(0, 5).map(p => p.slice(1) || '.').join(', ') + (skipped.length > 5 ? ` and ${skipped.length - 5} more` : '')
    throw new CpfsError('SKIPPED', `another process changed ${shown} while cpfs was applying; left as that process wrote ${skipped.length === 1 ? 'it' : 'them'} (${applied.done} operations applied, ${result.verified} paths verified)`, 'check those paths; cpfs restore or a --force rewind replaces them')
  }
  return summary
}

/** Finish a plan that a crash interrupted; null when there was none. */
export async function recover (session: Session): Promise<PlanSummary | null> {
  const raw = session.store.getSync(JOURNAL_KEY)
  if (!raw) return null
  const j = decode<Journal>(raw)
  return await finish(session, j, true)
}

export async function layersOf (session: Session, stack: number[]): Promise<Array<Map<string, Entry>>> {
  const out: Array<Map<string, Entry>> = []
  for (const id of stack) {
    let l = session.layers.get(id)
    if (!l) {
      l = await session.store.loadLayer(id)
      session.layers.set(id, l)
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

export async function applyStack (session: Session, opts: { force?: boolean, stack?: number[] } = {}): Promise<PlanSummary> {
  const stack = opts.stack ?? session.meta.stack
  const { expected, target, touched } = await realToStack(session, stack)
  if (touched.size === 0) {
    session.meta.applied = stack.slice()
    await session.store.batch([session.store.metaOp()], true)
    return { ops: 0, verified: 0, bytesWritten: 0, changed: [] }
  }
  return await runPlan(session, expected, target, touched, { force: opts.force, targetStack: stack })
}
