// The mounted path of the library: a command on a mounted workspace only talks to its daemon.
// An agent host runs `cpfs turn`, `status`, `log`, `rewind` on every message, so the CLI tries
// this first and loads the rest of cpfs (the store, LevelDB, the planners, the daemon, the MCP
// SDK) only when the workspace is not mounted. Nothing here may import more than the control
// client, the locator and the mount table: that is what keeps `cpfs turn` as fast as node starts.
import { readFileSync } from 'node:fs'
import { isAbsolute, join, relative, resolve } from 'node:path'
import { call, PING_TIMEOUT_MS, type CallOptions } from './client.js'
import type { ArgsOf, DaemonStatus, CommandName, MemoryStatus, Request, ResultOf } from './protocol.js'
import { CpfsError, isCpfsError } from '../errors.js'
import type { WatchInfo, WatchStatus } from '../store/underneath.js'
import { normaliseUserPath } from '../paths/paths.js'
import type { RetentionPlan } from '../session/retention-plan.js'
import { dirBytes, locateWorkspace, type Location } from '../store/locate.js'
import { mountAt, mountHolding, stateDirOf, type MountEntry } from '../workspaces.js'

function locateMount (m: MountEntry, store?: string): Location {
  return locateWorkspace(m.point, false, store, stateDirOf(m))
}

/** The location of the mounted workspace that holds `dir` (default: the current directory), or null when none does. */
export function mountedLocation (dir: string | undefined, store?: string): Location | null {
  const m = mountHolding(dir ?? process.cwd())
  return m === null ? null : locateMount(m, store)
}

/** The location of the workspace mounted at `point` (a real path from the mount table). */
export function locateMounted (point: string): Location {
  const m = mountAt(point)
  return m === null ? locateWorkspace(point) : locateMount(m)
}

/**
 * Ask the daemon of the mounted workspace at `loc`; undefined when no daemon listens (a stale
 * mount: the caller goes the long way, which reports or recovers it); DAEMON_TIMEOUT when one
 * listens but does not acknowledge the request within PING_TIMEOUT_MS.
 */
export async function askDaemon<C extends CommandName> (loc: Location | null, cmd: C, args?: ArgsOf<C>): Promise<ResultOf<C> | undefined> {
  if (loc === null) return undefined
  try {
    // A stopped daemon accepts the connection and never answers, and the command itself may
    // rightly take long (a rewind of a big tree): the daemon acknowledges the request at once,
    // and only that is timed. One connection, where a ping first would take two.
    return await call(loc.socket, args === undefined ? { cmd } : { cmd, args }, { ackTimeoutMs: PING_TIMEOUT_MS })
  } catch (err) {
    if (isCpfsError(err) && err.code === 'NOT_RUNNING') return undefined
    throw explainTimeout(loc, err)
  }
}

/**
 * DAEMON_TIMEOUT with what the user needs: which process, whether it is stopped (SIGSTOP, a
 * debugger) or busy, and how to get out. Other errors come back as they are.
 */
export function explainTimeout (loc: Location, err: unknown): unknown {
  if (!isCpfsError(err) || err.code !== 'DAEMON_TIMEOUT') return err
  let pid = 0
  try {
    pid = Number(readFileSync(join(loc.dir, 'daemon.pid'), 'utf8').trim()) || 0
  } catch {}
  let state = ''
  try {
    // /proc/PID/stat: "pid (comm) S ...", comm may hold spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  } catch {}
  const who = pid ? `the cpfs daemon of ${loc.workspace} (pid ${pid})` : `the cpfs daemon of ${loc.workspace}`
  const within = err.message.match(/within ([\d.]+ s)/)?.[1] ?? 'time'
  if (state === 'T' || state === 't') {
    return new CpfsError('DAEMON_TIMEOUT', `${who} did not answer within ${within}: it is stopped`, `resume it with kill -CONT ${pid}; or end it with kill -9 ${pid} and run cpfs mount ${loc.workspace}, which recovers the session`)
  }
  return new CpfsError('DAEMON_TIMEOUT', `${who} did not answer within ${within}: it is stopped or busy`, `try again in a moment; if it keeps happening see ${join(loc.dir, 'daemon.log')}, or end it${pid ? ` with kill ${pid}` : ''} and run cpfs mount ${loc.workspace}`)
}

/** A request to the daemon of `loc`, timed (see call), with a timeout explained. */
export async function callDaemon<C extends CommandName> (loc: Location, req: Request<C>, opts?: CallOptions): Promise<ResultOf<C>> {
  try {
    return await call(loc.socket, req, opts)
  } catch (err) {
    throw explainTimeout(loc, err)
  }
}

/** What `cpfs status` reports (api.status), mounted or not. */
export interface StatusInfo {
  workspace: string
  mounted: boolean
  stale: boolean
  pid: number | null
  head: number | null
  turns: number
  pending: number
  redo: number
  branches: number
  /** What retention drops next, and when (session/retention-plan.ts). */
  retention?: RetentionPlan | null
  store: string
  storeBytes: number
  /** Paths the last plan left alone because another process changed them meanwhile. */
  skipped: string[]
  /** When a write in the mount was last refused because the store's disk is below the reserve (ms). */
  spaceRefusedAt?: number
  /** Mounted: big real files whose original bytes are being read into the store. */
  capturing?: number
  /** A plan to the real directory was interrupted; the next command that changes something finishes it. */
  interrupted?: boolean
  /** Mounted: FUSE operations answered since the mount (or the last reset), time spent, and a histogram of handler times. */
  ops?: { counts: Record<string, number>, ms: Record<string, number>, hist?: number[] }
  /** Mounted: the watch of writes made underneath the mount (daemon/underneath.ts). */
  underneath?: WatchStatus | WatchInfo
  /** Mounted: the daemon's memory, budgets and what its caches hold (DaemonStatus.memory). */
  memory?: MemoryStatus
}

/** Status of a mounted workspace from its daemon's answer. */
export function statusFromDaemon (loc: Location, s: DaemonStatus, storeBytes = dirBytes(loc.store)): StatusInfo {
  const out: StatusInfo = { workspace: loc.workspace, mounted: true, stale: false, pid: s.pid, head: s.head, turns: s.turns, pending: s.pending, redo: s.redo, branches: s.branches ?? 0, retention: s.retention ?? null, store: loc.store, storeBytes, skipped: s.skipped, ops: s.ops }
  if (s.spaceRefusedAt) out.spaceRefusedAt = s.spaceRefusedAt
  if (s.underneath) out.underneath = s.underneath
  if (s.memory) out.memory = s.memory
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
