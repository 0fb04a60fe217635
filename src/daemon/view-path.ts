// Where a view may be mounted: a new or empty directory outside the workspace, outside every
// cpfs mount, and not above the workspace or its store. Checked by the daemon, which serves
// the workspace: it must never stat a path inside a cpfs mount (its own would deadlock, a
// stopped daemon's would hang), so paths are resolved through the mount table first.
import * as fs from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { CpfsError } from '../errors.js'
import { cpfsMountPoints, realPathOutside, type Location } from '../store/locate.js'

const within = (p: string, dir: string): boolean => p === dir || p.startsWith(dir === '/' ? '/' : dir + '/')

export interface ViewPath {
  path: string
  /** The directory does not exist yet: the view makes it, and removes it when closed. */
  create: boolean
}

function refuse (message: string, hint = 'name a new or empty directory outside the workspace, or give no PATH (a directory under the workspace\'s cpfs directory is made)'): never {
  throw new CpfsError('VIEW_PATH', message, hint)
}

/** Check `asked` (absolute) as a view's mount point for the workspace at `loc`. */
export function checkViewPath (asked: string, loc: Location): ViewPath {
  const points = cpfsMountPoints()
  const path = realPathOutside(resolve(asked), points)
  if (within(path, loc.workspace)) refuse(`${path} is inside the workspace ${loc.workspace}`)
  if (within(loc.workspace, path)) refuse(`${path} is above the workspace ${loc.workspace}`)
  for (const m of points) if (within(path, m)) refuse(`${path} is inside the cpfs mount ${m}`)
  if (within(path, loc.store) || within(loc.store, path)) refuse(`${path} overlaps the workspace's store ${loc.store}`)
  let st: fs.Stats | null = null
  try {
    st = fs.statSync(path)
  } catch (err: any) {
    if (err.code !== 'ENOENT') refuse(`cannot use ${path}: ${err.code}`)
  }
  if (st === null) {
    const parent = dirname(path)
    let ok = false
    try { ok = fs.statSync(parent).isDirectory() } catch {}
    if (!ok) refuse(`${parent} does not exist`, 'create the parent directory first, or give no PATH')
    return { path, create: true }
  }
  if (!st.isDirectory()) refuse(`${path} is a file, not a directory`)
  if (fs.readdirSync(path).length > 0) refuse(`${path} is a directory that is not empty`)
  return { path, create: false }
}

/** A fresh directory for a view of `ref` under the workspace's cpfs directory: views/<ref>-<n>. */
export function defaultViewPath (loc: Location, ref: string): string {
  const dir = join(loc.dir, 'views')
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const stem = ref.replace(/[^A-Za-z0-9._-]/g, '-')
  // By name, not by stat: a view a killed daemon left would answer ENOTCONN.
  const taken = new Set(fs.readdirSync(dir))
  for (let n = 1; ; n++) if (!taken.has(`${stem}-${n}`)) return join(dir, `${stem}-${n}`)
}
