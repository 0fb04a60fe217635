// Where a workspace's store and control socket live. Each workspace gets a directory under
// CPFS_HOME (default $XDG_DATA_HOME/cpfs or ~/.local/share/cpfs) named after it and a hash
// of its real path. That directory holds the LevelDB (unless --store put it elsewhere, which
// is then recorded in workspace.json), the daemon's log, pid file and control socket. The
// store may never be inside the workspace: LevelDB opens files by path, and a path inside
// the mount would make the daemon call into itself.
import { type Stats, chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { CpfsError } from '../errors.js'

export interface Location {
  workspace: string
  home: string
  /** Per-workspace directory under home: registry record, log, pid, socket. */
  dir: string
  store: string
  socket: string
  /** The workspace path answers ENOTCONN: a mount whose daemon died. */
  stale: boolean
}

export function cpfsHome (): string {
  if (process.env.CPFS_HOME) return resolve(process.env.CPFS_HOME)
  if (process.env.XDG_DATA_HOME) return join(resolve(process.env.XDG_DATA_HOME), 'cpfs')
  return join(homedir(), '.local', 'share', 'cpfs')
}

export function workspaceId (workspace: string): string {
  // Loaded here, not at the top: node:crypto costs ~5 ms, and the commands an agent host runs
  // every message find a mounted workspace's directory in the mount table, with no hash.
  const { createHash } = process.getBuiltinModule('node:crypto')
  return createHash('sha256').update(workspace).digest('hex').slice(0, 12)
}

/** Mount points of the cpfs mounts visible here, from /proc/self/mountinfo (no system call on them). */
export function cpfsMountPoints (): Set<string> {
  const out = new Set<string>()
  let text = ''
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8')
  } catch {
    return out
  }
  for (const line of text.split('\n')) {
    const parts = line.split(' ')
    const sep = parts.indexOf('-')
    if (sep > 0 && parts[sep + 1] === 'fuse.cpfs') out.add(parts[4].replace(/\\(\d{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8))))
  }
  return out
}

/**
 * realpath(3) that never looks into a cpfs mount: once the path reaches one of `points`, the
 * rest is taken as written. Any stat of a mount point goes to its daemon, and a stopped daemon
 * never answers: the caller would wait in the kernel, deaf even to SIGTERM (node catches it, so
 * it is not fatal there). A path that cannot be resolved comes back absolute, as given.
 */
export function realPathOutside (p: string, points: ReadonlySet<string> = cpfsMountPoints()): string {
  const abs = resolve(p)
  const todo = abs.split('/').filter(Boolean)
  let done = '/'
  let links = 0
  while (todo.length > 0) {
    if (points.has(done)) return join(done, ...todo)
    const name = todo.shift()!
    if (name === '.') continue
    if (name === '..') { done = dirname(done); continue }
    const next = join(done, name)
    if (points.has(next)) { done = next; continue } // a mount point: never stat it
    try {
      if (!lstatSync(next).isSymbolicLink()) { done = next; continue }
      if (++links > 40) return abs // ELOOP
      const target = readlinkSync(next)
      todo.unshift(...target.split('/').filter(Boolean))
      if (target.startsWith('/')) done = '/'
    } catch {
      return abs
    }
  }
  return done
}

function realWorkspace (dir: string): { path: string, stale: boolean } {
  const points = cpfsMountPoints()
  const path = realPathOutside(dir, points)
  // A cpfs mount (or a path inside one) is known from the mount table: looking at it could
  // hang on a stopped daemon. Whether its daemon still lives, its control socket tells.
  for (let cur = path; ; cur = dirname(cur)) {
    if (points.has(cur)) return { path, stale: false }
    if (cur === '/') break
  }
  const abs = resolve(dir)
  let st: Stats
  try {
    st = statSync(abs)
  } catch (err: any) {
    if (err.code === 'ENOTCONN') return { path: abs, stale: true }
    if (err.code === 'ENOENT') throw new CpfsError('NO_DIR', `${abs} does not exist`, 'pass an existing directory')
    throw new CpfsError('BAD_DIR', `cannot use ${abs}: ${err.code}`, 'pass a directory you can read')
  }
  if (!st.isDirectory()) throw new CpfsError('NOT_DIR', `${abs} is not a directory`, 'pass a directory')
  return { path, stale: false }
}

/** The per-workspace directory under CPFS_HOME for the real path `workspace` (need not exist). */
export function workspaceDir (workspace: string): string {
  const name = basename(workspace).replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 32) || 'root'
  return join(cpfsHome(), `${name}-${workspaceId(workspace)}`)
}

export function locate (dir: string, storeOverride?: string): Location {
  const { path: workspace, stale } = realWorkspace(dir)
  return locateWorkspace(workspace, stale, storeOverride)
}

/**
 * The location of `workspace`, a real path known already (from the mount table): no system
 * call touches it, so a mount whose daemon is stopped cannot make this hang. `stateDir` is
 * the per-workspace directory when the caller knows it already (a mount names it).
 */
export function locateWorkspace (workspace: string, stale = false, storeOverride?: string, stateDir?: string): Location {
  const home = cpfsHome()
  // A sandboxed run (cpfs exec --sandbox) keeps its socket, log and store in a directory of
  // its own, so that several sandboxes can mount the same workspace at once.
  const wdir = stateDir ?? (process.env.CPFS_STATE_DIR ? resolve(process.env.CPFS_STATE_DIR) : workspaceDir(workspace))
  let store = storeOverride ? resolve(storeOverride) : undefined
  if (!store) {
    try {
      store = JSON.parse(readFileSync(join(wdir, 'workspace.json'), 'utf8')).store
    } catch {}
  }
  store ??= join(wdir, 'store')
  let socket = join(wdir, 'control.sock')
  if (Buffer.byteLength(socket) > 100) socket = join(tmpdir(), `cpfs-${process.getuid?.() ?? 0}-${workspaceId(workspace)}.sock`)
  return { workspace, home, dir: wdir, store, socket, stale }
}

export function checkStoreOutside (loc: Location): void {
  const inside = (p: string) => p === loc.workspace || p.startsWith(loc.workspace + '/')
  if (inside(resolve(loc.store)) || inside(loc.dir)) {
    throw new CpfsError('STORE_INSIDE', `the store ${loc.store} is inside the workspace ${loc.workspace}`, 'put the store outside the workspace (--store or CPFS_HOME)')
  }
}

/**
 * Make a store private to its owner wherever it lives: every directory 0700, every file 0600
 * (symlinks left alone). LevelDB creates its files 0666 less the umask, and `--store` may name
 * an existing 0755 directory: other users could read file contents out of it. Run when a store
 * is opened (which also fixes stores written by earlier versions) and when it is closed (files
 * LevelDB made meanwhile). Errors are ignored: a file may vanish under a compaction.
 */
export function makePrivate (path: string): void {
  let st: Stats
  try {
    st = lstatSync(path)
  } catch {
    return
  }
  if (st.isSymbolicLink()) return
  const want = st.isDirectory() ? 0o700 : 0o600
  if ((st.mode & 0o7777) !== want) {
    try { chmodSync(path, want) } catch {}
  }
  if (!st.isDirectory()) return
  let names: string[] = []
  try {
    names = readdirSync(path)
  } catch {}
  for (const name of names) makePrivate(join(path, name))
}

/** Record the workspace and its store path so that later commands find them. */
export function register (loc: Location): void {
  mkdirSync(loc.dir, { recursive: true, mode: 0o700 })
  chmodSync(loc.dir, 0o700)
  const rec = { workspace: loc.workspace, store: loc.store }
  const file = join(loc.dir, 'workspace.json')
  writeFileSync(file + '.tmp', JSON.stringify(rec, null, 2) + '\n', { mode: 0o600 })
  renameSync(file + '.tmp', file)
}

/** What a view's mount source starts with (a workspace's is "cpfs:" or "cpfs"): daemon/view-mounts.ts. */
export const VIEW_SOURCE = 'cpfs-view:'

/** Is there a cpfs FUSE mount of a workspace at `dir` right now (from /proc/self/mountinfo)? */
export function isMounted (dir: string): boolean {
  let text = ''
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8')
  } catch {
    return false
  }
  for (const line of text.split('\n')) {
    const parts = line.split(' ')
    const sep = parts.indexOf('-')
    if (sep < 0) continue
    const mnt = parts[4]?.replace(/\\(\d{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)))
    // A view of an old turn (source cpfs-view:...) is no workspace mount.
    if (mnt === dir && parts[sep + 1] === 'fuse.cpfs' && !(parts[sep + 2] ?? '').startsWith(VIEW_SOURCE)) return true
  }
  return false
}

/** The registered workspace that contains `p` (an absolute path that may not exist). */
export function findWorkspace (p: string): string | null {
  let cur = resolve(p)
  for (;;) {
    try {
      const st = statSync(cur)
      if (st.isDirectory()) {
        const loc = locate(cur)
        if (existsSync(join(loc.dir, 'workspace.json'))) return loc.workspace
      }
    } catch {}
    const up = resolve(cur, '..')
    if (up === cur) return null
    cur = up
  }
}

export function isRegistered (dir: string): boolean {
  try {
    return existsSync(join(locate(dir).dir, 'workspace.json'))
  } catch {
    return false
  }
}

/** Bytes of all files below p (a store's size on disk). */
export function dirBytes (p: string): number {
  let total = 0
  try {
    for (const name of readdirSync(p)) {
      const st = lstatSync(join(p, name))
      total += st.isDirectory() ? dirBytes(join(p, name)) : st.size
    }
  } catch {}
  return total
}
