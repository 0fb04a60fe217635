// Housekeeping: prune keeps every kept turn rewindable byte-exact while the store shrinks;
// status --all lists every store (orphans too); forget deletes a history, safely.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, manifest, stopDaemon, workspace, type ManifestEntry } from './helpers.js'

const TREE = 'mkdir src && echo one > src/a && echo keep > keep'

if (fuseAvailable(t)) {
  t.test('prune --keep-turns: kept turns stay byte-exact, the store shrinks', async t => {
    const w = workspace(t, TREE)
    const views: Array<Record<string, ManifestEntry>> = []
    w.ok('mount', w.ws)
    const steps = [
      'head -c 3000000 /dev/urandom > big1 && echo two >> src/a',
      'rm big1 && head -c 3000000 /dev/urandom > big2 && mkdir d && echo x > d/x',
      'rm big2 && mv d e && chmod 600 keep',
      'echo three >> src/a && rm -rf src && mkdir src && echo fresh > src/b',
      'echo five > five && ln -s five link'
    ]
    for (const s of steps) {
      views.push(manifest(w.ws))
      w.run(s)
      w.ok('turn', w.ws, '--id', `id${views.length}`)
    }
    views.push(manifest(w.ws))
    w.ok('unmount', w.ws)
    const before = JSON.parse(w.ok('status', w.ws, '--json')).storeBytes
    const out = JSON.parse(w.ok('prune', w.ws, '--keep-turns', '3', '--json'))[0]
    t.equal(out.squashed, 3, 'turns 1-3 merged')
    t.equal(out.turns, 4, 'the original tree, the merged turns, and the 3 kept turns remain as 4 turns')
    const after = JSON.parse(w.ok('status', w.ws, '--json')).storeBytes
    t.ok(after < before - 4000000, `the store shrank from ${before} to ${after} bytes (the big files of dropped turns are gone)`)
    // Old turn 4, 5, 6 are now turns 2, 3, 4; turn 1 is still the original tree.
    for (const [now, then] of [[2, 4], [3, 5], [4, 6], [1, 1]]) {
      w.ok('rewind', String(now), w.ws)
      t.same(manifest(w.ws), views[then - 1], `rewind to turn ${now} (was ${then}) is byte-exact`)
      if (now === 4) {
        // Turn 4 is the head, still empty: the workspace was already at its start, so that
        // rewind changed nothing and left no redo step (issue 19's papercut).
        t.equal(w.cpfs('redo', w.ws).code, 1, 'a rewind to where the workspace is leaves nothing to redo')
        continue
      }
      w.ok('redo', w.ws)
      t.same(manifest(w.ws), views[5], 'and redo returns to the head')
    }
    // id4 named the turn opened after step 4, old turn 5 (now 3).
    w.ok('rewind', 'id4', w.ws)
    t.same(manifest(w.ws), views[4], 'external ids stay with their turns')
    w.ok('mount', w.ws)
    w.ok('rewind', '1', w.ws)
    t.same(manifest(w.ws), views[0], 'and live rewinds after a remount too')
  })

  t.test('prune refuses what would lose work; settings from config.json; --max-size', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    for (let i = 0; i < 4; i++) {
      w.run(`head -c 1000000 /dev/urandom > f${i} && rm -f f${i - 1}`)
      w.ok('turn', w.ws)
    }
    let r = w.cpfs('prune', w.ws, '--keep-turns', '1')
    t.equal(r.code, 1, 'refused while mounted')
    t.match(r.stderr, /is mounted \(run cpfs unmount/)
    await stopDaemon(w.home, w.ws)
    w.ok('mount', w.ws)
    w.run('echo more > more')
    w.ok('unmount', w.ws)
    fs.writeFileSync(join(w.home, 'config.json'), JSON.stringify({ prune: { keepTurns: 2 } }))
    const rep = JSON.parse(w.ok('prune', w.ws, '--json'))[0]
    t.equal(rep.turns, 3, 'config.json keepTurns: 2 applied')
    const sized = JSON.parse(w.ok('prune', w.ws, '--max-size', '1500K', '--json'))[0]
    t.ok(sized.after <= 1500 * 1024, `--max-size brought the store to ${sized.after} bytes`)
    w.ok('mount', w.ws)
    for (let i = 0; i < 3; i++) {
      w.run(`echo ${i} > t${i}`)
      w.ok('turn', w.ws)
    }
    w.ok('unmount', w.ws)
    const view = manifest(w.ws)
    const aged = JSON.parse(w.ok('prune', w.ws, '--older-than', '0', '--json'))[0]
    t.equal(aged.turns, 2, '--older-than 0 merges every sealed turn: the original tree and the head remain')
    w.ok('rewind', '2', w.ws)
    t.same(manifest(w.ws), view, 'the head view is intact')
    r = w.cpfs('prune', w.ws, '--keep-turns', 'lots')
    t.match(r.stderr, /^cpfs: --keep-turns must be a whole number/)
    t.equal(w.run('cat more'), 'more\n', 'the workspace is intact')
  })

  t.test('status --all and forget', async t => {
    const a = workspace(t, TREE)
    a.ok('mount', a.ws)
    a.run('echo x > x')
    const gone = join(a.home, '..', 'gone')
    fs.mkdirSync(gone)
    a.ok('mount', gone)
    a.ok('unmount', gone)
    fs.rmSync(gone, { recursive: true })
    const list = JSON.parse(a.ok('status', '--all', '--json'))
    t.same(list.map((s: any) => [s.workspace, s.mounted, s.orphaned]).sort(), [[a.ws, true, false], [gone, false, true]].sort(), 'every store, mounted and orphaned')
    t.ok(list.every((s: any) => s.bytes > 0 && s.lastUsed > 0), 'with sizes and last use')
    let r = a.cpfs('forget', a.ws, '--yes')
    t.match(r.stderr, /is mounted/, 'forget refuses while mounted')
    await stopDaemon(a.home, a.ws)
    r = a.cpfs('forget', a.ws, '--yes')
    t.match(r.stderr, /1 turn is not applied to the real directory; forgetting would lose it \(.*--force/, 'and while work is pending')
    r = a.cpfs('forget', a.ws)
    t.match(r.stderr, /needs confirmation \(pass --yes\)/, 'and without confirmation')
    a.ok('forget', a.ws, '--yes', '--force')
    t.match(a.cpfs('log', a.ws).stderr, /no cpfs history/, 'the history is gone')
    t.equal(a.run('ls'), 'keep\nsrc\n', 'the real directory is untouched')
    const orphans = JSON.parse(a.ok('prune', '--orphans', '--json'))
    t.same(orphans.map((o: any) => o.workspace), [gone], 'prune --orphans removes the history of deleted workspaces')
    t.same(JSON.parse(a.ok('status', '--all', '--json')), [], 'nothing left')
  })
}
