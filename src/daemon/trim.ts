// Giving freed native memory back (docs/decisions.md, "Daemon memory, second pass"). glibc keeps
// what the daemon's native side frees — LevelDB's memtables and table blocks, the backing stores
// of small Buffers (chunks under 64 KiB, hashes, request copies) — in its arenas, resident, until
// the very top of an arena is free: after an `npm ci` (11,000 files) that was 16 MB the daemon
// no longer used. malloc_trim(0) gives every free page back wherever it lies. It walks the
// arenas' free lists (about a millisecond after such a burst), so it runs at most once a
// second and only when requests were answered since the last time: an idle daemon costs nothing.
import { native } from '../native/index.js'

/** How often, at most, the free pages are given back while the mount is busy. */
export const TRIM_EVERY_MS = 1000

/**
 * Gives free native memory back when `activity()` (a count of requests answered) moved since
 * the last tick. `trim` is glibc's malloc_trim (native.mallocTrim); the tests pass their own.
 */
export class Trimmer {
  private seen: number

  constructor (private readonly activity: () => number, private readonly trim: () => boolean = () => native.mallocTrim()) {
    this.seen = activity()
  }

  /** One check: true when memory was given back (something happened since the last tick). */
  tick (): boolean {
    const now = this.activity()
    if (now === this.seen) return false
    this.seen = now
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
export function trimWhileBusy (activity: () => number, every = TRIM_EVERY_MS): () => void {
  if (process.env.CPFS_MALLOC_TRIM === '0') return () => {}
  const trimmer = new Trimmer(activity)
  const timer = setInterval(() => trimmer.tick(), every)
  timer.unref()
  return () => clearInterval(timer)
}
