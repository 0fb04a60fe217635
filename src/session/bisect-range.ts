// The search of `cpfs bisect`, as `git bisect run` does it, without any I/O: turns good..bad
// of one line of history, the good end known good and the bad end known bad; each probe
// halves what is left; turns that cannot be tested (skip) are stepped around, and when only
// skipped turns separate the last good from the first bad, the answer is a range.
import { CpfsError } from '../errors.js'

export type Verdict = 'good' | 'bad' | 'skip'

/**
 * What a command's exit says of a turn, as `git bisect run` reads it: 0 good, 125 skip
 * (cannot be tested), 1–127 bad; 128 and above, or a signal, stop the search (the command
 * itself failed: not found, killed, crashed). Null: stop.
 */
export function verdictOf (code: number | null, signal: string | null = null): Verdict | null {
  if (signal !== null || code === null || code >= 128 || code < 0) return null
  if (code === 0) return 'good'
  if (code === 125) return 'skip'
  return 'bad'
}

/** Where the search ended: the first bad turn, or the turns it is one of (skips hid the rest). */
export type BisectOutcome = { first: number } | { oneOf: [number, number] }

export class BisectRange {
  /** The last turn known good, and the first known bad: the first bad turn is in (good, bad]. */
  private good: number
  private bad: number
  private readonly skipped = new Set<number>()

  constructor (good: number, bad: number) {
    if (!Number.isInteger(good) || !Number.isInteger(bad) || good >= bad) {
      throw new CpfsError('BAD_RANGE', `the good turn (${good}) must come before the bad one (${bad})`, 'pass --good an older turn than --bad (default: the head)')
    }
    this.good = good
    this.bad = bad
  }

  /** The turn to test next (the untested one nearest the middle), or null when the search is done. */
  next (): number | null {
    const mid = (this.good + this.bad) / 2
    let best: number | null = null
    for (let t = this.good + 1; t < this.bad; t++) {
      if (this.skipped.has(t)) continue
      if (best === null || Math.abs(t - mid) < Math.abs(best - mid)) best = t
    }
    return best
  }

  record (turn: number, verdict: Verdict): void {
    if (turn <= this.good || turn >= this.bad) return // outside what is left: nothing to learn
    if (verdict === 'good') this.good = turn
    else if (verdict === 'bad') this.bad = turn
    else this.skipped.add(turn)
  }

  /** Only when next() is null: the first bad turn, or the range of turns it is one of. */
  outcome (): BisectOutcome {
    if (this.next() !== null) throw new Error('the search is not done')
    return this.bad - this.good === 1 ? { first: this.bad } : { oneOf: [this.good + 1, this.bad] }
  }
}
