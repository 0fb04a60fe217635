// Capture of the real directory: what the history depends on there, and keeping it.
//  - Fingerprints (store/fingerprints.ts) of the real paths the history depends on, recorded
//    the first time the mount changes a path, so that a plan can tell what changed outside.
//  - Base entries: the real version of a path kept in the store, so that the history no
//    longer depends on the real file (captureBase).
//  - A turn that changed part of a big real file keeps pointing at the real file for the rest
//    (copy-up is O(1)). If the daemon is killed and someone edits the real file before the
//    next mount, that turn would show bytes it never had. So the original is read into the
//    store soon after the first write, a chunk at a time between requests; once it is a base
//    entry, the history no longer depends on the real file. It costs what the session's end
//    would have cost anyway (plans/freeze.ts captures what is still missing then).
import { appendFileSync } from 'node:fs'
import { join } from 'node:path'
import { fsError } from '../errors.js'
import type { Lower, LowerStat } from '../real/lower.js'
import type { Overlay } from '../overlay/overlay.js'
import { parentOf } from '../paths/paths.js'
import { lstatReal, realContentSteps, realEntry } from '../real/read.js'
import type { ChunkStore } from '../store/chunks.js'
import { isInoKey, type LiveEntry, type Whiteout } from '../store/entries.js'
import { ABSENT, fingerprintDrift, fingerprintOf, type Fingerprint, type RealStat } from '../store/fingerprints.js'
import type { BatchOp } from '../store/keys.js'
import type { Store } from '../store/store.js'
import type { Persister } from './persister.js'
import type { Space } from './space.js'

/** Real files up to this size have their original bytes kept at the first write (onCopyUp). */
const EAGER_CAPTURE_BYTES = Number(process.env.CPFS_EAGER_CAPTURE_BYTES ?? 1024 * 1024)
/**
 * A sandboxed run (cpfs exec --sandbox) becomes a branch of the shared history whose merge
 * base must be what the run found. Another agent may change the real files meanwhile, so its
 * daemon keeps the original of every real file or symlink at the first change, whatever its
 * size (no background freeze): the run's own store then knows what it found
 * (sandbox-branch.ts). A path whose original could not be kept (the real file had changed
 * already) is listed in the state dir's `unsure` file.
 */
const KEEP_ORIGINALS = Boolean(process.env.CPFS_IN_SANDBOX)
/** Chunks a capture of real files holds in memory before it writes them to the store. */
const SPILL_BYTES = 32 * 1024 * 1024

export class RealCapture {
  /** Fingerprints of the real paths the history depends on, by path. */
  fingerprints = new Map<string, Fingerprint>()
  private readonly fpDirty = new Set<string>()
  private readonly toFreeze = new Set<string>()
  private freezing: Promise<void> | null = null
  /** Set when the session stops serving the mount: the capture in progress gives up. */
  private quiet = false

  constructor (
    private readonly store: Store,
    private readonly chunks: ChunkStore,
    private readonly lower: Lower,
    private readonly overlay: Overlay,
    private readonly persister: Persister,
    private readonly space: Space
  ) {}

  /** Head path p changed: the real path it stands for gets a fingerprint, once. */
  changed (p: string): void {
    if (isInoKey(p)) {
      // An inode record: the real path it came from is what the history depends on.
      const rec = this.overlay.head.get(p)
      const o = rec && rec.kind !== 'w' && rec.kind !== 'h' ? rec.realPath : undefined
      if (o !== undefined && !this.fingerprints.has(o)) this.firstChange(o)
    } else if (!this.fingerprints.has(p)) {
      this.firstChange(p)
    }
  }

  private firstChange (p: string): void {
    this.noteReal(p)
    if (KEEP_ORIGINALS) this.keepOriginal(p)
  }

  /**
   * A sandboxed run's first change of p: keep the real file or symlink as its base entry now,
   * if it is still what the mount showed (its fingerprint); else p is unsure (listed in the
   * state dir) — a merge refuses it rather than guess its base. Directories keep their state
   * in the real directory: only their mode would be lost, and capturing one is a tree walk.
   */
  private keepOriginal (p: string): void {
    if (p.includes('\0') || !this.lower.servedByReal(p)) return
    const st = lstatReal(this.lower, p)
    if (st.type !== 'f' && st.type !== 'l') return
    const known = this.fingerprints.get(p)
    if (known && fingerprintDrift(known, st)) return noteUnsure(p)
    const op = this.captureBase(p)
    if (op) this.persister.queue(op)
  }

  /** Record (or with null, forget) what cpfs knows of real path p; stored with the next batch. */
  setFingerprint (p: string, f: Fingerprint | null): void {
    if (f) this.fingerprints.set(p, f)
    else this.fingerprints.delete(p)
    this.fpDirty.add(p)
  }

  /** Store ops for the fingerprints changed since the last call (at most `max` of them). */
  fingerprintOps (max = Infinity): BatchOp[] {
    const ops: BatchOp[] = []
    for (const p of this.fpDirty) {
      if (ops.length >= max) break
      ops.push(this.store.fingerprintOp(p, this.fingerprints.get(p) ?? null))
      this.fpDirty.delete(p)
    }
    return ops
  }

  /**
   * Keep the real directory's current version of p as its base entry (once): from then on
   * the lower of p is that version, whatever happens to the real file. Returns the store op,
   * or null when p already has one.
   */
  captureBase (p: string): BatchOp | null {
    if (!this.lower.servedByReal(p)) return null
    const e = realEntry(this.lower, this.chunks, p)
    this.lower.setBase(p, e)
    if (!this.fingerprints.has(p)) this.setFingerprint(p, fingerprintOf(lstatReal(this.lower, p)))
    return this.store.baseOp(p, e)
  }

  /**
   * captureBase for plans, absorb and freeze, which may read files of any size: the chunks go
   * to the store as they are read (spill), so memory holds at most SPILL_BYTES of them.
   */
  async captureBaseAsync (p: string): Promise<BatchOp | null> {
    if (!this.lower.servedByReal(p)) return null
    const e = await this.realEntryAsync(p)
    this.lower.setBase(p, e)
    if (!this.fingerprints.has(p)) this.setFingerprint(p, fingerprintOf(lstatReal(this.lower, p)))
    return this.store.baseOp(p, e)
  }

  /** realEntry of real path p, its chunks written to the store as they are read. */
  async realEntryAsync (p: string): Promise<LiveEntry | Whiteout> {
    const st = lstatReal(this.lower, p)
    if (st.type !== 'f' || st.blockedBy) return realEntry(this.lower, this.chunks, p, undefined, st)
    const steps = realContentSteps(this.lower, p, this.chunks)
    let r = steps.next()
    for (; !r.done; r = steps.next()) if (this.chunks.pendingBytes() >= SPILL_BYTES) await this.persister.spill()
    return realEntry(this.lower, this.chunks, p, r.value, st)
  }

  /**
   * The first write to an untouched real file: keep its original bytes now if it is small (a
   * shell outside the mount could overwrite it before the session ends, and the history's
   * "before" would be lost). Big files keep pointing at the real file (copy-up stays O(1))
   * and are captured in the background (freezeLater); the session's end captures anything
   * still missing (plans/freeze.ts).
   */
  onCopyUp (lowerPath: string, size: number): void {
    // The real file must still be what the mount showed: bytes the processes in the mount did
    // not see (another process wrote the real file, from outside) are never merged into their
    // edit. The write fails; the real file is left as it is, and the session's end refuses to
    // overwrite it (its fingerprint is what the mount showed).
    const served = this.lower.servedStat(lowerPath)
    if (served) {
      const now = lstatReal(this.lower, lowerPath)
      if (fingerprintDrift(fingerprintOf(servedAsReal(served)), now)) {
        process.stderr.write(`cpfs daemon: ${new Date().toISOString()} ${lowerPath.slice(1)} changed outside the mount after the mount showed it: writes to it fail with EIO (unmount, then mount again to see the new version)\n`)
        throw fsError('EIO', lowerPath, 'the real file changed outside the mount')
      }
    }
    if (size > EAGER_CAPTURE_BYTES && !KEEP_ORIGINALS) return this.freezeLater(lowerPath)
    const op = this.captureBase(lowerPath)
    if (op) this.persister.queue(op)
  }

  /** Big real files whose original bytes are being read into the store, or 0. */
  get capturing (): number {
    return this.freezing ? this.toFreeze.size + 1 : 0
  }

  /** The mount stops: no new background work; waits for the capture in progress to give up. */
  async quiesce (): Promise<void> {
    this.quiet = true
    this.toFreeze.clear()
    await this.freezing
  }

  private noteReal (p: string): void {
    if (p.includes('\0')) return // exchange's temporary name: never a real path
    // Below a directory that did not exist, nothing does: no system call needed.
    const parent = this.fingerprints.get(parentOf(p))
    if (parent && parent.type === null) return this.setFingerprint(p, ABSENT)
    // What the mount showed of p, if it showed anything: a process outside the mount that
    // changed the real file since (a shell whose cwd was inside before the mount) made a
    // change cpfs never saw, and the plan that would overwrite it must find it.
    const served = this.lower.servedStat(p)
    this.setFingerprint(p, served !== undefined ? fingerprintOf(servedAsReal(served)) : fingerprintOf(lstatReal(this.lower, p)))
  }

  private freezeLater (p: string): void {
    if (this.quiet || !this.lower.servedByReal(p)) return
    this.toFreeze.add(p)
    this.freezing ??= this.freezeAll().finally(() => { this.freezing = null })
  }

  private async freezeAll (): Promise<void> {
    while (!this.quiet && this.toFreeze.size) {
      const p = this.toFreeze.values().next().value as string
      this.toFreeze.delete(p)
      try {
        await this.freezeOne(p)
      } catch (err: any) {
        process.stderr.write(`cpfs daemon: ${new Date().toISOString()} cannot keep the original of ${p.slice(1)} yet (${err?.message ?? err}); the session's end will\n`)
      }
    }
  }

  private async freezeOne (p: string): Promise<void> {
    const served = this.lower.servedStat(p)
    const before = lstatReal(this.lower, p)
    // Only the file the mount showed is the original; one changed from outside is drift.
    if (!this.lower.servedByReal(p) || before.type !== 'f' || (served && fingerprintDrift(fingerprintOf(servedAsReal(served)), before))) return
    if (!this.space.roomToSpare(before.size)) return
    const steps = realContentSteps(this.lower, p, this.chunks)
    let r = steps.next()
    for (let n = 1; !r.done; n++, r = steps.next()) {
      if (n % 16 !== 0) continue // 1 MiB between turns of the event loop
      await new Promise(resolve => setImmediate(resolve))
      if (this.quiet) return void steps.return(undefined as any)
      if (this.chunks.pendingBytes() >= this.persister.budgets.dirty) await this.persister.persist(false)
      await this.persister.backpressure()
    }
    const after = lstatReal(this.lower, p)
    if (fingerprintDrift(fingerprintOf(before), after) || !this.lower.servedByReal(p)) return
    const e = realEntry(this.lower, this.chunks, p, r.value, after)
    this.lower.setBase(p, e)
    if (!this.fingerprints.has(p)) this.setFingerprint(p, fingerprintOf(after))
    this.persister.queue(this.store.baseOp(p, e))
    this.persister.schedule()
  }
}

/** A sandboxed run could not keep p's original (sandbox-branch.ts reads the list). */
function noteUnsure (p: string): void {
  const dir = process.env.CPFS_STATE_DIR
  if (!dir) return
  try {
    appendFileSync(join(dir, 'unsure'), JSON.stringify(p) + '\n')
  } catch {}
}

/** A lower stat in the shape fingerprints take (a cached null: nothing was there). */
function servedAsReal (st: LowerStat | null): RealStat {
  if (st === null) return { type: null, ino: 0, size: 0, mode: 0, mtime: 0, mtimeNs: 0, ctime: 0, ctimeNs: 0 }
  return { type: st.kind, ino: st.ino, size: st.size, mode: st.mode & 0o7777, mtime: st.mtime, mtimeNs: st.mtimeNs, ctime: st.ctime, ctimeNs: st.ctimeNs }
}
