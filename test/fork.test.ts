// cpfs fork: the view at a turn written into a new directory, verified, with its own
// history; the source workspace and its history are untouched.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, manifest, workspace } from './helpers.js'

const TREE = 'mkdir -p src/lib && echo one > src/a && echo lib > src/lib/l && ln -s src/a link && chmod 750 src && head -c 200000 /dev/urandom > blob'

if (fuseAvailable(t)) {
  t.test('fork a mounted and an unmounted workspace', async t => {
    const w = workspace(t, TREE)
    const start = manifest(w.ws)
    w.ok('mount', w.ws)
    w.run('echo two > src/a && mv src/lib src/moved && echo new > new && printf X >> blob')
    const turn1End = manifest(w.ws)
    w.ok('turn', w.ws)
    w.run('rm -rf src')
    const sourceLog = w.ok('log', w.ws, '--json')
    const sourceView = manifest(w.ws)
    const dest1 = join(w.home, '..', 'fork1')
    const out = w.ok('fork', '1', dest1, w.ws)
    t.match(out, /forked turn 1 into .*fork1 \(its own history starts there\); applied \d+ operations, verified \d+ paths/)
    t.same(manifest(dest1), start, 'the fork of turn 1 equals the tree at the start of turn 1')
    t.equal(w.ok('log', w.ws, '--json'), sourceLog, 'the source history is untouched')
    t.same(manifest(w.ws), sourceView, 'and so is the mounted view')
    const log = JSON.parse(w.ok('log', dest1, '--json'))
    t.equal(log.length, 1, 'the fork has its own history')
    t.match(log[0].prompt, /forked from .* at turn 1/)
    t.equal(JSON.parse(w.ok('status', dest1, '--json')).pending, 0)
    w.ok('mount', dest1)
    w.run('echo fork-work > forked.txt', dest1)
    w.ok('unmount', dest1)
    t.equal(fs.readFileSync(join(dest1, 'forked.txt'), 'utf8'), 'fork-work\n', 'the fork is a workspace of its own')
    t.notOk(fs.existsSync(join(w.ws, 'forked.txt')), 'independent of the source')
    w.ok('unmount', w.ws)
    const dest2 = join(w.home, '..', 'fork2')
    fs.mkdirSync(dest2)
    w.ok('fork', '2', dest2, w.ws)
    t.same(manifest(dest2), turn1End, 'fork of an unmounted workspace into an empty directory')
    t.same(fs.readdirSync(join(w.home, '..')).filter(n => n.includes('cpfs-fork')), [], 'no temporary directory left')
  })

  t.test('fork: bad destinations change nothing', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const full = join(w.home, '..', 'full')
    fs.mkdirSync(full)
    fs.writeFileSync(join(full, 'keep'), 'keep')
    let r = w.cpfs('fork', '1', full, w.ws)
    t.equal(r.code, 1)
    t.match(r.stderr, /^cpfs: .*full exists and is not an empty directory \(/)
    t.same(fs.readdirSync(full), ['keep'], 'a non-empty destination is untouched')
    r = w.cpfs('fork', '1', join(w.ws, 'inside'), w.ws)
    t.match(r.stderr, /overlaps the workspace/)
    r = w.cpfs('fork', '1', join(w.home, '..', 'no', 'parent'), w.ws)
    t.match(r.stderr, /does not exist \(create the parent/)
    // An earlier directory at DEST's path left its history behind, and DEST does not exist.
    const reused = join(w.home, '..', 'reused')
    fs.mkdirSync(reused)
    w.ok('mount', reused)
    w.ok('unmount', reused)
    fs.rmSync(reused, { recursive: true })
    r = w.cpfs('fork', '1', reused, w.ws)
    t.match(r.stderr, /already has cpfs history from an earlier directory at that path/, 'a stale history at DEST refuses')
    t.notOk(fs.existsSync(reused), 'before anything was written')
    r = w.cpfs('fork', '5', join(w.home, '..', 'x'), w.ws)
    t.match(r.stderr, /turn 5 does not exist/)
    t.notOk(fs.existsSync(join(w.home, '..', 'x')))
  })
}
