// The real directory's own limits decide what a plan can write there: a name longer than its
// filesystem allows (overlay/limits.ts) would fail halfway through the plan. A history can
// hold such a name (one written by cpfs 0.1 or 0.2, which accepted any length, or a fork onto
// another filesystem), so every plan checks its names up front and refuses, changing nothing,
// with one line.
import { CpfsError } from '../errors.js'
import { nameMax } from '../overlay/limits.js'
import type { PlanOp } from './planner.js'

/** Refuse, before anything is written, a plan that names a path the real directory cannot hold. */
export function checkNames (ops: PlanOp[], dirFd: number, max = nameMax(dirFd)): void {
  const long: string[] = []
  for (const op of ops) {
    if (op.op === 'remove' || op.op === 'chmod' || op.op === 'anchor') continue // names that exist, or cpfs's own short ones
    if (tooLong(op.path, max) !== null && !long.includes(op.path)) long.push(op.path)
  }
  if (long.length === 0) return
  const show = (p: string) => {
    const name = tooLong(p, max)!
    return `${JSON.stringify(name.slice(0, 24) + '…')} (${Buffer.byteLength(name)} bytes)`
  }
  const shown = long.slice(0, 3).map(show).join(', ') + (long.length > 3 ? ` and ${long.length - 3} more` : '')
  throw new CpfsError('NAME_TOO_LONG', `the real directory's filesystem takes names of at most ${max} bytes, and the history holds ${long.length === 1 ? 'a longer one' : 'longer ones'}: ${shown}; nothing was changed`,
    'rename or remove it in the mount (or rewind past it), then run the command again')
}

/**
 * The first name in path p longer than max bytes, or null. A name of n UTF-16 units is at most
 * 3n bytes of UTF-8, so only one over max / 3 units is measured, and those are found by one
 * regular expression: split('/') made O(depth) strings per path, and an indexOf per name
 * O(depth) calls, O(depth²) for a plan over a deep tree.
 */
function tooLong (p: string, max: number): string | null {
  const re = longNames(max)
  re.lastIndex = 0
  for (let m = re.exec(p); m !== null; m = re.exec(p)) if (Buffer.byteLength(m[0]) > max) return m[0]
  return null
}

let long: { max: number, re: RegExp } | undefined

/** The names tooLong measures (compiled once per limit, not once per path). */
function longNames (max: number): RegExp {
  if (long?.max !== max) long = { max, re: new RegExp(`[^/]{${Math.floor(max / 3) + 1},}`, 'g') }
  return long.re
}
