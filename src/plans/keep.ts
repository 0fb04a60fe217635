// Before an offline plan: outside versions it is about to replace are recorded first as a
// turn of their own, so that the history keeps them — all of them under --force, and without
// it those that only refreshed a tool's cache (plans/refreshes.ts). Each says so in one line.
import type { Session } from '../session/session.js'
import { absorbOutsideChanges } from './absorb.js'
import { keepRefreshes } from './refreshes.js'

/**
 * --force: what was changed outside cpfs is about to be replaced; record it first as a turn
 * of its own (plans/absorb.ts), so it stays in the history, and say so.
 */
export async function keepDisplaced (s: Session): Promise<void> {
  const kept = await absorbOutsideChanges(s, { force: true })
  if (kept) process.stderr.write(`cpfs: kept ${kept.paths.length} path${kept.paths.length === 1 ? '' : 's'} changed outside cpfs as turn ${kept.turn} before replacing ${kept.paths.length === 1 ? 'it' : 'them'} (cpfs diff ${kept.turn})\n`)
}

/**
 * Before an offline plan without --force: versions that only refreshed a tool's cache (git's
 * index after `git status`) are kept as a turn and replaced, without asking (plans/refreshes.ts).
 */
export async function keepRefreshed (s: Session): Promise<number | null> {
  const kept = await keepRefreshes(s)
  if (!kept) return null
  process.stderr.write(`cpfs: ${kept.paths.map(p => p.slice(1)).join(', ')} ${kept.paths.length === 1 ? 'was' : 'were'} only refreshed outside cpfs (git's stat cache): kept as turn ${kept.turn} and replaced (cpfs diff ${kept.turn})\n`)
  return s.meta.stack[kept.turn - 1]
}

/**
 * Keep displaced or refreshed versions before a plan to turn t (1-based), and where turn t is
 * now: the kept turn goes in after what the real directory holds, which can be below t.
 */
export async function keepBefore (s: Session, t: number, force: boolean | undefined): Promise<number> {
  const layer = s.meta.stack[t - 1]
  if (force) await keepDisplaced(s)
  else await keepRefreshed(s)
  return s.meta.stack.indexOf(layer) + 1
}
