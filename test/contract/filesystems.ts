// The filesystems the contract runs against (test/contract.test.ts), behind one small
// interface of path operations whose failures carry an errno code (err.code), as node:fs's do:
//  - a plain directory: the reference. A case that fails there is a wrong case, not a bug.
//  - a cpfs mount: the daemon in its own process, driven through the kernel.
//  - the overlay in this process: Session and Overlay over a real lower directory and a real
//    store, without FUSE or root. Requests go to the overlay as the FUSE layer would send them
//    after the kernel's own checks; so a case here is about what the overlay itself must get
//    right (see docs/decisions.md, "The filesystem contract").
import * as fs from 'node:fs'
import { join } from 'node:path'
import { Session } from '../../src/session/session.js'

export interface Stat {
  type: 'f' | 'd' | 'l' | 'other'
  size: number
  /** Permission bits only. */
  perm: number
  nlink: number
  ino: number
}

/** What a case may do to a filesystem: paths are relative to its root ('a/b'). */
export interface Filesystem {
  readonly name: string
  writeFile (p: string, data: string | Buffer, mode?: number): Promise<void>
  appendFile (p: string, data: string | Buffer): Promise<void>
  /** Write `data` at `pos` without truncating (pwrite). */
  writeAt (p: string, data: string | Buffer, pos: number): Promise<void>
  readFile (p: string): Promise<Buffer>
  mkdir (p: string, mode?: number): Promise<void>
  rmdir (p: string): Promise<void>
  unlink (p: string): Promise<void>
  rename (from: string, to: string): Promise<void>
  symlink (target: string, p: string): Promise<void>
  readlink (p: string): Promise<string>
  link (existing: string, p: string): Promise<void>
  /** Names in the directory, sorted, without . and .. */
  readdir (p: string): Promise<string[]>
  /** lstat: a symlink is not followed. */
  stat (p: string): Promise<Stat>
  chmod (p: string, mode: number): Promise<void>
  truncate (p: string, size: number): Promise<void>
}

/** The tree every filesystem starts from (the lower layer of the two cpfs ones). */
export function seed (dir: string): void {
  fs.writeFileSync(join(dir, 'a.txt'), 'alpha\n')
  fs.mkdirSync(join(dir, 'd'))
  fs.writeFileSync(join(dir, 'd', 'x'), 'x'.repeat(100_000))
  fs.writeFileSync(join(dir, 'd', 'y'), 'why\n')
  fs.mkdirSync(join(dir, 'd', 'sub'))
  fs.writeFileSync(join(dir, 'd', 'sub', 'z'), 'zed\n')
  fs.mkdirSync(join(dir, 'empty'))
  fs.symlinkSync('a.txt', join(dir, 'link'))
  fs.chmodSync(join(dir, 'a.txt'), 0o644)
}

function typeOf (mode: number): Stat['type'] {
  const fmt = mode & 0o170000
  return fmt === 0o100000 ? 'f' : fmt === 0o040000 ? 'd' : fmt === 0o120000 ? 'l' : 'other'
}

/** Through node:fs at `root`: the plain directory, and a cpfs mount. */
export function throughKernel (name: string, root: string): Filesystem {
  const at = (p: string): string => join(root, p)
  return {
    name,
    writeFile: async (p, data, mode = 0o644) => fs.writeFileSync(at(p), data, { mode }),
    appendFile: async (p, data) => fs.appendFileSync(at(p), data),
    writeAt: async (p, data, pos) => {
      const fd = fs.openSync(at(p), 'r+')
      try { fs.writeSync(fd, Buffer.from(data), 0, Buffer.byteLength(data), pos) } finally { fs.closeSync(fd) }
    },
    readFile: async (p) => fs.readFileSync(at(p)),
    mkdir: async (p, mode = 0o755) => fs.mkdirSync(at(p), { mode }),
    rmdir: async (p) => fs.rmdirSync(at(p)),
    unlink: async (p) => fs.unlinkSync(at(p)),
    rename: async (a, b) => fs.renameSync(at(a), at(b)),
    symlink: async (target, p) => fs.symlinkSync(target, at(p)),
    readlink: async (p) => fs.readlinkSync(at(p)),
    link: async (a, b) => fs.linkSync(at(a), at(b)),
    readdir: async (p) => fs.readdirSync(at(p)).sort(),
    stat: async (p) => {
      const st = fs.lstatSync(at(p))
      return { type: typeOf(st.mode), size: st.size, perm: st.mode & 0o7777, nlink: st.nlink, ino: st.ino }
    },
    chmod: async (p, mode) => fs.chmodSync(at(p), mode),
    truncate: async (p, size) => fs.truncateSync(at(p), size)
  }
}

const O_RDONLY = fs.constants.O_RDONLY
const O_WRONLY = fs.constants.O_WRONLY

/** A Session opened in this process on `lower`, with its store at `store`; close() ends it. */
export async function openSession (lower: string, store: string): Promise<{ session: Session, close: () => Promise<void> }> {
  const dirFd = fs.openSync(lower, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  const session = await Session.open({ storePath: store, workspace: lower, dirFd, create: true })
  return {
    session,
    close: async () => {
      await session.close()
      fs.closeSync(dirFd)
    }
  }
}

/**
 * The overlay of `session`, rooted at its directory `root` ('c1'). Modes get the umask applied
 * first, as the kernel does before it sends a FUSE request.
 */
export function inProcess (session: Session, root: string, umask: number): Filesystem {
  const ov = session.overlay
  const at = (p: string): string => p === '' ? `/${root}` : `/${root}/${p}`
  const withHandle = async <T>(fh: number, fn: (fh: number) => T): Promise<T> => {
    try {
      return fn(fh)
    } finally {
      ov.release(fh)
    }
  }
  const writeAll = (fh: number, data: string | Buffer, pos: number): void => {
    const buf = Buffer.from(data)
    ov.write(fh, buf, buf.length, pos)
  }
  const exists = (p: string): boolean => {
    try {
      ov.getattr(at(p))
      return true
    } catch {
      return false
    }
  }
  return {
    name: 'overlay in process',
    writeFile: async (p, data, mode = 0o644) => {
      if (exists(p)) {
        ov.setattr(at(p), null, { size: 0 })
        await withHandle(ov.open(at(p), O_WRONLY), fh => writeAll(fh, data, 0))
      } else {
        await withHandle(ov.create(at(p), mode & ~umask), fh => writeAll(fh, data, 0))
      }
    },
    appendFile: async (p, data) => await withHandle(ov.open(at(p), O_WRONLY), fh => writeAll(fh, data, ov.getattr(at(p)).size)),
    writeAt: async (p, data, pos) => await withHandle(ov.open(at(p), O_WRONLY), fh => writeAll(fh, data, pos)),
    readFile: async (p) => await withHandle(ov.open(at(p), O_RDONLY), fh => {
      const size = ov.getattr(at(p)).size
      const buf = Buffer.alloc(size)
      let done = 0
      while (done < size) {
        const n = ov.read(fh, buf.subarray(done), size - done, done)
        if (n <= 0) break
        done += n
      }
      return buf.subarray(0, done)
    }),
    mkdir: async (p, mode = 0o755) => ov.mkdir(at(p), mode & ~umask),
    rmdir: async (p) => ov.rmdir(at(p)),
    unlink: async (p) => ov.unlink(at(p)),
    rename: async (a, b) => { ov.rename(at(a), at(b)) },
    symlink: async (target, p) => ov.symlink(target, at(p)),
    readlink: async (p) => ov.readlink(at(p)),
    link: async (a, b) => ov.link(at(a), at(b)),
    readdir: async (p) => ov.readdir(at(p)).filter(n => n !== '.' && n !== '..').sort(),
    stat: async (p) => {
      const a = ov.getattr(at(p))
      return { type: typeOf(a.mode), size: a.size, perm: a.mode & 0o7777, nlink: a.nlink, ino: a.ino }
    },
    chmod: async (p, mode) => { ov.setattr(at(p), null, { mode }) },
    truncate: async (p, size) => { ov.setattr(at(p), null, { size }) }
  }
}
