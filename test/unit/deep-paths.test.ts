// The structures that keep a plan over a deep tree at a bounded number of map operations and
// system calls per path (docs/decisions.md, "Plans of any size"): each is checked against the
// plain walk over every ancestor that it replaces, on random inputs, and the directory handles
// on a real tree deeper than PATH_MAX, in every order, with a symlink planted in the middle.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join as pjoin } from 'node:path'
import { ancestors, belowAny, isSafePath, parentOf } from '../../src/overlay/paths.js'
import { PathMap } from '../../src/overlay/path-map.js'
import { BaseMap } from '../../src/overlay/base.js'
import { DirHandles, failedAt } from '../../src/overlay/handles.js'
import { frontCode, frontDecode } from '../../src/plans/journal.js'
import { decode, encode } from '../../src/store/codec.js'
import type { Entry } from '../../src/store/entries.js'

/** A small random generator with a seed, so that a failure can be run again. */
function rng (seed: number): (n: number) => number {
  let s = seed >>> 0
  return n => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s % n
  }
}

/** A random path over a few names, up to `deep` levels, some of them long (past PathMap's key). */
function randomPath (r: (n: number) => number, deep = 6): string {
  const names = ['a', 'b', 'd', 'é', '😀', 'x'.repeat(70), 'y'.repeat(70)]
  const parts: string[] = []
  for (let i = r(deep + 1); i > 0; i--) parts.push(names[r(names.length)])
  return '/' + parts.join('/')
}

t.test('PathMap behaves as a Map of paths', async t => {
  const r = rng(1)
  const m = new PathMap<number>()
  const ref = new Map<string, number>()
  for (let i = 0; i < 20_000; i++) {
    const p = randomPath(r)
    const op = r(4)
    if (op === 0) t.equal(m.delete(p), ref.delete(p))
    else if (op === 1) { m.set(p, i); ref.set(p, i) } else t.equal(m.get(p), ref.get(p))
    if (i % 1000 === 0) t.equal(m.size, ref.size)
  }
  t.same(m.paths().sort(), [...ref.keys()].sort(), 'the same paths')
  m.clear()
  t.equal(m.size, 0)
})

t.test('BaseMap.cover is the walk over every ancestor', async t => {
  const naive = (base: Map<string, Entry>, p: string): Entry | 'hidden' | undefined => {
    if (base.size === 0) return undefined
    const e = base.get(p)
    if (e) return e
    for (const a of ancestors(p)) {
      const ea = base.get(a)
      if (ea && ea.kind !== 'd') return 'hidden'
    }
    return undefined
  }
  for (let seed = 1; seed <= 20; seed++) {
    const r = rng(seed)
    const entries = new Map<string, Entry>()
    const kinds: Entry[] = [{ kind: 'w' }, { kind: 'd', mode: 0o755, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, ino: 1 }, { kind: 'l', mode: 0o777, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, ino: 2, target: 'x' }]
    for (let i = r(4); i > 0; i--) entries.set(randomPath(r, 4), kinds[r(kinds.length)])
    const base = new BaseMap(entries)
    let bad = 0
    for (let i = 0; i < 3000; i++) {
      const p = randomPath(r, 5)
      // Entries change between looks, as captures do during a plan (directories and hiders alike).
      if (r(5) === 0) base.set(randomPath(r, 4), kinds[r(kinds.length)])
      if (base.cover(p) !== naive(entries, p)) bad++
      if (r(50) === 0) {
        const dir = parentOf(p)
        const want = [...entries.keys()].filter(q => q !== '/' && parentOf(q) === dir).map(q => q.slice(dir === '/' ? 1 : dir.length + 1)).sort()
        t.same([...(base.children(dir) ?? [])].sort(), want, 'children of ' + dir)
      }
    }
    t.equal(bad, 0, `seed ${seed}: every cover as the walk gives it`)
  }
})

t.test('belowAny is the walk over every ancestor', async t => {
  const r = rng(7)
  for (let k = 0; k < 20; k++) {
    const tops = new Set<string>()
    for (let i = r(5); i > 0; i--) tops.add(randomPath(r, 3))
    if (r(10) === 0) tops.add('/')
    const below = belowAny(tops)
    for (let i = 0; i < 500; i++) {
      const p = randomPath(r, 6)
      t.equal(below(p), [...ancestors(p)].some(a => tops.has(a)), p)
    }
  }
  // Growing while in use, as absorb does: paths by depth, each added after it is tested.
  const tops = new Set<string>()
  const below = belowAny(tops)
  const paths = [...new Set(Array.from({ length: 400 }, () => randomPath(r, 5)))].sort((a, b) => a.split('/').length - b.split('/').length)
  for (const p of paths) {
    t.equal(below(p), [...ancestors(p)].some(a => tops.has(a)), 'growing: ' + p)
    if (r(3) === 0) tops.add(p)
  }
})

t.test('isSafePath is the check by components', async t => {
  const naive = (p: string): boolean => {
    if (!p.startsWith('/') || p.includes('\0')) return false
    if (p === '/') return true
    if (p.endsWith('/')) return false
    return p.slice(1).split('/').every(part => part !== '' && part !== '.' && part !== '..')
  }
  const parts = ['', '.', '..', '...', '.a', 'a.', '..a', 'd']
  const all = (k: number): string[] => k === 0 ? [''] : all(k - 1).flatMap(q => parts.map(p => `${q}/${p}`))
  let n = 0
  for (let k = 0; k <= 4; k++) for (const q of all(k)) for (const p of [q, q + '/', q || '/', 'x' + q]) if (isSafePath(p) !== naive(p)) t.fail(JSON.stringify(p)); else n++
  t.ok(n > 15_000, `${n} paths`)
})

t.test('front-coded paths come back the same', async t => {
  const r = rng(3)
  for (let i = 0; i < 500; i++) {
    const paths = Array.from({ length: r(30) }, () => randomPath(r))
    // Through MessagePack: a lone half of a surrogate pair would not come back from UTF-8.
    t.same(frontDecode(decode(encode(frontCode(paths)))), paths)
  }
  let deep = ''
  const tree: string[] = []
  for (let i = 0; i < 3000; i++) tree.push(deep += '/d')
  const coded = encode(frontCode([...tree, ...tree.slice().reverse()]))
  t.ok(coded.length < 100_000, `a 3,000-level tree and back up: ${coded.length} bytes, not ${2 * 3000 * 3000} of whole paths`)
  // Journals in parts (front-coded) and whole (earlier versions): test/compat.test.ts, through a real crash.
})

t.test('directory handles reach every level of a tree deeper than PATH_MAX, in any order', async t => {
  const base = fs.mkdtempSync(pjoin(tmpdir(), 'cpfs-handles-'))
  t.teardown(() => { spawnSync('rm', ['-rf', base]) }) // rm walks with openat: deeper than PATH_MAX
  const DEPTH = 3000 // 6,000 characters: past PATH_MAX, and past several anchors
  const root = fs.openSync(base, 'r')
  const h = new DirHandles(root)
  const paths: string[] = []
  let p = ''
  for (let i = 0; i < DEPTH; i++) paths.push(p += '/d')
  // Made top-down through the handles, as the applier does.
  for (const q of paths) fs.mkdirSync(`/proc/self/fd/${h.get(parentOf(q))}/d`)
  const inoOf = (q: string): number => fs.statSync(`/proc/self/fd/${h.get(q)}`).ino
  // The inode of every level, walked with relative paths (the way a process would).
  const inos: number[] = []
  const cwd = process.cwd()
  process.chdir(base)
  for (let i = 0; i < DEPTH; i++) {
    process.chdir('d')
    inos.push(fs.statSync('.').ino)
  }
  process.chdir(cwd)
  const check = (order: number[], what: string) => {
    let bad = 0
    for (const i of order) if (inoOf(paths[i]) !== inos[i]) bad++
    t.equal(bad, 0, what)
  }
  const up = paths.map((_, i) => DEPTH - 1 - i)
  check(up, 'bottom-up (directory modes are set children first)')
  check(paths.map((_, i) => i), 'top-down')
  const r = rng(5)
  check(Array.from({ length: 2000 }, () => r(DEPTH)), 'in random order')
  const fresh = new DirHandles(root)
  t.equal(fs.statSync(`/proc/self/fd/${fresh.get(paths[DEPTH - 1])}`).ino, inos[DEPTH - 1], 'the bottom, with nothing kept')

  // A symlink planted half-way (an agent's rename): nothing below it is reached, and the
  // error names where the walk stopped.
  const mid = paths[1500]
  fs.renameSync(`/proc/self/fd/${h.get(parentOf(mid))}/d`, pjoin(base, 'moved'))
  fs.symlinkSync('/etc', `/proc/self/fd/${h.get(parentOf(mid))}/d`)
  for (const hs of [new DirHandles(root), new DirHandles(root)]) {
    for (const q of [paths[2999], paths[1501], mid]) {
      let err: any
      try { hs.get(q) } catch (e) { err = e }
      t.ok(err && (err.code === 'ELOOP' || err.code === 'ENOTDIR'), `${q.length / 2} levels: refused (${err?.code})`)
      t.equal(failedAt(err), mid, 'at the symlink')
    }
  }
  // Nothing that is absent is reached either, and the error names the first missing level.
  let err: any
  try { new DirHandles(root).get('/nothing' + paths[2000]) } catch (e) { err = e }
  t.equal(err?.code, 'ENOENT')
  t.equal(failedAt(err), '/nothing')
  h.closeAll()
  fs.closeSync(root)
})
