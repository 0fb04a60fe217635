// What several unit tests share: a seeded random generator and random paths (so that a failure
// can be run again), temporary directories, and a real store or session in one.
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Lower } from '../../src/real/lower.js'
import { ChunkStore } from '../../src/store/chunks.js'
import { Store } from '../../src/store/store.js'
import type { Session } from '../../src/session/session.js'
import { inProcess, openSession, type Filesystem } from '../contract/filesystems.js'

/** What the helpers need of a test. */
export type Tap = { teardown: (fn: () => unknown) => void }

/** A small random generator with a seed, so that a failure can be run again. */
export function rng (seed: number): (n: number) => number {
  let s = seed >>> 0
  return n => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s % n
  }
}

/** A random path over a few names, up to `deep` levels, some of them long (past PathMap's key). */
export function randomPath (r: (n: number) => number, deep = 6): string {
  const names = ['a', 'b', 'd', 'é', '😀', 'x'.repeat(70), 'y'.repeat(70)]
  const parts: string[] = []
  for (let i = r(deep + 1); i > 0; i--) parts.push(names[r(names.length)])
  return '/' + parts.join('/')
}

/** A temporary directory, removed when the test ends. */
export function tmpDir (t: Tap, name: string): string {
  const dir = fs.mkdtempSync(join(tmpdir(), `cpfs-${name}-`))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A real store (LevelDB) in a temporary directory; closed (if still open) and removed when the test ends. */
export async function tmpStore (t: Tap, name: string): Promise<Store> {
  const dir = fs.mkdtempSync(join(tmpdir(), `cpfs-${name}-`))
  const store = await Store.open(join(dir, 'store'), { workspace: '/w', create: true })
  t.teardown(async () => {
    await store.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  return store
}

/**
 * A real lower: the tree (path → 'd' for a directory, else a file's content) made in a
 * temporary directory, read through a Lower with no base entries and a real store's chunks.
 */
export async function realLower (t: Tap, tree: Record<string, 'd' | string>): Promise<Lower> {
  const store = await tmpStore(t, 'lower-store')
  const dir = tmpDir(t, 'lower')
  for (const [p, v] of Object.entries(tree).sort(([a], [b]) => a.length - b.length)) {
    if (v === 'd') fs.mkdirSync(join(dir, p))
    else fs.writeFileSync(join(dir, p), v)
  }
  const fd = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
  const lower = new Lower(fd, new Map(), new ChunkStore(store))
  t.teardown(() => { lower.closeFds(); fs.closeSync(fd) })
  return lower
}

/** A Session in this process over a lower holding w/a.txt ("lower") and a store, both in dir; `fs` is its overlay at w/. */
export async function sessionIn (t: Tap, dir: string): Promise<{ s: Session, fs: Filesystem, dir: string, close: () => Promise<void> }> {
  const lower = join(dir, 'lower')
  if (!fs.existsSync(lower)) {
    fs.mkdirSync(join(lower, 'w'), { recursive: true })
    fs.writeFileSync(join(lower, 'w', 'a.txt'), 'lower')
  }
  const { session: s, close } = await openSession(lower, join(dir, 'store'))
  let closed = false
  const closeOnce = async (): Promise<void> => { if (!closed) { closed = true; await close() } }
  t.teardown(closeOnce)
  return { s, fs: inProcess(s, 'w', 0o022), dir, close: closeOnce }
}
