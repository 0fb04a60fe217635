// Owner, mode, extended attributes and times of paths in the real directory, as plans set
// them (applier.ts): always on the object that was checked, never through a symlink, never by
// opening a FIFO or a device (src/real/nofollow.ts says why).
import * as fs from 'node:fs'
import { AT_FDCWD, AT_SYMLINK_NOFOLLOW, native } from '../native/index.js'
import { kindOf } from '../real/lower.js'
import { NotExpected, withObject } from '../real/nofollow.js'
import type { RealState } from '../real/stat.js'
import { toSecNs } from '../store/entries.js'
import type { Attrs, Times } from './planner.js'

/**
 * Make the extended attributes of a real path exactly `want` (absent: none). Set last, after
 * content, owner and mode: writing or chowning a file clears security.capability, and a new
 * file in a directory with a default ACL starts with one it may not want.
 */
export function setXattrs (target: string | number, want: Record<string, Buffer> | undefined): void {
  // A path names the object itself (l* forms: realPath pins its directory); a number is an
  // open descriptor of it (f* forms), for files and directories the plan opened itself.
  const byFd = typeof target === 'number'
  const list = () => byFd ? native.flistxattr(target) : native.llistxattr(target)
  const get = (name: string) => byFd ? native.fgetxattr(target, name) : native.lgetxattr(target, name)
  const set = (name: string, value: Buffer) => byFd ? native.fsetxattr(target, name, value, 0) : native.lsetxattr(target, name, value, 0)
  const remove = (name: string) => byFd ? native.fremovexattr(target, name) : native.lremovexattr(target, name)
  let have: string[] = []
  try {
    have = list()
  } catch (err: any) {
    if (err.code !== 'ENOTSUP' && err.code !== 'EOPNOTSUPP') throw err
    if (want && Object.keys(want).length) throw err
    return
  }
  for (const name of have) if (!want || want[name] === undefined) remove(name)
  for (const [name, value] of Object.entries(want ?? {})) {
    const cur = have.includes(name) ? get(name) : null
    if (!cur || !cur.equals(value)) set(name, value)
  }
}

/** A written file's owner, mode, xattrs and times, in that order (chown clears set-ID bits, so chmod after it). */
export function setFileMeta (fd: number, op: { mode: number, atime: number, atimeNs: number, mtime: number, mtimeNs: number } & Attrs): void {
  if (canChown) fs.fchownSync(fd, op.uid, op.gid)
  fs.fchmodSync(fd, op.mode)
  setXattrs(fd, op.xattrs)
  const a = toSecNs(op.atime, op.atimeNs)
  const m = toSecNs(op.mtime, op.mtimeNs)
  native.futimens(fd, a.sec, a.nsec, m.sec, m.nsec)
}

/** Owner, mode, xattrs and times of an existing regular file (an anchor the plan made). */
export function setFileAttrs (path: string, op: { mode: number } & Times & Attrs): void {
  const st = fs.lstatSync(path)
  setMeta(path, { type: 'f', ino: st.ino }, op)
}

/**
 * chmod of a special node (FIFO, socket, device) at path: chmod(2) follows symlinks, so it is
 * applied to an O_PATH handle of the object found there, refused if that is not a node.
 */
export function chmodNode (path: string, mode: number): void {
  withObject(path, (st, obj) => {
    if (st.isFile() || st.isDirectory() || st.isSymbolicLink()) throw new NotExpected(path, 'a special file', st)
    fs.chmodSync(obj, mode)
  })
}

/** Set a path's times exactly (nanoseconds), never following a final symlink. */
export function setTimes (path: string, t: Partial<Times>): void {
  if (t.mtime === undefined || t.atime === undefined) return
  const a = toSecNs(t.atime, t.atimeNs ?? 0)
  const m = toSecNs(t.mtime, t.mtimeNs ?? 0)
  native.utimensat(AT_FDCWD, path, a.sec, a.nsec, m.sec, m.nsec, AT_SYMLINK_NOFOLLOW)
}

/**
 * Owner, mode, xattrs and times of an existing file, directory or special node, set on the
 * object that was checked: an O_PATH handle of what stands at path (never following a symlink,
 * never opening a FIFO or a device, whatever its permission bits), its type and inode compared
 * with what lstat saw, then chown and chmod through that handle (`/proc/self/fd/N` reaches
 * exactly that object); xattrs and times by name with calls that do not follow (the directory
 * is pinned by realPath). An object swapped in between is refused (REAL_CHANGED), never changed.
 */
export function setMeta (path: string, st: Pick<RealState, 'type' | 'ino'>, op: { mode: number } & Partial<Times> & Attrs): void {
  const found = withObject(path, (now, obj) => {
    if (now.isSymbolicLink() || now.ino !== st.ino || kindOf(now.mode) !== st.type) throw new NotExpected(path, `the ${st.type === 'd' ? 'directory' : 'file'} cpfs checked`, now)
    if (canChown) fs.chownSync(obj, op.uid, op.gid)
    fs.chmodSync(obj, op.mode) // after chown, which clears set-ID bits
    return true
  })
  if (!found) throw Object.assign(new Error(`ENOENT: ${path} is gone`), { code: 'ENOENT' })
  setXattrs(path, op.xattrs)
  setTimes(path, op)
}

// Ownership is applied where permitted: as root. An ordinary user's files are theirs anyway.
export const canChown = process.getuid?.() === 0
