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
    for (const part of op.path.split('/')) if (Buffer.byteLength(part) > max && !long.includes(op.path)) long.push(op.path)
  }
  if (long.length === 0) return
  const show = (p: string) => {
    const name = p.split('/').find(part => Buffer.byteLength(part) > max)!
    return `${JSON.stringify(name.slice(0, 24) + '…')} (${Buffer.byteLength(name)} bytes)`
  }
  const shown = long.slice(0, 3).map(show).join(', ') + (long.length > 3 ? ` and ${long.length - 3} more` : '')
  throw new CpfsError('NAME_TOO_LONG', `the real directory's filesystem takes names of at most ${max} bytes, and the history holds ${long.length === 1 ? 'a longer one' : 'longer ones'}: ${shown}; nothing was changed`,
    'rename or remove it in the mount (or rewind past it), then run the command again')
}
