// Request statistics of a mount (cpfs status --stats): counts and time per operation, and a
// histogram of handler times for the median.

export interface OpStats {
  counts: Record<string, number>
  /** Milliseconds spent in handlers (the synchronous part; waits are timed to their reply). */
  ms: Record<string, number>
  /**
   * Handler time of every request (the synchronous part), as a histogram: hist[i] counts the
   * requests that took [2^(i-1), 2^i) µs (hist[0]: under 1 µs). Gives the median per request.
   */
  hist: number[]
}

export function newStats (): OpStats {
  return { counts: {}, ms: {}, hist: new Array(24).fill(0) }
}

/** The median handler time in µs from a histogram (the upper end of the median's bucket). */
export function medianMicros (hist: number[]): number {
  const total = hist.reduce((a, b) => a + b, 0)
  let seen = 0
  for (let i = 0; i < hist.length; i++) {
    seen += hist[i]
    if (seen * 2 >= total) return 2 ** i
  }
  return 0
}
