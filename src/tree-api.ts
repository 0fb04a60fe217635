// The library's history tree (issue 23): the branches a workspace keeps. Like api.ts, each
// function talks to the mount daemon when the workspace is mounted and opens the store itself
// when not. (rewind, redo and prune, in api.ts and housekeeping.ts, take branch refs: bN, bN:T.)
import { viaDaemonOr, where, type Target } from './api.js'
import { branchLog, type BranchInfo } from './session/branch-log.js'

export type { BranchInfo } from './session/branch-log.js'

/** Every branch kept besides the head's stack, most recently left first, with its own turns. */
export async function branches (opts: Target = {}): Promise<BranchInfo[]> {
  return await viaDaemonOr(where(opts), 'branches', undefined, async (s) => await branchLog(s.history, s.lower), 'read')
}
