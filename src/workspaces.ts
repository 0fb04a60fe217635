// Which workspace a path belongs to, as git finds the repository: from the path upwards, the
// nearest cpfs mount, else the nearest directory with cpfs history. And the rule that
// workspaces never nest: a workspace inside another (or containing one) would have two
// histories for the same files, and a rewind of the outer one would rewrite the inner one
// behind its back.
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { CpfsError } from './errors.js'
import { VIEW_SOURCE, cpfsHome, realPathOutside, workspaceDir } from './store/locate.js'

function unescape (s: string): string {
  return s.replace(/\\(\d{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)))
}

/** A cpfs mount in the mount table: where it is, and its source (see mountSource). */
export interface MountEntry {
  point: string
  source: string
}

/**
 * The cpfs workspace mounts visible here (from /proc/self/mountinfo; no system call on them).
 * Views of old turns (daemon/view-mounts.ts) are cpfs mounts too, but no workspace: skipped.
 */
export function cpfsMountTable (): MountEntry[] {
  return everyCpfsMount().filter(m => !m.source.startsWith(VIEW_SOURCE))
}

/** The views of old turns mounted here (their source starts cpfs-view:). */
export function viewMountTable (): MountEntry[] {
  return everyCpfsMount().filter(m => m.source.startsWith(VIEW_SOURCE))
}


function everyCpfsMount (): MountEntry[] {
  let text = ''
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8')
  } catch {
    return []
  }
  const out: MountEntry[] = []
  for (const line of text.split('\n')) {
    const parts = line.split(' ')
    const sep = parts.indexOf('-')
    if (sep > 0 && parts[sep + 1] === 'fuse.cpfs') out.push({ point: unescape(parts[4]), source: unescape(parts[sep + 2] ?? '') })
  }
  return out
}

/** Mount points of cpfs mounts visible here. */
export function cpfsMounts (): string[] {
  return cpfsMountTable().map(m => m.point)
}

/**
 * The source a workspace is mounted with: "cpfs:" and its per-workspace directory (socket,
 * log, store), so that a command finds the daemon from the mount table alone, whatever
 * CPFS_HOME it runs with, and without hashing the path (node:crypto is 5% of a command's
 * start). A directory whose name a mount option cannot carry gives plain "cpfs", and the
 * directory is then found from the path, as before.
 */
export function mountSource (stateDir: string): string {
  return /^\/[A-Za-z0-9._/+@-]*$/.test(stateDir) && stateDir.length <= 1024 ? `cpfs:${stateDir}` : 'cpfs'
}

/** The per-workspace directory a mount's source names, or undefined (see mountSource). */
export function stateDirOf (m: MountEntry): string | undefined {
  return m.source.startsWith('cpfs:/') ? m.source.slice(5) : undefined
}

const within = (p: string, dir: string): boolean => p === dir || p.startsWith(dir === '/' ? '/' : dir + '/')

/**
 * The path made absolute and, when it can be, real (symlinks resolved), without looking into
 * a cpfs mount (a stopped daemon would hang the caller): the mount table tells (locate.ts).
 */
function realish (p: string): string {
  return realPathOutside(p, new Set(cpfsMounts()))
}

/** Does `dir` have cpfs history under CPFS_HOME (its record there)? */
export function hasHistory (dir: string): boolean {
  return existsSync(join(workspaceDir(dir), 'workspace.json'))
}

/**
 * The nearest cpfs mount at or above p (the longest mount point that contains it; of two at
 * the same point, the later one in the table, which is the one on top).
 */
function enclosingMount (p: string, mounts = cpfsMountTable()): MountEntry | null {
  let best: MountEntry | null = null
  for (const m of mounts) if (within(p, m.point) && (best === null || m.point.length >= best.point.length)) best = m
  return best
}

/** The cpfs mount that holds `p` (resolved as the kernel sees it), or null. */
export function mountHolding (p: string): MountEntry | null {
  return enclosingMount(realish(p))
}

/** The cpfs mount whose mount point is exactly `point`, or null. */
export function mountAt (point: string): MountEntry | null {
  let found: MountEntry | null = null
  for (const m of cpfsMountTable()) if (m.point === point) found = m // the last: the one on top
  return found
}

/**
 * The workspace that holds `p` (default: the current directory): the nearest cpfs mount above
 * it, else the nearest directory with history. `touch: false` looks at the mount table only
 * (a hook must not touch a mount whose daemon may be stopped: the call would hang). Null when
 * there is none.
 */
export function findWorkspaceOf (p: string = process.cwd(), opts: { touch?: boolean } = {}): string | null {
  const touch = opts.touch !== false
  const start = touch ? realish(p) : resolve(p)
  const m = enclosingMount(start)
  if (m !== null) return m.point
  // Inside a view of an old turn: its workspace is the one whose daemon serves it.
  const view = enclosingMount(start, viewMountTable())
  if (view !== null) return workspaceServing(view.point)
  if (!touch) return null
  for (let cur = start; ; cur = resolve(cur, '..')) {
    if (hasHistory(cur)) return cur
    if (cur === '/') return null
  }
}

/** The mounted workspace whose daemon serves the view at `point` (from each one's views.json), or null. */
export function workspaceServing (point: string): string | null {
  for (const m of cpfsMountTable()) {
    const dir = stateDirOf(m)
    if (dir === undefined) continue
    try {
      const records = JSON.parse(readFileSync(join(dir, 'views.json'), 'utf8')) as Array<{ path: string }>
      if (records.some(r => r.path === point)) return m.point
    } catch {}
  }
  return null
}

/** Workspaces with history under CPFS_HOME (from their records). */
function registered (): string[] {
  const home = cpfsHome()
  let names: string[] = []
  try {
    names = readdirSync(home)
  } catch {
    return []
  }
  const out: string[] = []
  for (const name of names) {
    try {
      out.push(JSON.parse(readFileSync(join(home, name, 'workspace.json'), 'utf8')).workspace)
    } catch {}
  }
  return out
}

/**
 * Refuse to make `workspace` (a real path) a workspace when it lies inside another one, or
 * another lies inside it. One line names the other workspace and what to do instead.
 */
export function checkNotNested (workspace: string): void {
  // A view of an old turn is read-only, and goes when its workspace's daemon does.
  const view = enclosingMount(workspace, viewMountTable())
  if (view !== null) throw new CpfsError('NESTED', `${workspace} is inside ${view.point}, a read-only view of an old turn; it cannot be a workspace`, 'mount the workspace itself; cpfs fork TURN DEST makes a turn a directory of its own')
  const mounts = cpfsMounts()
  for (let cur = resolve(workspace, '..'); ; cur = resolve(cur, '..')) {
    const mounted = mounts.includes(cur)
    if (mounted || hasHistory(cur)) {
      throw new CpfsError('NESTED', `${workspace} is inside the workspace ${cur}${mounted ? ', which is mounted' : ', which has cpfs history'}; workspaces do not nest`, `use ${cur} itself (cpfs commands work from any directory inside it)${mounted ? '' : `, or drop its history first: cpfs forget ${cur}`}`)
    }
    if (cur === '/') break
  }
  // A mounted workspace exists: never stat it (a stopped daemon would hang this command).
  const inner = [...mounts, ...registered().filter(w => !mounts.includes(w) && existsSync(w))].find(w => w !== workspace && within(w, workspace))
  if (inner) {
    throw new CpfsError('NESTED', `${workspace} contains the workspace ${inner}; workspaces do not nest`, `mount ${inner} itself, or drop its history first (cpfs unmount ${inner}, then cpfs forget ${inner})`)
  }
}
