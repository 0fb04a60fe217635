// cpfs restore: single files and directories back to their state at the start of a turn —
// mounted as a new change in the head turn, not mounted through a verified plan.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CLI, fuseAvailable, manifest, workspace } from './helpers.js'

const TREE = 'mkdir -p src/lib docs && echo one > src/a && echo lib > src/lib/l && echo top > top && echo d > docs/d && chmod 600 src/a'

if (fuseAvailable(t)) {
  t.test('mounted: restore files and directories as a change in the head turn', async t => {
    const w = workspace(t, TREE)
    const start = manifest(w.ws)
    w.ok('mount', w.ws)
    w.run('echo two > src/a && chmod 644 src/a && rm -rf src/lib && echo new > src/new && mv docs documents')
    w.ok('turn', w.ws)
    w.run('echo three > top && rm -rf src')
    // Relative paths from inside the workspace; the workspace is found from them.
    w.run(`node ${CLI} restore 1 src/lib top src/a`)
    t.equal(w.run('cat src/lib/l top src/a'), 'lib\ntop\none\n', 'restored content, with missing parents recreated')
    t.equal(fs.statSync(join(w.ws, 'src/a')).mode & 0o777, 0o600, 'restored mode')
    t.notOk(fs.existsSync(join(w.ws, 'src/new')), 'siblings that were not restored stay as they were (gone)')
    w.ok('restore', '2', join(w.ws, 'src'), w.ws)
    t.equal(w.run('ls src | sort | tr "\\n" " "'), 'a new ', 'a whole directory back to turn 2')
    t.equal(w.run('cat src/a'), 'two\n')
    w.ok('restore', '1', join(w.ws, 'documents'), join(w.ws, 'docs'), w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'documents')), 'restoring a path that did not exist at turn 1 removes it')
    t.equal(w.run('cat docs/d'), 'd\n', 'and the moved directory is back under its old name')
    t.match(w.ok('diff', w.ws, '--stat'), /paths? changed/, 'the restore is a change in the head turn')
    w.ok('undo', w.ws)
    t.equal(w.run('cat src/a top'), 'two\ntop\n', 'undo takes the restore back with the rest of the turn')
    w.ok('rewind', '1', w.ws)
    w.ok('restore', '1', join(w.ws, 'src'), join(w.ws, 'top'), join(w.ws, 'docs'), w.ws)
    t.same(manifest(w.ws), start, 'restoring everything to turn 1 equals the original tree')
  })

  t.test('not mounted: restore through a verified plan; drift refuses and changes nothing', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo two > src/a && rm -rf src/lib && echo new > new')
    w.ok('turn', w.ws)
    w.ok('unmount', w.ws)
    const out = w.ok('restore', '1', join(w.ws, 'src'), w.ws)
    t.match(out, /restored src to the start of turn 1; applied \d+ operations, verified \d+ paths/, 'reports the verified plan')
    t.equal(w.run('cat src/a src/lib/l'), 'one\nlib\n', 'the real directory has turn 1\'s src')
    t.equal(w.run('cat new'), 'new\n', 'and nothing else changed')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).pending, 0, 'nothing pending: history and real directory agree')
    fs.writeFileSync(join(w.ws, 'new'), 'edited outside\n')
    const before = manifest(w.ws)
    const logBefore = w.ok('log', w.ws, '--json')
    const r = w.cpfs('restore', '1', join(w.ws, 'new'), w.ws)
    t.equal(r.code, 1, 'drift refuses')
    t.match(r.stderr, /changed outside cpfs: new/)
    t.same(manifest(w.ws), before, 'nothing changed')
    t.equal(w.ok('log', w.ws, '--json'), logBefore, 'and the refused restore left no change in the history')
    w.ok('restore', '1', join(w.ws, 'new'), w.ws, '--force')
    t.notOk(fs.existsSync(join(w.ws, 'new')), '--force restores (new did not exist at turn 1)')
  })

  t.test('restore: bad input', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    let r = w.cpfs('restore', '1', '/etc/passwd', w.ws)
    t.equal(r.code, 1)
    t.match(r.stderr, /^cpfs: \/etc\/passwd is outside the workspace/)
    r = w.cpfs('restore', '1', join(w.ws, 'nope'), w.ws)
    t.match(r.stderr, /^cpfs: nope exists neither now nor at the start of turn 1/)
    r = w.cpfs('restore', '9', join(w.ws, 'top'), w.ws)
    t.match(r.stderr, /^cpfs: turn 9 does not exist/)
    r = w.cpfs('restore', '1')
    t.match(r.stderr, /^cpfs: missing PATH/)
    t.equal(w.run('cat top'), 'top\n', 'nothing changed')
  })
}
