// History beyond one machine, as a library (issue 24): remotes on S3-compatible storage,
// push, clone and what a remote holds. A push of a mounted workspace runs in its daemon (which
// holds the store), with the caller's AWS variables; otherwise in this process.
import { basename } from 'node:path'
import { redo, viaDaemonOr, where, type RewindResult, type Target } from './api.js'
import { addRemote, getRemote, listRemotes, removeRemote, locationOf, type Remote } from './remote/config.js'
import { pushHistory, type PushResult } from './remote/push.js'
import { pullHistory, type PullResult } from './remote/pull.js'
import { cloneWorkspace, type CloneOptions, type CloneResult } from './remote/clone.js'
import { listWorkspaces, type RemoteWorkspace } from './remote/list.js'
import { remoteGc as gcRemote, type GcResult } from './remote/gc.js'
import { awsEnvironment, parseS3Url } from './remote/s3.js'

export type { Remote } from './remote/config.js'
export type { PushResult } from './remote/push.js'
export type { PullResult } from './remote/pull.js'
export type { CloneOptions, CloneResult } from './remote/clone.js'
export type { RemoteWorkspace } from './remote/list.js'
export type { GcResult } from './remote/gc.js'

/** Add a remote: `url` is s3://BUCKET/PREFIX; the workspace is named `as` there (default: the directory's name). */
export function remoteAdd (name: string, url: string, opts: Target & { endpoint?: string, as?: string } = {}): Remote {
  const loc = where(opts)
  return addRemote(loc.store, { name, url, as: opts.as ?? basename(loc.workspace), ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}) })
}

export function remoteRemove (name: string, opts: Target = {}): void {
  removeRemote(where(opts).store, name)
}

export function remotes (opts: Target = {}): Remote[] {
  return listRemotes(where(opts).store)
}

/** Send the workspace's history (every turn and branch) to the remote `name` (default: the only one). */
export async function push (name?: string, opts: Target & { force?: boolean } = {}): Promise<PushResult> {
  const loc = where(opts)
  const remote = getRemote(loc.store, name)
  const env = awsEnvironment()
  return await viaDaemonOr(loc, 'push', { remote, force: Boolean(opts.force), env }, async (s) => await pushHistory(s, remote, { force: opts.force }), 'read')
}

/**
 * Bring the remote's turns into this workspace's history (remote/pull.ts): what is new there
 * arrives as a branch; when this workspace has nothing of its own past the remote's turns, the
 * head moves onto it (`redo`: mounted, in one step; not mounted, a verified plan). Otherwise
 * the branch waits for `merge`. `full`: a lazy clone's older turns' data is fetched too, so
 * the history no longer needs the remote (remote/fill.ts).
 */
export async function pull (name?: string, opts: Target & { force?: boolean, full?: boolean } = {}): Promise<PullResult & { moved: RewindResult | null }> {
  const loc = where(opts)
  const remote = getRemote(loc.store, name)
  const env = awsEnvironment()
  const full = Boolean(opts.full)
  const r = await viaDaemonOr(loc, 'pull', { remote, env, full }, async (s) => await pullHistory(s, remote, { full }))
  const moved = r.fastForward && r.branch !== null ? await redo({ ...opts, branch: r.branch }) : null
  return { ...r, moved }
}

/** A new workspace at `dir` with the history at s3://BUCKET/PREFIX/WORKSPACE, its head view written and verified. */
export async function clone (url: string, dir: string, opts: CloneOptions = {}): Promise<CloneResult> {
  return await cloneWorkspace(url, dir, opts)
}

/**
 * Delete what no ref on the remote reaches, in two steps a grace period apart (remote/gc.ts):
 * this run deletes what an earlier run marked at least `graceHours` ago (default 24) and marks
 * what is unreachable now. A push in flight is never robbed.
 */
export async function remoteGc (what?: string, opts: Target & { endpoint?: string, graceHours?: number, dryRun?: boolean } = {}): Promise<GcResult> {
  const loc = what !== undefined && what.startsWith('s3://')
    ? { ...parseS3Url(what), ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}) }
    : locationOf(getRemote(where(opts).store, what))
  return await gcRemote(loc, { graceHours: opts.graceHours, dryRun: opts.dryRun })
}

/** The workspaces a remote holds: a remote's name (of this workspace), or s3://BUCKET/PREFIX. */
export async function remoteList (what?: string, opts: Target & { endpoint?: string } = {}): Promise<RemoteWorkspace[]> {
  if (what !== undefined && what.startsWith('s3://')) {
    return await listWorkspaces({ ...parseS3Url(what), ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}) })
  }
  return await listWorkspaces(locationOf(getRemote(where(opts).store, what)))
}
