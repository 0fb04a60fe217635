// cpfs diff and cpfs rewind --dry-run: what a turn changed, and what a rewind would change,
// in the exact JSON shape agent hosts expect; the dry run must match what the rewind does.
// bin.dat starts with a NUL byte: random bytes alone have no NUL about 2% of the time (1000
// bytes), and a file without one counts as text, as in git (a CI run failed that way).
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, manifest, workspace } from './helpers.js'

const TREE = `mkdir -p src big && printf 'a\\nb\\nc\\n' > src/x.txt && for i in 1 2 3; do echo $i > big/f$i; done && { printf '\\0'; head -c 999 /dev/urandom; } > bin.dat && echo gone > old.txt`
const WORK = `printf 'a\\nB\\nc\\nd\\n' > src/x.txt && mv big moved && echo new > moved/f4 && rm moved/f1 && chmod 600 bin.dat && ln -s src s && rm old.txt && printf X >> bin.dat`

if (fuseAvailable(t)) {
  t.test('cpfs diff: text, binary, modes, symlinks, deletions, moves', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run(WORK)
    const changes = JSON.parse(w.ok('diff', w.ws, '--json'))
    const by = Object.fromEntries(changes.map((c: any) => [c.path, c]))
    t.match(by['/src/x.txt'], { change: 'modified', insertions: 2, deletions: 1, binary: false }, 'text change with line counts')
    t.match(by['/moved'], { change: 'moved', from: '/big' }, 'a directory move is one change')
    t.match(by['/moved/f4'], { change: 'added', insertions: 1 }, 'a file added inside the moved directory')
    t.match(by['/big/f1'], { change: 'deleted' }, 'a file deleted inside the moved directory')
    t.notOk(by['/moved/f2'], 'unchanged files that moved along are not listed')
    t.match(by['/bin.dat'], { change: 'modified', binary: true, oldSize: 1000, newSize: 1001, oldMode: 0o644, newMode: 0o600 }, 'binary change with sizes and mode')
    t.match(by['/s'], { change: 'added', kind: 'l', newTarget: 'src' }, 'symlink')
    t.match(by['/old.txt'], { change: 'deleted', deletions: 1 }, 'deletion')
    const text = w.ok('diff', w.ws)
    t.match(text, /--- a\/src\/x.txt\s*\n\+\+\+ b\/src\/x.txt[\s\S]*-b\n\+B\n c\n\+d/, 'a unified diff for text')
    t.match(text, /moved directory big\/ -> moved\//)
    t.match(text, /diff --git a\/bin.dat b\/bin.dat\n(old|index|new)[\s\S]*GIT binary patch\nliteral 1001\n/, 'a binary file as a git binary patch')
    t.match(text, /mode bin.dat 644 -> 600/, 'and the mode change git cannot carry, above the patch')
    const stat = w.ok('diff', w.ws, '--stat')
    t.match(stat, /7 paths changed, \+3 -3$/, '--stat sums the counts')
    w.ok('turn', w.ws)
    w.run('echo more >> src/x.txt')
    t.match(w.ok('diff', '1', w.ws, '--stat'), /M src\/x.txt {2}\+2 -1/, 'diff of an earlier turn')
    t.match(w.ok('diff', '1..2', w.ws, '--stat'), /M src\/x.txt {2}\+3 -1/, 'diff of a range')
    t.equal(w.ok('diff', '2', w.ws, '--stat').split('\n').length, 2, 'diff of the head turn so far')
    w.ok('unmount', w.ws)
    t.match(w.ok('diff', '1', w.ws, '--stat'), /R big\/ -> moved\//, 'diff works when not mounted')
  })

  t.test('an xattr-only change is a change: log counts it, diff names it', async t => {
    const w = workspace(t, 'echo tagged > tagged.txt && mkdir d')
    w.ok('mount', w.ws)
    w.run('setfattr -n user.color -v blue tagged.txt && setfattr -n user.k -v 1 d')
    t.match(w.ok('diff', w.ws, '--stat'), /x d\/\n x tagged.txt\n 2 paths changed, \+0 -0$/, '--stat marks both with x')
    t.match(w.ok('diff', w.ws), /extended attributes changed: tagged.txt/, 'the patch says what it cannot carry')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log.at(-1).changes.map((c: { path: string, change: string }) => [c.path, c.change]), [['/d', 'xattrs'], ['/tagged.txt', 'xattrs']], 'log --json lists them')
  })

  t.test('rewind --dry-run --json matches what the rewind then does, mounted and not', async t => {
    for (const mounted of [true, false]) {
      const w = workspace(t, TREE)
      const start = manifest(w.ws)
      w.ok('mount', w.ws)
      w.run(WORK)
      w.ok('turn', w.ws)
      w.run('echo later > later.txt')
      if (!mounted) w.ok('unmount', w.ws)
      const before = manifest(w.ws)
      const r = w.cpfs('rewind', '1', w.ws, '--dry-run', '--json')
      t.equal(r.code, 0, 'exit 0')
      const j = JSON.parse(r.stdout)
      t.same(Object.keys(j), ['canRewind', 'filesChanged', 'insertions', 'deletions'], 'exactly the documented keys')
      t.equal(j.canRewind, true)
      t.same(manifest(w.ws), before, 'the dry run changed nothing')
      w.ok('rewind', '1', w.ws)
      const after = manifest(w.ws)
      t.same(after, start, 'the rewind restored turn 1')
      const changed = new Set([...Object.keys(before), ...Object.keys(after)].filter(p => JSON.stringify(before[p]) !== JSON.stringify(after[p])))
      t.same([...j.filesChanged].sort(), [...changed].sort(), `${mounted ? 'mounted' : 'offline'}: filesChanged lists exactly the paths the rewind changed`)
      // x.txt +1 -2, big/f1..f3 +3, old.txt +1; moved/f2..f4 -3, later.txt -1 (bin.dat is binary)
      t.equal(j.insertions, 5, 'insertions: the lines the rewind puts back')
      t.equal(j.deletions, 6, 'deletions: the lines it removes')
    }
  })

  t.test('rewind --dry-run --json reports what blocks a rewind, with exit 0', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run(WORK)
    let r = w.cpfs('rewind', '7', w.ws, '--dry-run', '--json')
    t.equal(r.code, 0)
    t.same(JSON.parse(r.stdout), { canRewind: false, error: 'turn 7 does not exist (turns are 1..1)', filesChanged: [], insertions: 0, deletions: 0 })
    w.ok('unmount', w.ws)
    fs.appendFileSync(join(w.ws, 'src/x.txt'), 'edited outside\n')
    r = w.cpfs('rewind', '1', w.ws, '--dry-run', '--json')
    t.equal(r.code, 0)
    const j = JSON.parse(r.stdout)
    t.equal(j.canRewind, false, 'drift makes canRewind false')
    t.match(j.error, /src\/x.txt \(content changed\)/, 'and the error names the path')
    const human = w.cpfs('rewind', '1', w.ws, '--dry-run')
    t.equal(human.code, 1, 'the human dry run exits 1 when the rewind would be refused')
    t.match(human.stdout, /refused: .*src\/x.txt/)
  })
}
