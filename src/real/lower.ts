// The lower: what the workspace held before cpfs first changed it. It is the real
// directory, read through a directory handle opened before mounting, except where a plan
// has since changed a real path: the plan captured the original state first into the base
// map, which therefore wins. So lower = base ⊕ real, and it never changes while history
// exists — which is why layer entries may point at lower content (`src`, `redirect`).
import { isUtf8 } from 'node:buffer'
import * as fs from 'node:fs'
import { fsError } from '../errors.js'
import { loadNative, native } from '../native/index.js'
import { CHUNK_SIZE, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG, srcBytes, type Entry, type FileEntry, type Kind, type LiveEntry } from '../store/entries.js'
import type { ChunkStore } from '../store/chunks.js'
import { isWithin, join, parentOf } from '../paths/paths.js'
import { BaseMap } from './base.js'
import type { LowerStat } from './stat.js'
import { DirHandles, FileHandles } from './handles.js'
import { openFile, readDirNoFollow } from './nofollow.js'

const STAT = new Float64Array(16)

/** lstat into out; false when nothing is there — a name longer than the filesystem takes names nothing. */
function lstatOrNull (path: string, out: Float64Array): boolean {
  try {
    return loadNative().lstatInto(path, out)
  } catch (err: any) {
    if (err?.code === 'ENAMETOOLONG') return false
    throw err
  }
}

/** Entries of the real-stat cache before it starts over (~200 bytes each). */
const CACHE_MAX = 500_000

export type { LowerStat } from './stat.js'

export { failedAt } from './handles.js'

/** The kind of node an lstat mode describes: special files ('n') are FIFOs, sockets and devices. */
export function kindOf (mode: number): Kind {
  const fmt = mode & S_IFMT
  return fmt === S_IFREG ? 'f' : fmt === S_IFDIR ? 'd' : fmt === S_IFLNK ? 'l' : 'n'
}

/** Extended attributes of a real path (never following a final symlink); undefined when none. */
export function realXattrs (path: string): Record<string, Buffer> | undefined {
  let names: string[]
  try {
    names = native.llistxattr(path)
  } catch (err: any) {
    if (err.code === 'ENOTSUP' || err.code === 'EOPNOTSUPP' || err.code === 'ENOENT') return undefined
    throw err
  }
  if (names.length === 0) return undefined
  const out: Record<string, Buffer> = {}
  for (const name of names) {
    const v = native.lgetxattr(path, name)
    if (v) out[name] = v
  }
  return Object.keys(out).length ? out : undefined
}

/**
 * The entries of a real directory that cpfs can hold. Names are bytes; cpfs keeps them as
 * UTF-8 strings, so an entry whose name is not valid UTF-8 is left out everywhere: never shown
 * in the mount, never recorded, never removed by a plan (creating one in the mount fails with
 * EILSEQ, docs/decisions.md).
 */
export function realDirents (path: string): fs.Dirent[] {
  return readDirNoFollow(path, dir => {
    const ents = fs.readdirSync(dir, { withFileTypes: true })
    // A name that was not UTF-8 comes back with U+FFFD in it: only then look at the bytes.
    if (!ents.some(d => d.name.includes('\uFFFD'))) return ents
    const raw = fs.readdirSync(dir, { withFileTypes: true, encoding: 'buffer' }) as unknown as Array<fs.Dirent & { name: any }>
    return raw.filter(d => isUtf8(d.name)).map(d => Object.assign(d, { name: d.name.toString() })) as fs.Dirent[]
  })
}

/** The names of realDirents. */
export function realNames (path: string): string[] {
  return realDirents(path).map(d => d.name)
}

export class Lower {
  readonly dirFd: number
  /** Base entries by path (read them here; setBase changes them, keeping the indexes right). */
  readonly base: Map<string, Entry>
  private readonly based: BaseMap
  private readonly chunks: ChunkStore
  private readonly files = new FileHandles()
  /** O_PATH handles of real directories, opened without following symlinks (dirHandle). */
  private readonly dirFds: DirHandles
  /**
   * While mounted, the real directory is the read-only lower layer: its stats and extended
   * attributes are cached (the kernel caches the attributes it got from cpfs for as long), so
   * an untouched path costs one lstat per mount, not one per request. Plans (which change real
   * paths) run with the cache off, and every path they touch is forgotten.
   */
  private statCache: Map<string, LowerStat | null> | null = null
  private xattrCache: Map<string, Record<string, Buffer> | undefined> | null = null

  constructor (dirFd: number, base: Map<string, Entry>, chunks: ChunkStore) {
    this.dirFd = dirFd
    this.dirFds = new DirHandles(dirFd)
    this.based = new BaseMap(base)
    this.base = base
    this.chunks = chunks
  }

  /**
   * Path of a real file as the daemon (which holds the handle) can reach it: its name in a
   * handle of its parent directory, opened below the workspace's handle without following any
   * symlink (native.openDirBeneath). Only the last component is looked up by name, so every
   * caller uses a call that does not follow a final symlink (lstat, O_NOFOLLOW, l*xattr,
   * rename, unlink) or works on a descriptor it opened so (noFollowFd). An agent that swaps a
   * directory for a symlink cannot lead a read or a plan out of the workspace: the parent is
   * the directory that was there when it was opened, or the walk fails (ELOOP, ENOTDIR).
   */
  realPath (p: string): string {
    try {
      return this.reach(p)
    } catch (err: any) {
      if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR' && err.code !== 'ELOOP') throw err
      // No directory leads there without a symlink: a path that names nothing, so that a
      // look finds nothing and a change fails with ENOENT (no process can make fd -1).
      return `/proc/self/fd/-1/${p.slice(p.lastIndexOf('/') + 1)}`
    }
  }

  /** realPath, but throwing ENOENT, ENOTDIR or ELOOP when p's directory cannot be reached. */
  reach (p: string): string {
    if (p === '/') return `/proc/self/fd/${this.dirFd}/.`
    return `/proc/self/fd/${this.dirHandle(parentOf(p))}/${p.slice(p.lastIndexOf('/') + 1)}`
  }

  /**
   * An O_PATH handle of real directory dir (never through a symlink), kept for reuse
   * (handles.ts): a deep tree costs one component per new directory. Throws ENOENT, ENOTDIR
   * or ELOOP (a symlink or a file stands where a directory should), with `at` (failedAt)
   * naming the directory on the way that could not be opened.
   */
  dirHandle (dir: string): number {
    return this.dirFds.get(dir)
  }

  /**
   * realPath, or null when a long path's parent is not there (a directory made in the mount
   * has no real counterpart yet): for a lookup that is "nothing here", not an error.
   */
  private reachable (p: string): string | null {
    // No real path holds a NUL (the overlay's own temporary names do: rename exchange).
    if (p.includes('\0')) return null
    try {
      return this.reach(p)
    } catch (err: any) {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR' || err.code === 'ELOOP') return null
      throw err
    }
  }

  private realXattrsOf (p: string): Record<string, Buffer> | undefined {
    const real = this.reachable(p)
    return real === null ? undefined : realXattrs(real)
  }

  setBase (p: string, e: Entry): void {
    this.based.set(p, e)
  }

  /** The base entry covering p: itself, or an ancestor that hides it (O(1) lookups: base.ts). */
  private baseCover (p: string): Entry | 'hidden' | undefined {
    return this.based.cover(p)
  }

  /** True when p's lower state is whatever the real directory holds now. */
  servedByReal (p: string): boolean {
    return this.baseCover(p) === undefined
  }

  stat (p: string): LowerStat | LiveEntry | null {
    const cover = this.baseCover(p)
    if (cover === 'hidden') return null
    if (cover) return cover.kind === 'w' || cover.kind === 'h' ? null : cover
    return this.realStat(p)
  }

  /** Cache real stats and extended attributes (on while mounted); switching clears the cache. */
  cacheReal (on: boolean): void {
    this.statCache = on ? new Map() : null
    this.xattrCache = on ? new Map() : null
  }

  /**
   * The real stat the mount has answered with for p (undefined when it has not looked at p, or
   * no longer remembers): what the processes using the mount were shown, whatever the real
   * file is now.
   */
  servedStat (p: string): LowerStat | null | undefined {
    return this.statCache?.get(p)
  }

  realStat (p: string): LowerStat | null {
    const cache = this.statCache
    if (cache === null) return this.lstat(p)
    let st = cache.get(p)
    if (st === undefined) {
      if (cache.size >= CACHE_MAX) cache.clear()
      st = this.lstat(p)
      cache.set(p, st === null ? null : Object.freeze(st))
    }
    return st
  }

  private lstat (p: string): LowerStat | null {
    // The hottest system call of the mount (every lookup of an untouched path): a plain lstat
    // into a reused array, no fs.Stats object and no BigInt.
    const o = STAT
    const real = this.reachable(p)
    if (real === null || !lstatOrNull(real, o)) return null
    const mode = o[0]
    return {
      kind: kindOf(mode),
      mode,
      uid: o[1],
      gid: o[2],
      size: o[3],
      atime: o[8] * 1000 + Math.floor(o[9] / 1e6),
      mtime: o[10] * 1000 + Math.floor(o[11] / 1e6),
      ctime: o[12] * 1000 + Math.floor(o[13] / 1e6),
      atimeNs: o[9] % 1e6,
      mtimeNs: o[11] % 1e6,
      ctimeNs: o[13] % 1e6,
      ino: o[6],
      nlink: o[5],
      blocks: o[4],
      rdev: o[7]
    }
  }

  /** Extended attributes of lower path p. */
  xattrs (p: string): Record<string, Buffer> | undefined {
    const cover = this.baseCover(p)
    if (cover === 'hidden') return undefined
    if (cover) return cover.kind === 'w' || cover.kind === 'h' ? undefined : cover.xattrs
    const cache = this.xattrCache
    if (cache === null) return this.realXattrsOf(p)
    if (cache.has(p)) return cache.get(p)
    if (cache.size >= CACHE_MAX) cache.clear()
    const x = this.realXattrsOf(p)
    cache.set(p, x)
    return x
  }

  /**
   * How many subdirectories lower directory p holds (`st`: its real lstat, when the caller has
   * it). The real st_nlink says it without a listing; a filesystem whose directories report 1
   * (btrfs) is listed. Base entries below p correct the count.
   */
  subdirs (p: string, st: LowerStat | null = null): number {
    const cover = this.baseCover(p)
    if (cover === 'hidden' || (cover && cover.kind !== 'd')) return 0
    let n = 0
    const real = st ?? this.realStat(p)
    if (real && real.kind === 'd') {
      if (real.nlink >= 2) n = real.nlink - 2
      else {
        const path = this.reachable(p)
        try {
          if (path !== null) for (const d of realDirents(path)) if (d.isDirectory()) n++
        } catch {}
      }
    }
    const fromBase = this.based.children(p)
    if (fromBase) {
      for (const name of fromBase) {
        const q = join(p, name)
        n += (this.base.get(q)?.kind === 'd' ? 1 : 0) - (this.realStat(q)?.kind === 'd' ? 1 : 0)
      }
    }
    return Math.max(0, n)
  }

  /** Names in lower directory p (union of base and real, minus base whiteouts). */
  readdir (p: string): string[] {
    const cover = this.baseCover(p)
    if (cover === 'hidden' || (cover && cover.kind !== 'd')) return []
    const names = new Set<string>()
    const realIsDir = !cover || cover.kind === 'd'
    if (realIsDir) {
      let real: fs.Dirent[] = []
      try {
        real = realDirents(this.realPath(p))
      } catch (err: any) {
        if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw err
      }
      for (const d of real) names.add(d.name)
    }
    const fromBase = this.based.children(p)
    if (fromBase) {
      for (const n of fromBase) {
        const e = this.base.get(join(p, n))
        if (!e) continue
        if (e.kind === 'w') names.delete(n)
        else names.add(n)
      }
    }
    // Real children hidden by a base entry of another type are handled by stat() at lookup.
    return [...names]
  }

  /** Does the real directory behind lower path p hold an entry cpfs cannot show (realDirents)? */
  holdsUnshown (p: string): boolean {
    if (!this.servedByReal(p)) return false
    const real = this.reachable(p)
    if (real === null) return false
    try {
      return readDirNoFollow(real, dir => (fs.readdirSync(dir, { encoding: 'buffer' }) as Buffer[]).some(n => !isUtf8(n)))
    } catch {
      return false
    }
  }

  readlink (p: string): string {
    const cover = this.baseCover(p)
    if (cover && cover !== 'hidden' && cover.kind === 'l') return cover.target
    const target = fs.readlinkSync(this.realPath(p), { encoding: 'buffer' })
    // A target that is not UTF-8 could not be kept as it is (realDirents): never copied, never shown changed.
    if (!isUtf8(target)) throw fsError('EILSEQ', p, 'a symlink target that is not UTF-8 is not supported')
    return target.toString()
  }

  /** Read lower file bytes of p into buf; returns bytes read. */
  read (p: string, buf: Buffer, offset: number, length: number, position: number): number {
    const cover = this.baseCover(p)
    if (cover && cover !== 'hidden' && cover.kind === 'f') return readEntry(cover, this.chunks, buf, offset, length, position, null)
    const fd = this.files.of(p, () => {
      try {
        return openFile(this.realPath(p), fs.constants.O_RDONLY)
      } catch (err: any) {
        // A FIFO, socket or device (or a symlink, ELOOP) put where the file was, from outside:
        // never opened in a way that could block the daemon, never followed.
        if (err.code === 'REAL_CHANGED' || err.code === 'ELOOP') throw fsError('EIO', p, err.message)
        throw err
      }
    })
    let done = 0
    while (done < length) {
      const n = fs.readSync(fd, buf, offset + done, length - done, position + done)
      if (n === 0) break
      done += n
    }
    return done
  }

  closeFds (): void {
    this.files.closeAll()
    this.dirFds.closeAll()
  }

  /**
   * Forget cached real-file handles and stats at p and, with `below`, everything under it
   * (after a plan changed the real directory). A plan forgets each path it touched, one at a
   * time (`below` false: no scan of every kept handle per operation); a directory it replaced
   * or removed is forgotten with all below it when that happens.
   */
  forget (p: string, below = true): void {
    if (!below) {
      this.statCache?.delete(p)
      this.xattrCache?.delete(p)
      this.files.forget(p, false)
      this.dirFds.forget(p, false)
      return
    }
    for (const map of [this.statCache, this.xattrCache]) {
      if (!map) continue
      for (const q of map.keys()) if (isWithin(q, p)) map.delete(q)
    }
    this.files.forget(p, true)
    this.dirFds.forget(p, true)
  }
}

/** Reads bytes of a lower file: (buf, offset in buf, length, position in the file) → bytes read. */
export type SrcRead = (b: Buffer, off: number, len: number, pos: number) => number

/**
 * Read [position, position+length) of a file entry into buf at offset, up to its size. Each
 * chunk comes from `dirty` (unflushed writes), the chunk store, the lower file `src` (through
 * srcRead, below srcSize), or is zeros (holes, and bytes past a short chunk).
 */
export function readEntry (
  e: FileEntry,
  store: ChunkStore,
  buf: Buffer,
  offset: number,
  length: number,
  position: number,
  srcRead: SrcRead | null,
  dirty?: Map<number, Buffer>
): number {
  if (position >= e.size) return 0
  const end = Math.min(e.size, position + length)
  const srcEnd = srcBytes(e)
  let pos = position
  while (pos < end) {
    const idx = Math.floor(pos / CHUNK_SIZE)
    const within = pos - idx * CHUNK_SIZE
    const n = Math.min(CHUNK_SIZE - within, end - pos)
    const out = offset + (pos - position)
    const d = dirty?.get(idx)
    const ref = d ? undefined : e.chunks.get(idx)
    if (d || ref) {
      const copy = (data: Buffer): void => {
        const avail = Math.max(0, Math.min(n, data.length - within))
        if (avail > 0) data.copy(buf, out, within, within + avail)
        if (avail < n) buf.fill(0, out + avail, out + n)
      }
      if (d) copy(d)
      else store.withBytes(ref!, copy)
    } else if (ref === undefined && pos < srcEnd && srcRead) {
      const want = Math.min(n, srcEnd - pos)
      const got = srcRead(buf, out, want, pos)
      if (got < n) buf.fill(0, out + got, out + n)
    } else {
      buf.fill(0, out, out + n)
    }
    pos += n
  }
  return end - position
}
