// The library's revert and merge (issue 23): both run in the mount's daemon, which holds the
// store and the live view the merge is made on; not mounted, they say how to mount.
import { CpfsError } from './errors.js'
import { callDaemon } from './control/mounted.js'
import { daemonUp } from './daemons.js'
import { where, type Target } from './api.js'
import type { MergeResult } from './merge/run.js'

export type { MergeResult, MergeConflict, ConflictWhy, SideInfo } from './merge/run.js'

async function mounted (t: Target, what: string) {
  const loc = where(t)
  if (!await daemonUp(loc)) throw new CpfsError('NOT_MOUNTED', `${loc.workspace} is not mounted: ${what} works on the mounted workspace`, `run cpfs mount ${loc.workspace} first`)
  return loc
}

/**
 * Take back turn `turn`'s change (a number, -N or an id) as a new turn on top of the head,
 * keeping every later turn. With conflicts nothing changes: the result lists them.
 */
export async function revert (turn: string | number, opts: Target & { dryRun?: boolean } = {}): Promise<MergeResult> {
  const loc = await mounted(opts, 'revert')
  return await callDaemon(loc, { cmd: 'revert', args: { turn: String(turn), dryRun: Boolean(opts.dryRun) } })
}

/** Bring branch `branch`'s (bN) work into the head as a new turn. With conflicts nothing changes. */
export async function merge (branch: string, opts: Target & { dryRun?: boolean } = {}): Promise<MergeResult> {
  const loc = await mounted(opts, 'merge')
  return await callDaemon(loc, { cmd: 'merge', args: { branch: String(branch), dryRun: Boolean(opts.dryRun) } })
}
