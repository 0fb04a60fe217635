// The mounted path of the library: a command on a mounted workspace only talks to its daemon.
// An agent host runs `cpfs turn`, `status`, `log`, `rewind` on every message, so the CLI tries
// this first and loads the rest of cpfs (the store, LevelDB, the planners, the daemon, the MCP
// SDK) only when the workspace is not mounted. Nothing here may import more than the control
// client, the locator and the mount table: that is what keeps `cpfs turn` as fast as node starts.
import { isAbsolute, relative, resolve } from 'node:path'
import { call, ping } from './client.js'
import { CpfsError } from '../errors.js'
import type { StatusInfo } from '../api.js'
import { normaliseUserPath } from '../overlay/paths.js'
import { dirBytes, locateWorkspace, type Location } from '../store/locate.js'
import { mountHolding } from '../workspaces.js'

/** The location of the mounted workspace that holds `dir` (default: the current directory), or null when none does. */
export function mountedLocation (dir: string | undefined, store?: string): Location | null {
  const m = mountHolding(dir ?? process.cwd())
  return m === null ? null : locateWorkspace(m, false, store)
}

/**
 * Ask the daemon of the mounted workspace at `loc`; undefined when no daemon listens (a stale
 * mount: the caller goes the long way, which reports or recovers it); DAEMON_TIMEOUT when one
 * listens but does not answer a ping.
 */
export async function askDaemon<T> (loc: Location | null, cmd: string, args?: Record<string, unknown>): Promise<T | undefined> {
  // As the library does: a ping with a timeout first (a stopped daemon accepts the connection
  // and never answers; the command itself may rightly take long, a rewind of a big tree).
  if (loc === null || !await ping(loc.socket)) return undefined
  try {
    return await call(loc.socket, args === undefined ? { cmd } : { cmd, args }) as T
  } catch (err) {
    if (err instanceof CpfsError && err.code === 'NOT_RUNNING') return undefined
    throw err
  }
}

/** Status of a mounted workspace from its daemon's answer. */
export function statusFromDaemon (loc: Location, s: any, storeBytes = dirBytes(loc.store)): StatusInfo {
  const out: StatusInfo = { workspace: loc.workspace, mounted: true, stale: false, pid: s.pid, head: s.head, turns: s.turns, pending: s.pending, redo: s.redo, store: loc.store, storeBytes, skipped: s.skipped, ops: s.ops }
  if (s.spaceRefusedAt) out.spaceRefusedAt = s.spaceRefusedAt
  return out
}

/** Workspace-relative, normalised paths; `paths` may be absolute (inside the workspace) or relative to it. */
export function workspacePaths (workspace: string, paths: string[]): string[] {
  return paths.map(p => {
    const rel = isAbsolute(p) ? relative(workspace, resolve(p)) : p
    const n = normaliseUserPath(rel)
    if (n === null || rel.startsWith('..') || isAbsolute(rel)) throw new CpfsError('PATH_OUTSIDE', `${p} is outside the workspace ${workspace}`, 'give paths inside the workspace')
    return n
  })
}
