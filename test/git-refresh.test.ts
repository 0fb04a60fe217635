// A read-only command never forces --force (issue 19, item 2): after `cpfs unmount` of a
// repository whose git ran in the mount, a plain `git status` rewrites .git/index (new stat
// data, the same staged content). Offline rewind, undo and redo must then work without
// --force, keep the refreshed version in the history, and still refuse a real change to what
// the index stages. Real git, real mounts.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, workspace, type Env } from './helpers.js'
import { sameStaged } from '../src/plans/git-index.js'

const GIT = 'git -c user.email=t@example.com -c user.name=t -c gc.auto=0 -c core.fsmonitor=false'

/** A repository whose two turns of work went through the mount and were applied by unmount. */
function repoWithTwoTurns (t: Test): Env {
  const w = workspace(t, `${GIT} init -q && echo a > a.txt && ${GIT} add a.txt && ${GIT} commit -qm init`)
  w.ok('mount', w.ws)
  w.run(`echo b > a.txt && ${GIT} add a.txt && ${GIT} commit -qm two`)
  w.ok('turn', w.ws)
  w.run(`echo c > c.txt && ${GIT} add c.txt`)
  const um = w.cpfs('unmount', w.ws)
  t.equal(um.code, 0, `unmount applies both turns: ${um.stderr.trim()}`)
  return w
}

/** `git status` outside cpfs, after a touch that makes its stat cache stale: it rewrites .git/index. */
function gitStatusRefresh (t: Test, w: Env): void {
  const before = fs.statSync(join(w.ws, '.git/index'))
  const staged = w.run(`${GIT} ls-files -s`)
  w.run(`touch -d "$(date -d '-2 hours' '+%F %T')" a.txt && ${GIT} status --porcelain >/dev/null`)
  const after = fs.statSync(join(w.ws, '.git/index'))
  t.ok(after.ino !== before.ino || after.mtimeMs !== before.mtimeMs, 'git status rewrote .git/index')
  t.equal(w.run(`${GIT} ls-files -s`), staged, 'and stages the same things')
}

if (fuseAvailable(t)) {
  t.test('offline rewind after git status: no --force, the refreshed index kept in the history', async t => {
    const w = repoWithTwoTurns(t)
    gitStatusRefresh(t, w)
    const r = w.cpfs('rewind', '2', w.ws)
    t.equal(r.code, 0, `rewind 2 works without --force: ${r.stderr.trim()}`)
    t.match(r.stderr, /\.git\/index was only refreshed outside cpfs .*kept as turn (\d+)/, 'and says it kept the refreshed index')
    t.notOk(fs.existsSync(join(w.ws, 'c.txt')), 'turn 2 is undone: c.txt is gone')
    t.equal(w.run(`${GIT} ls-files`).trim(), 'a.txt', 'git no longer stages c.txt')
    t.equal(w.run(`${GIT} log --format=%s`).trim(), 'two\ninit', 'the commit made in turn 1 is there')
    // The kept turn sat above turn 2, so the rewind moved it to redo with the turns above 2.
    const kept = Number(/kept as turn (\d+)/.exec(r.stderr)?.[1])
    const redo = w.cpfs('redo', w.ws)
    t.equal(redo.code, 0, `redo goes back: ${redo.stderr.trim()}`)
    t.equal(fs.readFileSync(join(w.ws, 'c.txt'), 'utf8'), 'c\n', 'c.txt is back')
    t.match(w.run(`${GIT} ls-files`), /c\.txt/, 'and staged again')
    const d = w.cpfs('diff', String(kept), w.ws, '--stat')
    t.equal(d.code, 0, `the kept turn is in the history: ${d.stderr.trim()}`)
    t.match(d.stdout, /M \.git\/index/, 'and holds the refreshed .git/index')
  })

  t.test('offline redo and undo after git status work without --force', async t => {
    const w = repoWithTwoTurns(t)
    t.equal(w.cpfs('undo', w.ws).code, 0, 'undo (nothing refreshed yet)')
    gitStatusRefresh(t, w)
    const redo = w.cpfs('redo', w.ws)
    t.equal(redo.code, 0, `redo after git status works without --force: ${redo.stderr.trim()}`)
    t.equal(fs.readFileSync(join(w.ws, 'c.txt'), 'utf8'), 'c\n', 'the redone turn is back')
    t.match(w.run(`${GIT} ls-files`), /c\.txt/, 'with the index it staged (the kept refresh is below it)')
    gitStatusRefresh(t, w)
    const undo = w.cpfs('undo', w.ws)
    t.equal(undo.code, 0, `undo after git status works without --force: ${undo.stderr.trim()}`)
    t.notOk(fs.existsSync(join(w.ws, 'c.txt')), 'the last turn is undone, not the kept refresh')
  })

  t.test('a real change to what the index stages is still drift: refused without --force', async t => {
    const w = repoWithTwoTurns(t)
    w.run(`echo outside > d.txt && ${GIT} add d.txt`)
    const r = w.cpfs('rewind', '2', w.ws)
    t.not(r.code, 0, 'rewind refuses')
    t.match(r.stderr, /changed outside cpfs: .*\.git\/index/, 'naming .git/index')
    t.ok(fs.existsSync(join(w.ws, 'c.txt')), 'nothing was changed')
  })
}

t.test('sameStaged: a refreshed index stages the same, an edited one does not (real git indexes)', async t => {
  const dir = fs.mkdtempSync('/tmp/cpfs-gitindex-')
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const { execSync } = await import('node:child_process')
  const sh = (s: string) => execSync(s, { cwd: dir, encoding: 'utf8' })
  for (const version of [2, 3, 4]) {
    sh(`rm -rf .git sub two three && ${GIT} init -q && ${GIT} config index.version ${version} && mkdir -p sub && echo 1 > sub/one && echo 2 > two && ${GIT} add . && ${GIT} commit -qm c`)
    const a = fs.readFileSync(join(dir, '.git/index'))
    sh(`touch -d '1 hour ago' two sub/one && ${GIT} status --porcelain >/dev/null`)
    const b = fs.readFileSync(join(dir, '.git/index'))
    t.notOk(a.equals(b), `version ${version}: the bytes changed`)
    t.ok(sameStaged(a, b), `version ${version}: the same staged content`)
    sh(`echo 3 > three && ${GIT} add three`)
    t.notOk(sameStaged(a, fs.readFileSync(join(dir, '.git/index'))), `version ${version}: a new staged file differs`)
    sh(`${GIT} rm -q --cached three && echo 22 > two && ${GIT} add two`)
    t.notOk(sameStaged(a, fs.readFileSync(join(dir, '.git/index'))), `version ${version}: a staged edit differs`)
  }
  t.notOk(sameStaged(Buffer.from('DIRC not an index'), Buffer.from('DIRC not an index')), 'not an index: never the same')
})
