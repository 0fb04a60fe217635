// The real directory's own limits decide what a plan can write there: a name longer than its
// filesystem allows (NAME_MAX, 255 bytes on ext4, xfs, btrfs, tmpfs; fewer on some network and
// stacked filesystems) would fail halfway through the plan. A history can hold such a name (one
// written by cpfs 0.1, which accepted any length, or a fork to another filesystem), so every
// plan checks its names up front and refuses, changing nothing, with one line.
import { spawnSync } from 'node:child_process'
import { CpfsError } from '../errors.js'
import type { PlanOp } from './planner.js'

/** Linux's NAME_MAX: what the mount allows, and the answer when the filesystem cannot be asked. */
export const NAME_MAX = 255

/**
 * The longest name (bytes) the filesystem of real directory `dirFd` (an open descriptor) takes:
 * pathconf's _PC_NAME_MAX (statfs f_namelen), which Node does not expose, through getconf(1)
 * from libc. The directory goes to getconf as its descriptor 3, never by path: the workspace's
 * path may be the mount itself, whose statfs this process would have to answer.
 */
export function nameMax (dirFd: number): number {
  const r = spawnSync('getconf', ['NAME_MAX', '/proc/self/fd/3'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore', dirFd] })
  const n = Number(r.stdout?.trim())
  return r.status === 0 && Number.isInteger(n) && n > 0 ? n : NAME_MAX
}

/** Refuse, before anything is written, a plan that names a path the real directory cannot hold. */
export function checkNames (ops: PlanOp[], dirFd: number, max = nameMax(dirFd)): void {
  const long: string[] = []
  for (const op of ops) {
    if (op.op === 'remove' || op.op === 'chmod' || op.op === 'anchor') continue // names that exist, or cpfs's own short ones
    for (const part of op.path.split('/')) if (Buffer.byteLength(part) > max && !long.includes(op.path)) long.push(op.path)
  }
  if (long.length === 0) return
  const show = (p: string) => {
    const name = [...p.split('/')].find(part => Buffer.byteLength(part) > max)!
    return `${JSON.stringify(name.slice(0, 24) + '…')} (${Buffer.byteLength(name)} bytes)`
  }
  const shown = long.slice(0, 3).map(show).join(', ') + (long.length > 3 ? ` and ${long.length - 3} more` : '')
  throw new CpfsError('NAME_TOO_LONG', `the real directory's filesystem takes names of at most ${max} bytes, and the history holds ${long.length === 1 ? 'a longer one' : 'longer ones'}: ${shown}; nothing was changed`,
    'rename or remove it in the mount (or rewind past it), then run the command again')
}
