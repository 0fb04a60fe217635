// Giving freed native memory back (docs/decisions.md, "Daemon memory, second pass"). glibc keeps
// what the daemon's native side frees — LevelDB's memtables and table blocks, the backing stores
// of small Buffers (chunks under 64 KiB, hashes, request copies) — in its arenas, resident, until
// the very top of an arena is free: after an `npm ci` (11,000 files) that was 16 MB the daemon
// no longer used. malloc_trim(0) gives every free page back wherever it lies, but it walks the
// arenas' free lists with the arena locked, one madvise per free run: 10–75 ms after a second of
// npm ci, measured. Run once a second during the burst, that stalled the request thread by 2%
// of its time in slices of up to 75 ms. So it runs once the mount has gone quiet (a tick with no
// request answered) after some work: an idle mount costs nothing, a busy one never waits for it.
import { native } from '../native/index.js'

/**
 * A full garbage collection, then malloc_trim. After a burst the dead Buffers of its chunks and
 * requests (~9 MB after an npm ci) wait for a major collection that an idle daemon never
 * triggers, and their memory reaches glibc's free lists only then. `gc` is there when the
 * daemon runs with --expose-gc (daemons.ts HEAP_FLAGS); a foreground daemon only trims. Not a
 * compacting one: that left 106 MB instead of 117, but its evacuation raised the peak by 20 MB.
 */
export function collectAndTrim (): boolean {
  const gc = (globalThis as { gc?: () => void }).gc
  if (typeof gc === 'function') gc()
  return native.mallocTrim()
}

/** How often the mount is checked for quiet after work. */
export const TRIM_EVERY_MS = 1000

/**
 * Gives free native memory back at the first tick after work at which `activity()` (a count of
 * requests answered) did not move: once per burst, when it is over. `trim` is glibc's
 * malloc_trim (native.mallocTrim); the tests pass their own.
 */
export class Trimmer {
  private seen: number
  /** Work was done since the last trim. */
  private worked = false

  constructor (private readonly activity: () => number, private readonly trim: () => boolean = collectAndTrim) {
    this.seen = activity()
  }

  /** One check: true when memory was given back (work was done, and the mount is quiet now). */
  tick (): boolean {
    const now = this.activity()
    if (now !== this.seen) {
      this.seen = now
      this.worked = true
      return false
    }
    if (!this.worked) return false
    this.worked = false
    try {
      return this.trim()
    } catch {
      // An addon built before mallocTrim existed: nothing to give back, nothing to break.
      return false
    }
  }
}

/**
 * A Trimmer ticking every TRIM_EVERY_MS (the timer does not keep the process alive). Returns a
 * function that stops it. CPFS_MALLOC_TRIM=0 turns it off (for measuring).
 */
export function trimAfterWork (activity: () => number, every = TRIM_EVERY_MS): () => void {
  if (process.env.CPFS_MALLOC_TRIM === '0') return () => {}
  const trimmer = new Trimmer(activity)
  const timer = setInterval(() => trimmer.tick(), every)
  timer.unref()
  return () => clearInterval(timer)
}
