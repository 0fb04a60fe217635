// What `cpfs log --all` adds to the head's turns: every branch kept, where it left the head's
// stack, and its own turns (those it does not share with the head's stack).
import type { Lower } from '../real/lower.js'
import { sameStack, sharedTurns, type LeftBy } from '../store/branches.js'
import type { History } from './history.js'
import { turnLog, type TurnInfo } from './reports.js'
import { branchName } from './tree.js'

export interface BranchInfo {
  /** Its name: bN. */
  branch: string
  leftAt: number
  by: LeftBy
  /** A sandboxed run's branch: its command line. */
  what?: string
  /** Its turns 1..mergeBase are the base a merge compares with (a sandboxed run: what it started from and found). */
  mergeBase?: number
  /** Paths whose base is not known for sure: a merge refuses them. */
  unsure?: string[]
  /** Turns 1..shared are the head's own turns too: the branch left after turn `shared`. */
  shared: number
  /** Its turns after those, numbered on the branch (bN:T), its tip last. */
  turns: Array<TurnInfo & { ref: string }>
  /** Turns it has in all (`cpfs rewind bN:T` takes 1..length). */
  length: number
  /** Set when this branch is the one `cpfs redo` (no argument) goes back to. */
  redo: boolean
}

/** Every branch, most recently left first. Loads their layers. */
export async function branchLog (history: History, lower: Lower): Promise<BranchInfo[]> {
  const out: BranchInfo[] = []
  const redo = history.meta.redo.at(-1)
  for (const b of [...history.meta.branches ?? []].sort((x, y) => y.leftAt - x.leftAt || y.n - x.n)) {
    await history.load(b.stack)
    const shared = sharedTurns(history.meta.stack, b.stack)
    const name = branchName(b)
    const turns = turnLog(history, lower, undefined, b.stack, shared).map(t => ({ ...t, ref: `${name}:${t.turn}` }))
    const info: BranchInfo = { branch: name, leftAt: b.leftAt, by: b.by, shared, turns, length: b.stack.length, redo: redo !== undefined && sameStack(redo, b.stack) }
    if (b.what !== undefined) info.what = b.what
    if (b.mergeBase !== undefined) info.mergeBase = b.mergeBase
    if (b.unsure !== undefined) info.unsure = b.unsure
    out.push(info)
  }
  return out
}
