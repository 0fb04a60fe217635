// Views of old turns, as a library (issue 23): a read-only mount of the tree at any turn of
// any branch, outside the workspace, served by the workspace's mount daemon (so the workspace
// must be mounted). Nothing is copied; the workspace itself is not touched.
import { resolve } from 'node:path'
import { where, type Target } from './api.js'
import { callDaemon } from './control/mounted.js'
import type { ViewInfo } from './control/protocol.js'
import { daemonUp } from './daemons.js'
import { CpfsError } from './errors.js'
import { realPathOutside, type Location } from './store/locate.js'
import { workspaceServing } from './workspaces.js'

export type { ViewInfo } from './control/protocol.js'

export interface ViewOptions extends Target {
  /** Where to mount it (default: a fresh directory under the workspace's cpfs directory). */
  path?: string
  /** The tree the turn left (the start of the next; for the head turn, now) instead of its start. */
  end?: boolean
}

/** The workspace's location, if its daemon is up: views are served by it. */
async function mounted (opts: Target): Promise<Location> {
  const loc = where(opts)
  if (!await daemonUp(loc)) throw new CpfsError('NOT_MOUNTED', `${loc.workspace} is not mounted, and views are served by its mount`, `cpfs mount ${loc.workspace}`)
  return loc
}

/** A path as the daemon keeps it: absolute, symlinks resolved up to the first cpfs mount. */
function viewPath (p: string): string {
  return realPathOutside(resolve(p))
}

/** Mount the tree at the start of `turn` (N, -N, an id, bN:T, or bN: a branch's tip) read-only; returns where. */
export async function openView (turn: string | number, opts: ViewOptions = {}): Promise<ViewInfo> {
  const loc = await mounted(opts)
  return await callDaemon(loc, { cmd: 'view-open', args: { turn: String(turn), path: opts.path === undefined ? undefined : viewPath(opts.path), end: Boolean(opts.end) } })
}

/**
 * Close the view at `path`, or (no path) every view of the workspace; returns those closed.
 * A path alone finds its workspace: the mounted one whose views include it.
 */
export async function closeViews (opts: Target & { path?: string } = {}): Promise<ViewInfo[]> {
  const path = opts.path === undefined ? undefined : viewPath(opts.path)
  const dir = opts.dir ?? (path === undefined ? undefined : workspaceServing(path) ?? undefined)
  const loc = await mounted({ ...opts, dir })
  return await callDaemon(loc, { cmd: 'view-close', args: { path } })
}

export async function listViews (opts: Target = {}): Promise<ViewInfo[]> {
  const loc = await mounted(opts)
  return await callDaemon(loc, { cmd: 'views' })
}
