// Housekeeping: every store under CPFS_HOME (status --all), retention (prune), and deleting a
// workspace's whole history (forget). Settings can live in $CPFS_HOME/config.json:
//   { "prune": { "keepTurns": 50, "keepBranches": 20, "olderThanDays": 30, "maxSize": "2G" } }
// (session/retention.ts: the defaults, and the daemon's automatic runs).
import * as fs from 'node:fs'
import { join } from 'node:path'
import * as api from './api.js'
import { CpfsError } from './errors.js'
import { call, PING_TIMEOUT_MS } from './control/client.js'
import { Session } from './session/session.js'
import type { PruneResult } from './session/prune.js'
import { retain, retentionSettings, type RetentionSettings } from './session/retention.js'
import { Store } from './store/store.js'
import { cpfsHome, dirBytes, isMounted, locate } from './store/locate.js'
import './remote/lazy.js'

export interface StoreInfo {
  workspace: string
  store: string
  dir: string
  mounted: boolean
  orphaned: boolean
  /** The history of a sandboxed run (cpfs exec --sandbox), kept under $CPFS_HOME/sandboxes. */
  sandbox: boolean
  turns: number | null
  bytes: number
  /** When a turn was last opened or sealed (ms), now while mounted; 0 when unknown. */
  lastUsed: number
}

/**
 * Turns and last use of a store that no daemon holds, from its records (not from file times:
 * merely opening a LevelDB rewrites its log and manifest). Null when it cannot be read.
 */
async function readHistory (store: string, workspace: string): Promise<{ turns: number, lastUsed: number } | null> {
  let s: Store
  try {
    s = await Store.open(store, { workspace, create: false })
  } catch {
    return null
  }
  try {
    let lastUsed = 0
    for (const layer of s.meta.stack) {
      const rec = s.turnRecord(layer)
      lastUsed = Math.max(lastUsed, rec.openedAt ?? 0, rec.sealedAt ?? 0)
    }
    return { turns: s.meta.stack.length, lastUsed }
  } finally {
    await s.close()
  }
}

/** The daemon that serves this state directory, if it answers: its status. */
async function liveStatus (dir: string): Promise<{ turns: number } | null> {
  const socket = join(dir, 'control.sock')
  if (!fs.existsSync(socket)) return null
  try {
    return await call(socket, { cmd: 'status' }, { timeoutMs: PING_TIMEOUT_MS })
  } catch {
    return null
  }
}

export { parseSize } from './store/config.js'

export interface PruneSettings {
  keepTurns?: number
  keepBranches?: number
  olderThanDays?: number
  maxSize?: string | number
}

/** Every workspace with history under CPFS_HOME, and every sandboxed run's history. */
export async function statusAll (): Promise<StoreInfo[]> {
  const home = cpfsHome()
  const out: StoreInfo[] = []
  const dirs = (p: string): string[] => {
    try {
      return fs.readdirSync(p).sort().map(n => join(p, n))
    } catch {
      return []
    }
  }
  for (const dir of [...dirs(home), ...dirs(join(home, 'sandboxes'))]) {
    let rec: { workspace: string, store: string }
    try {
      rec = JSON.parse(fs.readFileSync(join(dir, 'workspace.json'), 'utf8'))
    } catch {
      continue
    }
    const sandbox = dir.startsWith(join(home, 'sandboxes') + '/')
    // A mounted workspace exists: never stat it (a stopped daemon would hang this command).
    const orphaned = !isMounted(rec.workspace) && !fs.existsSync(rec.workspace)
    // A sandbox's mount lives in its own mount namespace: its socket tells whether it runs.
    const live = orphaned || (!sandbox && !isMounted(rec.workspace)) ? null : await liveStatus(dir)
    const history = live ? null : await readHistory(rec.store, rec.workspace)
    out.push({
      workspace: rec.workspace,
      store: rec.store,
      dir,
      mounted: live !== null,
      orphaned,
      sandbox,
      turns: live?.turns ?? history?.turns ?? null,
      bytes: dirBytes(rec.store),
      lastUsed: live ? Date.now() : history?.lastUsed ?? 0
    })
  }
  return out
}

export interface PruneReport extends Partial<PruneResult> {
  workspace: string
  before: number
  after: number
  removed?: boolean
}

async function openOffline (dir: string, store?: string): Promise<{ session: Session, close: () => Promise<void> }> {
  const loc = locate(dir, store)
  if (isMounted(loc.workspace)) throw new CpfsError('MOUNTED', `${loc.workspace} is mounted`, `run cpfs unmount ${loc.workspace} first`)
  const fd = fs.openSync(loc.workspace, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  const session = await Session.open({ storePath: loc.store, workspace: loc.workspace, dirFd: fd, create: false }).catch((err) => { fs.closeSync(fd); throw err })
  return { session, close: async () => { await session.close(); fs.closeSync(fd) } }
}

/**
 * Apply retention to one workspace (not mounted) and collect garbage: the options given, or
 * without any, config.json's "prune" settings over the defaults (session/retention.ts).
 */
export async function prune (opts: api.Target & PruneSettings): Promise<PruneReport> {
  const loc = locate(opts.dir ?? '.', opts.store)
  const given = opts.keepTurns !== undefined || opts.keepBranches !== undefined || opts.olderThanDays !== undefined || opts.maxSize !== undefined
  const settings: RetentionSettings = given ? { keepTurns: opts.keepTurns, keepBranches: opts.keepBranches, olderThanDays: opts.olderThanDays, maxSize: opts.maxSize } : retentionSettings()
  const before = dirBytes(loc.store)
  const { session, close } = await openOffline(loc.workspace, opts.store)
  let result: PruneResult
  try {
    result = await retain(session, settings, () => dirBytes(loc.store))
  } finally {
    await close()
  }
  return { workspace: loc.workspace, before, after: dirBytes(loc.store), ...result }
}

/** Delete a workspace's whole history. */
export async function forget (opts: api.Target & { force?: boolean }): Promise<{ workspace: string, removed: string[] }> {
  const loc = locate(opts.dir ?? '.', opts.store)
  if (!fs.existsSync(join(loc.dir, 'workspace.json')) && !fs.existsSync(loc.store)) {
    throw new CpfsError('NO_HISTORY', `no cpfs history for ${loc.workspace}`, 'nothing to forget')
  }
  if (isMounted(loc.workspace)) throw new CpfsError('MOUNTED', `${loc.workspace} is mounted`, `run cpfs unmount ${loc.workspace} first`)
  if (!opts.force && fs.existsSync(join(loc.store, 'db'))) {
    const st = await api.status({ dir: loc.workspace, store: opts.store })
    if (st.pending > 0) {
      throw new CpfsError('PENDING', `${st.pending} turn${st.pending === 1 ? ' is' : 's are'} not applied to the real directory; forgetting would lose ${st.pending === 1 ? 'it' : 'them'}`, `run cpfs unmount ${loc.workspace} to apply, or pass --force`)
    }
  }
  const removed = [loc.store, loc.dir].filter(p => fs.existsSync(p))
  for (const p of removed) fs.rmSync(p, { recursive: true, force: true })
  return { workspace: loc.workspace, removed }
}

/** Remove the history of every workspace that no longer exists. */
export async function pruneOrphans (): Promise<PruneReport[]> {
  const out: PruneReport[] = []
  for (const s of await statusAll()) {
    if (!s.orphaned) continue
    fs.rmSync(s.store, { recursive: true, force: true })
    fs.rmSync(s.dir, { recursive: true, force: true })
    out.push({ workspace: s.workspace, before: s.bytes, after: 0, removed: true })
  }
  return out
}
