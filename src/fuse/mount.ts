// Mounting and unmounting through fuse-native (libfuse 2 high-level API, patched at install
// time: see native-bindings.md). Options that fuse-native has no field for travel inside the
// `fsname` string, which it joins verbatim into libfuse's -o list.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { CpfsError } from '../errors.js'

const require = createRequire(import.meta.url)

export interface MountOptions {
  allowOther?: boolean
  debug?: boolean
}

// Why each option:
//  nonempty           mount in place over the (non-empty) workspace
//  use_ino            report our inode numbers: git's index compares them
//  big_writes         128 KiB writes instead of 4 KiB (12x faster large writes)
//  entry_timeout,      the kernel caches lookups and attributes; every change made through the
//  attr_timeout       mount updates those caches itself, and the changes the daemon makes on its
//                     own (rewind, redo, restore) are followed by an explicit invalidation
//                     (fuse/invalidate.ts). CPFS_CACHE_TIMEOUT=0 turns caching off.
//  negative_timeout=0 a name that does not exist is never cached as missing
//  (no kernel_cache)  file pages are re-read on each open, so a rewound file never shows old data
//  default_permissions  the kernel checks modes like on ext4
export function cacheTimeout (): number {
  const v = Number(process.env.CPFS_CACHE_TIMEOUT ?? 60)
  return Number.isFinite(v) && v >= 0 ? v : 60
}

export function mountOptionString (opts: MountOptions): string {
  const t = cacheTimeout()
  const o = ['cpfs', 'subtype=cpfs', 'nonempty', 'use_ino', 'big_writes', 'max_write=131072',
    `entry_timeout=${t}`, `attr_timeout=${t}`, 'negative_timeout=0', 'default_permissions']
  if (opts.allowOther) o.push('allow_other')
  return o.join(',')
}

let FuseClass: any = null

export function loadFuse (): any {
  if (FuseClass) return FuseClass
  if (!existsSync('/dev/fuse')) {
    throw new CpfsError('NO_FUSE', '/dev/fuse is missing', 'load the fuse kernel module, or run the container with --device /dev/fuse --cap-add SYS_ADMIN')
  }
  try {
    FuseClass = require('fuse-native')
  } catch (err: any) {
    throw new CpfsError('NO_LIBFUSE', `cannot load fuse-native: ${String(err?.message).split('\n')[0]}`, 'run npm install again (it rebuilds the binding), or see native-bindings.md', { cause: err })
  }
  // fuse-native unmounts with `fusermount -uz`, which may be missing and hides a busy mount;
  // cpfs unmounts itself (unmountPath) before asking fuse-native to tear down its thread.
  FuseClass.unmount = (_mnt: string, cb: (err: Error | null) => void) => process.nextTick(cb, null)
  return FuseClass
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
 * Asynchronous on purpose: umount stats the mount point, and when the caller is the daemon
 * itself, its JavaScript thread must stay free to answer that request.
 */
export async function unmountPath (dir: string, lazy = false): Promise<void> {
  const isRoot = process.getuid?.() === 0
  const attempts: Array<[string, string[]]> = isRoot
    ? [['umount', lazy ? ['-l', dir] : [dir]], ['fusermount', ['-u', ...(lazy ? ['-z'] : []), dir]], ['fusermount3', ['-u', ...(lazy ? ['-z'] : []), dir]]]
    : [['fusermount', ['-u', ...(lazy ? ['-z'] : []), dir]], ['fusermount3', ['-u', ...(lazy ? ['-z'] : []), dir]]]
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
  throw new CpfsError('UNMOUNT_FAILED', `cannot unmount ${dir}: ${last || 'no umount or fusermount found'}`, 'run as root, or install the fuse package for fusermount')
}

export async function mountFuse (dir: string, ops: object, opts: MountOptions): Promise<{ close: () => Promise<void> }> {
  const Fuse = loadFuse()
  const fuse = new Fuse(dir, ops, {
    fsname: mountOptionString(opts),
    allowOther: false, // carried in the option string
    timeout: false, // no 15 s op timeout: an fsync of a large file must not fail with ETIMEDOUT
    debug: Boolean(opts.debug)
  })
  await new Promise<void>((resolve, reject) => {
    fuse.mount((err: Error | null) => {
      if (!err) return resolve()
      const msg = String(err.message)
      if (/in use/i.test(msg)) reject(new CpfsError('ALREADY_MOUNTED', `${dir} is already a mount point`, `run cpfs unmount ${dir} first`))
      else reject(new CpfsError('MOUNT_FAILED', `cannot mount ${dir}: ${msg}`, 'check /dev/fuse and that you are root or have fusermount; see native-bindings.md'))
    })
  })
  return {
    close: () => new Promise<void>((resolve) => {
      fuse.unmount(() => resolve())
    })
  }
}
