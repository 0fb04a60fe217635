// Branches: the history is a tree. Each stack of turns the workspace left (by a rewind, an
// undo, a discard, a redo past later writes) and that holds changes no other kept stack holds
// is kept as a branch, until retention (prune) drops it. Turns are never made unreachable by a
// write: that is what version 7 of the store adds (see docs/decisions.md, "History is a tree").

/** Why a stack was left: what the user did. */
export type LeftBy = 'rewind' | 'undo' | 'discard' | 'redo' | 'outside changes' | 'older cpfs' | 'sandbox' | 'pull'

export interface Branch {
  /** Its number, never reused: branch bN. */
  n: number
  /** Its turns' layers, turn 1 first; the last one is its tip turn. */
  stack: number[]
  /** When the workspace left it (ms). */
  leftAt: number
  by: LeftBy
  /** What made it: a sandboxed run's command line, or where a pull brought it from. */
  what?: string
  /**
   * How many leading layers of `stack` are the base its own work started from, when that is not
   * simply the turns it shares with the head (a sandboxed run: the layers the real directory held
   * when it started, and the layer pinning what it found). Merges compare against that base.
   */
  mergeBase?: number
  /** Paths whose base is not known for sure (changed in the real directory during the run): a merge refuses them. */
  unsure?: string[]
}

/** The parts of the store's metadata (store.ts StoreMeta) that hold stacks. */
export interface Stacks {
  stack: number[]
  applied: number[]
  redo: number[][]
  discarded?: Array<{ stack: number[], at: number }>
  branches?: Branch[]
  nextBranch?: number
  createdAt: number
}

/** Every stack whose layers the store keeps: the head's, the applied one, redo's, the discarded and the branches. */
export function keptStacks (meta: Stacks): number[][] {
  return [meta.stack, meta.applied, ...meta.redo, ...(meta.discarded ?? []).map(d => d.stack), ...(meta.branches ?? []).map(b => b.stack)]
}

export function sameStack (a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}

/** The number of turns two stacks share from turn 1 (where one branched off the other). */
export function sharedTurns (a: number[], b: number[]): number {
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  return i
}

/**
 * A store written before version 7 kept what rewinds left only until the next write (redo
 * stacks) and what `unmount --discard` set aside: both become branches, so an upgrade loses
 * nothing that was reachable. The discarded list is emptied: retention drops branches, and a
 * stack still listed there would be kept for ever.
 */
export function keepAsBranches (meta: Stacks): void {
  meta.branches = branchesOfOlderStore(meta)
  meta.nextBranch = meta.branches.length + 1
  delete meta.discarded
}

function branchesOfOlderStore (meta: Stacks): Branch[] {
  const out: Branch[] = []
  let n = 1
  const add = (stack: number[], leftAt: number, by: LeftBy): void => {
    if (sameStack(stack, meta.stack) || out.some(b => sameStack(b.stack, stack))) return
    out.push({ n: n++, stack: stack.slice(), leftAt, by })
  }
  for (const d of meta.discarded ?? []) add(d.stack, d.at, 'discard')
  for (const s of meta.redo) add(s, meta.createdAt, 'older cpfs')
  return out
}
