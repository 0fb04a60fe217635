// Absorb: the real directory changed outside cpfs since cpfs last saw it (an editor or a
// shell while nothing was mounted). A new session must start from the real directory, not
// from cpfs's older idea of it, so before mounting, every path whose fingerprint no longer
// matches is recorded as it is now in a turn of its own ("changes made outside cpfs"), placed
// after the turns the real directory holds and before those it does not hold yet. The history
// stays exact (rewind to before that turn gives cpfs's version back) and the user's edits are
// what the mount shows — and what the next plan keeps.
//
// A path that a pending turn also changed is a conflict: it is left alone (the next plan
// refuses and names it) unless `force` — then the outside version is recorded the same way
// (so it stays in the history) and the pending turn's version wins.
import { lstatReal } from '../real/read.js'
import { realNames } from '../real/lower.js'
import { ancestors, belowAny, depth, join } from '../paths/paths.js'
import { resolvedType, type View } from '../overlay/view.js'
import type { Session } from '../session/session.js'
import { keepLeft } from '../session/tree.js'
import { encode, encodeEntry } from '../store/codec.js'
import { cloneEntry, isInoKey, type Entry } from '../store/entries.js'
import { fingerprintDrift, fingerprintOf } from '../store/fingerprints.js'
import { entryKey, turnKey, type BatchOp } from '../store/keys.js'
import type { TurnRecord } from '../store/store.js'
import { realEntry } from '../real/read.js'

export interface Absorbed {
  turn: number
  paths: string[]
  /** The turn's layer id. */
  layer: number
}

export interface AbsorbOptions {
  force?: boolean
  only?: (p: string) => boolean
  /**
   * While mounted (daemon/underneath.ts): the message of the turn, the layer of a turn this
   * recorded before, to extend while it is still the last one the real directory holds, and
   * the batch goes after every batch the mount queued before it (Session.commitLive).
   */
  live?: { message: string, into?: number }
}

/** Record outside changes as a turn; null when there were none. */
export async function absorbOutsideChanges (session: Session, opts: AbsorbOptions = {}): Promise<Absorbed | null> {
  const { drifted, baseOps } = findDrifted(session, opts, conflictRule(session, Boolean(opts.live)))
  if (drifted.length === 0) return null
  const layer = await recordDrifted(session, drifted)
  unlinkChangedNames(session.overlay.view, layer)
  const meta = session.meta
  const write = (ops: BatchOp[]): Promise<void> => opts.live ? session.persister.commitLive(ops) : session.persister.syncBatch(ops)
  if (layer.size === 0) {
    await write(baseOps.concat(session.capture.fingerprintOps()))
    return null
  }
  const into = opts.live?.into
  if (into !== undefined && meta.applied.at(-1) === into && meta.stack[meta.applied.length - 1] === into && meta.stack.length > meta.applied.length) {
    return await extend(session, into, layer, baseOps, opts.live!.message, write)
  }
  return await addTurn(session, opts, layer, baseOps, write)
}

/** The turns the real directory holds and the stack shares: how many. */
function sharedPrefix (session: Session): number {
  const meta = session.meta
  let cp = 0
  while (cp < meta.stack.length && cp < meta.applied.length && meta.stack[cp] === meta.applied[cp]) cp++
  return cp
}

/**
 * Which drifted paths conflict with a pending turn: those it changes, their ancestors, and
 * what is below them. Offline, below any pending change; while mounted (`live`), only below an
 * entry that hides the real paths below it (a file, a directory emptied and made again, or
 * moved): the mount's root is in the head as soon as the first file is made in it.
 */
function conflictRule (session: Session, live: boolean): (p: string) => boolean {
  const pendingPaths = new Set<string>()
  const pendingAbove = new Set<string>()
  const pendingHiding = new Set<string>()
  for (const id of session.history.expand(session.meta.stack.slice(sharedPrefix(session)))) {
    for (const [p, e] of session.history.layers.get(id) ?? []) {
      if (isInoKey(p)) continue
      pendingPaths.add(p)
      if (e.kind !== 'd' || e.opaque === 1 || e.redirect !== undefined) pendingHiding.add(p)
      // An ancestor already there has its own ancestors there too: stop (all of them for every
      // path of a 10,000-level tree was 10^8 strings of 10^4 characters, at every mount).
      for (const a of ancestors(p)) {
        if (pendingAbove.has(a)) break
        pendingAbove.add(a)
      }
    }
  }
  const hidden = live
    ? (p: string) => {
        for (const a of ancestors(p)) if (pendingHiding.has(a)) return true
        return false
      }
    : belowAny(pendingPaths)
  return (p: string) => pendingPaths.has(p) || pendingAbove.has(p) || hidden(p)
}

/**
 * The paths whose real state no longer matches their fingerprint (conflicts left out unless
 * `force`), by depth then name; and the base entries of those cpfs knew as absent.
 */
function findDrifted (session: Session, opts: AbsorbOptions, conflicts: (p: string) => boolean): { drifted: string[], baseOps: BatchOp[] } {
  const lower = session.lower
  const drifted: string[] = []
  const baseOps: BatchOp[] = []
  for (const [p, f] of session.capture.fingerprints) {
    if (opts.only && !opts.only(p)) continue
    if (!fingerprintDrift(f, lstatReal(lower, p))) continue
    if (!opts.force && conflicts(p)) continue
    drifted.push(p)
    // cpfs knew nothing was there: the history's "before" is that, not what appeared since.
    if (f.type === null && lower.servedByReal(p)) {
      lower.setBase(p, { kind: 'w' })
      baseOps.push(session.store.baseOp(p, { kind: 'w' }))
    }
  }
  // By depth (a split per comparison was O(depth) strings, O(n log n) times), then by name.
  const depths = new Map(drifted.map(p => [p, depth(p)]))
  drifted.sort((a, b) => depths.get(a)! - depths.get(b)! || (a < b ? -1 : 1))
  return { drifted, baseOps }
}

/** The layer that makes the view show each drifted path as the real directory has it now. */
async function recordDrifted (session: Session, drifted: string[]): Promise<Map<string, Entry>> {
  const lower = session.lower
  const view = session.overlay.view
  const layer = new Map<string, Entry>()
  const covered = new Set<string>() // subtrees recorded whole
  // Paths go by depth and each adds itself or what is below it: the memo stays right (belowAny).
  const belowCovered = belowAny(covered)
  const note = (p: string): void => session.capture.setFingerprint(p, fingerprintOf(lstatReal(lower, p)))
  for (const p of drifted) {
    if (belowCovered(p)) continue
    const st = lstatReal(lower, p)
    const cur = view.resolve(p)
    // Served from the real directory itself: the view shows the change already.
    if (cur && cur.kind === 'lower' && cur.lowerPath === p && lower.servedByReal(p)) {
      note(p)
      continue
    }
    if (st.type === null || st.blockedBy) {
      if (cur) layer.set(p, { kind: 'w' })
      session.capture.setFingerprint(p, fingerprintOf(st))
      covered.add(p)
      continue
    }
    if (st.type !== 'd' || !cur || resolvedType(cur) !== 'd') {
      await recordTree(session, p, layer, covered)
      continue
    }
    // The same directory: its own metadata, and its entries as the real directory lists them.
    const e = realEntry(lower, session.chunks, p)
    const ve = view.entries.get(p)
    if (e.kind === 'd' && ve?.kind === 'd') {
      if (ve.opaque) e.opaque = 1
      if (ve.redirect !== undefined) e.redirect = ve.redirect
    }
    layer.set(p, e)
    note(p)
    const real = new Set(realNames(lower.realPath(p)))
    const shown = new Set(view.readdir(p))
    for (const n of shown) {
      if (real.has(n)) continue
      layer.set(join(p, n), { kind: 'w' })
      note(join(p, n))
      covered.add(join(p, n))
    }
    for (const n of real) if (!shown.has(n)) await recordTree(session, join(p, n), layer, covered)
  }
  return layer
}

/** Record the real tree at `top` whole, as new entries (an opaque directory hides the view's). */
async function recordTree (session: Session, top: string, layer: Map<string, Entry>, covered: Set<string>): Promise<void> {
  const lower = session.lower
  // Depth first with an explicit stack: a tree can be deeper than the call stack.
  const stack = [top]
  for (let p = stack.pop(); p !== undefined; p = stack.pop()) {
    const e = await session.capture.realEntryAsync(p)
    if (e.kind !== 'w') delete e.links // recorded as a file of its own (see unlinkChangedNames)
    if (e.kind === 'd') Object.assign(e, { opaque: 1, fresh: 1 })
    layer.set(p, e)
    session.capture.setFingerprint(p, fingerprintOf(lstatReal(lower, p)))
    covered.add(p)
    if (e.kind !== 'd') continue
    const names = realNames(lower.realPath(p))
    for (let i = names.length - 1; i >= 0; i--) stack.push(join(p, names[i]))
  }
}

/**
 * A name of a linked file that changed outside is recorded as a file of its own: its inode
 * record loses that link.
 */
function unlinkChangedNames (view: View, layer: Map<string, Entry>): void {
  for (const p of [...layer.keys()]) {
    const r = view.resolve(p)
    if (!r || !isInoKey(r.key)) continue
    const prev = layer.get(r.key) ?? view.record(r.key)
    if (!prev || prev.kind === 'w' || prev.kind === 'h') continue
    const rec = cloneEntry(prev)
    delete rec.newInTurn
    rec.links = Math.max(0, (rec.links ?? 1) - 1)
    layer.set(r.key, rec)
  }
}

/**
 * One new sealed turn right after what the real directory holds (it holds this one too).
 * (A history from cpfs 0.1 may count its head as applied: seal it first.)
 */
async function addTurn (session: Session, opts: AbsorbOptions, layer: Map<string, Entry>, baseOps: BatchOp[], write: (ops: BatchOp[]) => Promise<void>): Promise<Absorbed> {
  const meta = session.meta
  let cp = sharedPrefix(session)
  const ops: BatchOp[] = baseOps.concat(session.appliedOps(meta.applied))
  while (cp > 0 && meta.stack[cp - 1] !== meta.applied[cp - 1]) cp--
  if (cp >= meta.stack.length) cp = meta.stack.length - 1 // never above the head
  const id = meta.nextLayer++
  const now = Date.now()
  const paths = [...layer.keys()]
  const rec: TurnRecord = { layer: id, openedAt: now, sealedAt: now, message: opts.live?.message ?? `changes made outside cpfs (${paths.length} path${paths.length === 1 ? '' : 's'})${opts.only ? ', only refreshed, replaced' : opts.force ? ', replaced by --force' : ''}` }
  for (const [p, e] of layer) ops.push({ type: 'put', key: entryKey(id, p), value: encodeEntry(e) })
  ops.push({ type: 'put', key: turnKey(id), value: encode(rec) })
  session.history.adopt(id, layer)
  meta.stack = [...meta.stack.slice(0, cp), id, ...meta.stack.slice(cp)]
  meta.applied = [...meta.applied, id]
  // Outside changes are in the real directory: a redo would go back to a stack without them
  // and take them out again, so the stacks redo held are kept as branches instead (tree.ts). A
  // refresh (opts.only, plans/refreshes.ts) is not: redo keeps it (api.ts puts it in the stack redone).
  if (!opts.only) keepRedoAsBranches(session)
  for (const op of session.capture.fingerprintOps()) ops.push(op) // no push(...): it can be 100,000s
  ops.push(session.store.metaOp())
  await write(ops)
  session.reload()
  return { turn: cp + 1, paths, layer: id }
}

/**
 * More changes made underneath the mount, added to the turn that recorded the last ones: the
 * real directory holds that turn (it is the last one applied) and now these too, so the turn
 * still says what the real directory holds. One turn per session, not one per change heard.
 */
async function extend (session: Session, id: number, layer: Map<string, Entry>, baseOps: BatchOp[], message: string, write: (ops: BatchOp[]) => Promise<void>): Promise<Absorbed> {
  await session.history.load([id])
  const own = session.history.layers.get(id)!
  const ops = baseOps.slice()
  for (const [p, e] of layer) {
    own.set(p, e)
    ops.push({ type: 'put', key: entryKey(id, p), value: encodeEntry(e) })
  }
  const rec: TurnRecord = { ...session.store.turnRecord(id), sealedAt: Date.now(), message }
  ops.push({ type: 'put', key: turnKey(id), value: encode(rec) })
  keepRedoAsBranches(session)
  for (const op of session.capture.fingerprintOps()) ops.push(op)
  ops.push(session.store.metaOp())
  await write(ops)
  session.reload()
  return { turn: session.meta.stack.indexOf(id) + 1, paths: [...layer.keys()], layer: id }
}

/** The stacks redo would go back to become branches (kept, but no longer what `redo` means). */
function keepRedoAsBranches (session: Session): void {
  const meta = session.meta
  keepLeft(session.history, meta.redo.map(stack => ({ stack, by: 'outside changes' as const })), meta.stack)
  meta.redo = []
}
