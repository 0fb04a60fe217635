// Directory handles (src/real/handles.ts), which keep a plan over a deep tree at a bounded number
// of system calls per path (docs/decisions.md, "Plans of any size"): on a real tree deeper than
// PATH_MAX, in every order, with a symlink planted in the middle. (The other structures of that
// section have their own tests: paths/paths, paths/path-map, real/base, plans/journal.)
import t from 'tap'
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join as pjoin } from 'node:path'
import { parentOf } from '../../../src/paths/paths.js'
import { DirHandles, failedAt } from '../../../src/real/handles.js'
import { rng } from '../helpers.js'

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
