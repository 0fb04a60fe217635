// Mounting and unmounting the FUSE filesystem, with cpfs's own transport: /dev/fuse is opened
// here (non-blocking), mounted with mount(2) as root or through fusermount3 for other users
// (Debian package fuse3), and handed to the channel. Mount options and why:
//   default_permissions  the kernel checks modes and owners like on ext4
//   allow_other          only with --allow-other: other users may enter the mount
//   nosuid, nodev        set-id bits and device nodes stay inert inside the mount
// The kernel's caches are negotiated at INIT (ops.ts): entries, attributes and negative
// lookups are cached for CPFS_CACHE_TIMEOUT seconds (default one day), which is safe because
// cpfs is the only writer and invalidates exactly after the changes it makes itself.
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { CpfsError } from '../errors.js'
import { native, loadNative } from '../native/index.js'

export interface MountOptions {
  allowOther?: boolean
  /** What the mount table shows as the mount's source (default "cpfs"). */
  source?: string
  /** A read-only mount (MS_RDONLY, and `ro` for fusermount3): views of old turns (daemon/view-mounts.ts). */
  readOnly?: boolean
}

const MS_RDONLY = 1
const MS_NOSUID = 2
const MS_NODEV = 4

export function cacheTimeout (): number {
  const v = Number(process.env.CPFS_CACHE_TIMEOUT ?? 86400)
  return Number.isFinite(v) && v >= 0 ? v : 86400
}

/** Fail early, with the reason and the fix, when FUSE cannot work here. */
export function checkFuse (): void {
  if (!fs.existsSync('/dev/fuse')) {
    throw new CpfsError('NO_FUSE', '/dev/fuse is missing', 'load the fuse kernel module, or run the container with --device /dev/fuse --cap-add SYS_ADMIN')
  }
  loadNative()
}

function optionString (fd: number | null, opts: MountOptions): string {
  const o: string[] = []
  if (fd !== null) o.push(`fd=${fd}`, 'rootmode=40000', `user_id=${process.getuid?.() ?? 0}`, `group_id=${process.getgid?.() ?? 0}`)
  o.push('default_permissions')
  if (opts.allowOther) o.push('allow_other')
  if (opts.readOnly) o.push('ro')
  return o.join(',')
}

/** Mount a FUSE filesystem at dir; returns the /dev/fuse descriptor to serve it on. */
export function mountFuse (dir: string, opts: MountOptions): number {
  checkFuse()
  if (process.getuid?.() !== 0) {
    try {
      const fd = native.fusermountOpen(dir, `${optionString(null, opts)},nosuid,nodev,fsname=${opts.source ?? 'cpfs'},subtype=cpfs`)
      native.setNonBlocking(fd, true)
      return fd
    } catch (err: any) {
      throw new CpfsError('MOUNT_FAILED', `cannot mount ${dir}: ${err.code === 'ENOENT' ? 'fusermount3 is not installed' : err.message}`, 'run as root, or install the fuse3 package (it provides fusermount3)', { cause: err })
    }
  }
  const fd = fs.openSync('/dev/fuse', fs.constants.O_RDWR | fs.constants.O_NONBLOCK)
  try {
    native.fuseMount(fd, dir, opts.source ?? 'cpfs', 'fuse.cpfs', MS_NOSUID | MS_NODEV | (opts.readOnly ? MS_RDONLY : 0), optionString(fd, opts))
  } catch (err: any) {
    fs.closeSync(fd)
    if (err.code === 'EBUSY') throw new CpfsError('ALREADY_MOUNTED', `${dir} is already a mount point`, `run cpfs unmount ${dir} first`)
    throw new CpfsError('MOUNT_FAILED', `cannot mount ${dir}: ${err.message}`, 'check /dev/fuse and that you are root (or have fusermount3); see native-bindings.md', { cause: err })
  }
  return fd
}

/** CPFS_READAHEAD_KB: the mount's readahead window (default 4096; 0 leaves the kernel's). */
export function readaheadKb (): number {
  const v = Number(process.env.CPFS_READAHEAD_KB ?? 4096)
  return Number.isInteger(v) && v >= 0 ? v : 4096
}

/**
 * Widen the mount's readahead window (its bdi's read_ahead_kb) to `kb`, once INIT is done (the
 * kernel caps it at INIT to the 128 KiB it offers). A sequential read of a big file then
 * arrives as 1 MiB READs several at a time instead of one 128–256 KiB READ per round trip:
 * measured, a cold `cat` of 256 MiB took 0.76–0.84 s at 128 KiB, 0.51–0.56 s at 1 MiB and
 * 0.32 s at 4 MiB. The kernel grows the window only for sequential reads, so random reads
 * pay nothing. Only root may write it; elsewhere the kernel's default stays. The device comes
 * from /proc/self/mountinfo: a stat of the mount would be a request to this very thread.
 * Returns the window set, or null.
 */
export function widenReadahead (dir: string, kb = readaheadKb()): number | null {
  if (kb === 0) return null
  let dev: string | undefined
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = line.split(' ')
    if (f.length > 4 && unescapeMountPath(f[4]) === dir) dev = f[2] // the last one is on top
  }
  if (dev === undefined) return null
  try {
    fs.writeFileSync(`/sys/class/bdi/${dev}/read_ahead_kb`, String(kb))
    return kb
  } catch {
    return null // not root (or no sysfs): the kernel's window stays
  }
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMountPath (p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)))
}

function run (cmd: string, args: string[]): Promise<{ status: number | null, missing: boolean, output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => { output += d })
    child.stderr.on('data', (d) => { output += d })
    child.on('error', (err: any) => resolve({ status: null, missing: err.code === 'ENOENT', output: String(err.message) }))
    child.on('close', (status) => resolve({ status, missing: false, output }))
  })
}

/**
 * Unmount the FUSE filesystem at dir. `lazy` detaches even when busy (stale mounts only).
 * Asynchronous on purpose (a child process does it): the kernel may need the daemon's
 * JavaScript thread to answer requests while the unmount runs.
 */
export async function unmountPath (dir: string, lazy = false): Promise<void> {
  const isRoot = process.getuid?.() === 0
  const attempts: Array<[string, string[]]> = isRoot
    ? [['umount', lazy ? ['-l', dir] : [dir]], ['fusermount3', ['-u', ...(lazy ? ['-z'] : []), dir]], ['fusermount', ['-u', ...(lazy ? ['-z'] : []), dir]]]
    : [['fusermount3', ['-u', ...(lazy ? ['-z'] : []), dir]], ['fusermount', ['-u', ...(lazy ? ['-z'] : []), dir]]]
  let last = ''
  for (const [cmd, args] of attempts) {
    const r = await run(cmd, args)
    if (r.missing) continue
    if (r.status === 0) return
    last = r.output.trim()
    if (/busy/i.test(last)) {
      throw new CpfsError('MOUNT_BUSY', `${dir} is busy: a process still uses the mount`, 'close shells and programs that use it (see fuser -vm ' + dir + '), then try again')
    }
  }
  throw new CpfsError('UNMOUNT_FAILED', `cannot unmount ${dir}: ${last || 'no umount or fusermount3 found'}`, 'run as root, or install the fuse3 package for fusermount3')
}
