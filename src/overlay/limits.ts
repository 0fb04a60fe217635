// The real directory's filesystem limits, which decide what the mount takes and what a plan can
// write (names longer than its NAME_MAX would fail there).
import { spawnSync } from 'node:child_process'

/** Linux's NAME_MAX: what the mount allows, and the answer when the filesystem cannot be asked. */
export const NAME_MAX = 255

/**
 * The longest name (bytes) the filesystem of real directory `dirFd` (an open descriptor) takes:
 * pathconf's _PC_NAME_MAX (statfs f_namelen; 255 on ext4, xfs, btrfs and tmpfs, fewer on some
 * network and stacked filesystems), which Node does not expose, through getconf(1) from libc.
 * The directory goes to getconf as its descriptor 3, never by path: the workspace's path may be
 * the mount itself, whose statfs this process would have to answer (a deadlock).
 */
export function nameMax (dirFd: number): number {
  const r = spawnSync('getconf', ['NAME_MAX', '/proc/self/fd/3'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore', dirFd] })
  const n = Number(r.stdout?.trim())
  return r.status === 0 && Number.isInteger(n) && n > 0 ? n : NAME_MAX
}
