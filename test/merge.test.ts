// Taking one turn back (cpfs revert) and bringing a branch's work in (cpfs merge), issue 23
// parts 4 and 5: real mounts, real tools, the daemon in its own process. What a user sees:
// every later turn stays; text changed elsewhere by a later turn merges line by line; a clash
// changes nothing and says where; hard links, directories with new contents and binary clashes
// are refused; bytes that are not UTF-8 come out exact; a git commit can be reverted.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, manifest, workspace, type Env } from './helpers.js'

const TEN = Array.from({ length: 10 }, (_, i) => `line ${i + 1}\n`).join('')
/** TEN with line n replaced by `to`. */
const edit = (text: string, n: number, to: string): string => text.split('\n').map((l, i) => i === n - 1 ? to : l).join('\n')

/** Bytes that are not UTF-8 (Latin-1), line by line: the revert must keep each one. */
const LATIN = ['caf\xe9', 'na\xefve', '\xff\xfe two', 'four', 'five', 'six', 'se\xa7en']
const latin = (lines: string[]): string => lines.map(l => l + '\n').join('')
const printfLatin = (lines: string[]): string => `printf '${[...Buffer.from(latin(lines), 'latin1')].map(b => '\\x' + b.toString(16).padStart(2, '0')).join('')}'`

const PROJECT = `printf '${TEN}' > a.txt && echo keep > keep.txt && echo old > old.txt && echo target > target.txt && ln -s keep.txt sym && mkdir lib && echo lib > lib/x.js`

interface Result { what: string, applied: boolean, turn: number | null, head: number, changes: Array<{ path: string, change: string }>, conflicts: Array<{ path: string, why: string, base: any, theirs: any, ours: any, merged?: string }> }

async function turns (w: Env): Promise<Array<{ turn: number, message: string | null }>> {
  return JSON.parse(await w.okAsync('log', '--json', w.ws))
}

/** A refusal: exit 1, one line on stderr, naming what and how to see more. */
function refused (t: Test, r: { code: number, stderr: string }, what: RegExp, label: string): void {
  t.equal(r.code, 1, `${label}: exit 1`)
  t.equal(r.stderr.trim().split('\n').length, 1, `${label}: one line (${r.stderr.trim()})`)
  t.match(r.stderr, what, label)
}

t.jobs = 3

if (fuseAvailable(t)) {
  t.test('revert a middle turn: its adds, edits, deletions, chmod and symlinks go back; later turns stay; Latin-1 bytes merge exactly', async t => {
    const w = workspace(t, `${PROJECT} && ${printfLatin(LATIN)} > l1.txt`)
    await w.okAsync('mount', w.ws)
    await w.okAsync('turn', w.ws) // turn 1 stays empty
    const start2 = manifest(w.ws)
    await w.runAsync(`sed -i 's/^line 2$/line 2 by turn 2/' a.txt && echo new > new.txt && rm old.txt && chmod 750 keep.txt
      ln -sfn target.txt sym && ln -s keep.txt newlink && mkdir -p made/deep && echo m > made/deep/m.txt && rm -r lib
      ${printfLatin(['caf\xe9 \xc0 turn 2', ...LATIN.slice(1)])} > l1.txt`)
    await w.okAsync('turn', w.ws, '-m', 'turn two')
    await w.runAsync(`sed -i 's/^line 9$/line 9 by turn 3/' a.txt && echo later > later.txt
      ${printfLatin(['caf\xe9 \xc0 turn 2', ...LATIN.slice(1, 5), 'six \xb5 turn 3', LATIN[6]])} > l1.txt`)
    await w.okAsync('turn', w.ws)
    await w.runAsync('echo pending > pending.txt') // the head's own work: sealed first, kept
    const dry = JSON.parse(await w.okAsync('revert', '2', '--dry-run', '--json', w.ws)) as Result
    t.same(dry.conflicts, [], 'no conflicts')
    t.same(dry.changes.map(c => `${c.change} ${c.path}`).sort(), ['added /lib', 'added /old.txt', 'deleted /made', 'deleted /new.txt', 'deleted /newlink', 'merged /a.txt', 'merged /l1.txt', 'mode /keep.txt', 'symlink /sym'], 'the dry run lists each change')
    t.equal((await turns(w)).length, 4, 'a dry run seals nothing')
    const out = await w.okAsync('revert', '2', w.ws)
    t.match(out, /^revert turn 2: turn 5 changed 9 paths .*; head is turn 6$/, `one line says what happened (${out})`)
    const now = manifest(w.ws)
    const expected = { ...start2, 'a.txt': now['a.txt'], 'l1.txt': now['l1.txt'], 'later.txt': now['later.txt'], 'pending.txt': now['pending.txt'] }
    t.same(manifest(w.ws), expected, 'the tree is the start of turn 2 plus what turns 3 and 4 did')
    t.equal(fs.readFileSync(join(w.ws, 'a.txt'), 'utf8'), edit(TEN, 9, 'line 9 by turn 3'), 'a.txt: turn 2\'s line is back, turn 3\'s stays (exact bytes)')
    const l1 = Buffer.from(latin([...LATIN.slice(0, 5), 'six \xb5 turn 3', LATIN[6]]), 'latin1')
    t.same([...fs.readFileSync(join(w.ws, 'l1.txt'))], [...l1], 'l1.txt, not UTF-8: merged byte for byte (latin1)')
    t.equal(fs.readlinkSync(join(w.ws, 'sym')), 'keep.txt', 'the symlink points where it did')
    t.equal(fs.statSync(join(w.ws, 'keep.txt')).mode & 0o777, 0o644, 'the mode is back')
    const log = await turns(w)
    t.equal(log.length, 6, 'turns 1-3 stay, the pending work is turn 4, the revert turn 5, the head 6')
    t.match(log[4], { turn: 5, message: 'revert turn 2' }, 'the revert is its own turn, labelled')
    t.match(log[3], { turn: 4 }, 'the pending work was sealed before')
    t.match(await w.okAsync('diff', '4', '--stat', w.ws), /pending\.txt/, 'as its own turn')
    await w.okAsync('unmount', w.ws)
    t.same(manifest(w.ws), expected, 'unmount applies it to the real directory')
    t.same([...fs.readFileSync(join(w.ws, 'l1.txt'))], [...l1], 'every byte')
  })

  t.test('the same lines changed later: a conflict, nothing changed; --dry-run --json shows each side and the markers', async t => {
    const w = workspace(t, `${PROJECT} && head -c 3000 /dev/urandom > blob.bin && cp blob.bin ../blob0`)
    await w.okAsync('mount', w.ws)
    await w.runAsync(`sed -i 's/^line 5$/five by turn 1/' a.txt && mkdir made && echo m > made/m.txt && echo one > linked && ln linked twin
      head -c 3000 /dev/urandom > blob.bin`)
    await w.okAsync('turn', w.ws)
    await w.runAsync(`sed -i 's/^five by turn 1$/five by turn 2/' a.txt && echo added later > made/later.txt && head -c 3000 /dev/urandom > blob.bin`)
    await w.okAsync('turn', w.ws)
    const before = manifest(w.ws)
    const log = await w.okAsync('log', '--json', w.ws)
    const r = await w.cpfsAsync('revert', '1', w.ws)
    refused(t, r, /^cpfs: revert turn 1 conflicts at a\.txt \(content\), blob\.bin \(binary\), linked \(hard link\), made\/later\.txt \(directory removed\), twin \(hard link\); nothing was changed \(cpfs revert 1 --dry-run --json shows each side/, 'revert of a clash')
    t.same(manifest(w.ws), before, 'the workspace is unchanged')
    t.equal(await w.okAsync('log', '--json', w.ws), log, 'and so is the history: no turn was sealed')
    const dry = await w.cpfsAsync('revert', '1', '--dry-run', '--json', w.ws)
    t.equal(dry.code, 1, '--dry-run --json exits 1 with conflicts')
    const res = JSON.parse(dry.stdout) as Result
    t.equal(res.applied, false)
    const a = res.conflicts.find(c => c.path === '/a.txt')!
    t.match(a, { why: 'content', base: { kind: 'file', mode: '0644', text: edit(TEN, 5, 'five by turn 1') }, theirs: { text: TEN }, ours: { text: edit(TEN, 5, 'five by turn 2') } }, 'each side in full')
    t.equal(a.merged, edit(TEN, 5, '<<<<<<< ours\nfive by turn 2\n||||||| base\nfive by turn 1\n=======\nline 5\n>>>>>>> theirs'), 'the merged text with git\'s markers')
    t.match(res.conflicts.find(c => c.path === '/made/later.txt'), { why: 'directory removed', base: null, theirs: null, ours: { kind: 'file', text: 'added later\n' } }, 'a file added later in the directory the turn made')
    t.match(res.conflicts.find(c => c.path === '/blob.bin'), { why: 'binary', ours: { binary: true } })
    t.same(manifest(w.ws), before, 'the dry run changed nothing either')
    // With the later clashes taken back by hand, the revert goes through.
    await w.runAsync(`sed -i 's/^five by turn 2$/five by turn 1/' a.txt && rm made/later.txt && rm twin`)
    await w.okAsync('turn', w.ws)
    await w.runAsync('head -c 3000 /dev/urandom > blob.bin')
    const again = await w.cpfsAsync('revert', '1', '--json', w.ws)
    refused(t, again, /blob\.bin \(binary\)/, 'still the binary clash')
    t.match(JSON.parse(again.stdout), { applied: false, conflicts: [{ path: '/blob.bin', why: 'binary' }] }, '--json prints the conflict list')
    const blob0 = fs.readFileSync(join(w.ws, '..', 'blob0'))
    await w.okAsync('restore', '1', join(w.ws, 'blob.bin'), w.ws) // blob.bin as turn 1 began
    t.same(fs.readFileSync(join(w.ws, 'blob.bin')), blob0)
    const ok = JSON.parse(await w.okAsync('revert', '1', '--json', w.ws)) as Result
    t.equal(ok.applied, true, 'then it applies')
    t.equal(fs.readFileSync(join(w.ws, 'a.txt'), 'utf8'), TEN)
    t.notOk(fs.existsSync(join(w.ws, 'made')), 'the directory turn 1 made is gone')
    t.notOk(fs.existsSync(join(w.ws, 'linked')), 'a file left with one name is a plain file: it goes with the turn that made it')
    await w.okAsync('unmount', w.ws)
  })

  t.test('revert of a turn in which git committed: the commit is gone from git log, later work stays; after a later git add, .git/index conflicts', async t => {
    const w = workspace(t, `git init -q && git config user.email t@t && git config user.name t && ${PROJECT} && git add -A && git commit -qm init`)
    await w.okAsync('mount', w.ws)
    await w.runAsync('echo feature > feature.txt && sed -i "s/^line 1$/line 1 committed/" a.txt && git add -A && git commit -qm feature')
    t.match(await w.runAsync('git log --oneline'), /feature/)
    await w.okAsync('turn', w.ws)
    await w.runAsync('echo notes > notes.txt') // later work, outside git
    await w.okAsync('turn', w.ws)
    await w.okAsync('revert', '1', w.ws)
    t.equal((await w.runAsync('git log --format=%s')).trim(), 'init', 'git log shows only the first commit')
    t.equal((await w.runAsync('git status --porcelain')).trim(), '?? notes.txt', 'git sees a clean tree, plus the later file')
    t.notOk(fs.existsSync(join(w.ws, 'feature.txt')))
    t.equal(fs.readFileSync(join(w.ws, 'a.txt'), 'utf8'), TEN)
    await w.runAsync('git fsck --no-dangling 2>&1')
    // git's index changed again later (git add): both sides changed a binary file, refused.
    await w.runAsync('echo two > two.txt && git add two.txt && git commit -qm two')
    await w.okAsync('turn', w.ws) // turn 4
    await w.runAsync('echo three > three.txt && git add three.txt')
    await w.okAsync('turn', w.ws)
    const before = manifest(w.ws)
    refused(t, await w.cpfsAsync('revert', '4', w.ws), /^cpfs: revert turn 4 conflicts at .*\.git\/index \(binary\)/, 'a commit with a later git add')
    t.same(manifest(w.ws), before, 'nothing changed')
    t.equal((await w.runAsync('git log --format=%s')).trim(), 'two\ninit', 'git log still has the commit')
    await w.okAsync('unmount', w.ws)
  })

  t.test('merge of a branch older than a prune: its base is still where it forked, so what the head removed stays removed', async t => {
    const w = workspace(t, PROJECT)
    await w.okAsync('mount', w.ws)
    for (const f of ['f', 'two', 'three']) {
      await w.runAsync(`echo ${f} > ${f}.txt`)
      await w.okAsync('turn', w.ws)
    }
    await w.okAsync('rewind', '2', w.ws) // the branch left holds two.txt and three.txt; it shares turn 1 (f.txt)
    await w.runAsync('rm f.txt')
    await w.okAsync('turn', w.ws)
    for (const f of ['x', 'y']) {
      await w.runAsync(`echo ${f} > ${f}.txt`)
      await w.okAsync('turn', w.ws)
    }
    const b = JSON.parse(await w.okAsync('log', '--all', '--json', w.ws)).branches[0].branch as string
    const planned = async () => JSON.parse((await w.cpfsAsync('merge', b, '--dry-run', '--json', w.ws)).stdout).changes.map((c: any) => `${c.change} ${c.path}`)
    t.same(await planned(), ['added /three.txt', 'added /two.txt'], 'before the prune: only the branch\'s own files')
    await w.okAsync('unmount', w.ws)
    await w.okAsync('prune', w.ws, '--keep-turns', '2', '--keep-branches', '5')
    await w.okAsync('mount', w.ws)
    t.same(await planned(), ['added /three.txt', 'added /two.txt'], 'after it (turns 1-3 merged, the branch forked at 1): the same, f.txt stays removed')
    await w.okAsync('merge', b, w.ws)
    t.equal(await w.runAsync('ls *.txt'), 'a.txt\nkeep.txt\nold.txt\ntarget.txt\nthree.txt\ntwo.txt\nx.txt\ny.txt\n', 'merged: two.txt and three.txt in, f.txt still gone')
    await w.okAsync('unmount', w.ws)
  })

  t.test('merge bN: the work a rewind left comes back; the same lines changed on both sides conflict', async t => {
    const w = workspace(t, PROJECT)
    await w.okAsync('mount', w.ws)
    for (let i = 1; i <= 3; i++) {
      await w.runAsync(`echo ${i} > f${i}.txt && sed -i 's/^line ${i}$/line ${i} by turn ${i}/' a.txt`)
      await w.okAsync('turn', w.ws)
    }
    await w.okAsync('rewind', '2', w.ws)
    await w.runAsync(`echo other > other.txt && sed -i 's/^line 2$/line 2 on the head/' a.txt`)
    await w.okAsync('turn', w.ws)
    const branches = JSON.parse(await w.okAsync('log', '--all', '--json', w.ws)).branches
    t.equal(branches.length, 1)
    const b = branches[0].branch as string
    const before = manifest(w.ws)
    const r = await w.cpfsAsync('merge', b, w.ws)
    refused(t, r, new RegExp(`^cpfs: merge ${b} conflicts at a\\.txt \\(content\\); nothing was changed \\(cpfs merge ${b} --dry-run --json`), 'same-line edits')
    t.same(manifest(w.ws), before, 'nothing changed')
    await w.runAsync(`sed -i 's/^line 2 on the head$/line 2/' a.txt && sed -i 's/^line 8$/line 8 on the head/' a.txt`)
    const dry = await w.okAsync('merge', b, '--dry-run', w.ws)
    t.match(dry, new RegExp(`^merge ${b} would change 3 paths:\\n  merged    a\\.txt\\n  added     f2\\.txt\\n  added     f3\\.txt$`), `the dry run (${dry})`)
    const out = await w.okAsync('merge', b, w.ws)
    t.match(out, new RegExp(`^merge ${b}: turn 4 changed 3 paths`), `the pending edit is sealed as turn 3 first (${out})`)
    t.equal(fs.readFileSync(join(w.ws, 'a.txt'), 'utf8'), edit(edit(edit(TEN, 1, 'line 1 by turn 1'), 2, 'line 2 by turn 2'), 3, 'line 3 by turn 3').replace('line 8\n', 'line 8 on the head\n'), 'both sides\' lines')
    t.same(['f1.txt', 'f2.txt', 'f3.txt', 'other.txt'].map(f => fs.readFileSync(join(w.ws, f), 'utf8')), ['1\n', '2\n', '3\n', 'other\n'], 'the branch\'s files and the head\'s')
    t.match((await turns(w))[3], { turn: 4, message: `merge ${b}` }, 'the merge is its own turn')
    t.match(await w.okAsync('merge', b, w.ws), /^nothing to do/, 'merging again changes nothing')

    // Bad input: one line, non-zero, nothing changed.
    const now = manifest(w.ws)
    const log = await w.okAsync('log', '--all', '--json', w.ws)
    refused(t, await w.cpfsAsync('revert', '99', w.ws), /^cpfs: turn 99 does not exist/, 'unknown turn')
    refused(t, await w.cpfsAsync('merge', 'b99', w.ws), /^cpfs: there is no branch b99/, 'unknown branch')
    const bad = await w.cpfsAsync('merge', 'main', w.ws)
    t.equal(bad.code, 1)
    t.match(bad.stderr, /^cpfs: "main" is not a branch/, 'not a branch name')
    t.same(manifest(w.ws), now, 'nothing changed')
    t.equal(await w.okAsync('log', '--all', '--json', w.ws), log, 'not even the history')
    await w.okAsync('unmount', w.ws)
    const offline = manifest(w.ws)
    refused(t, await w.cpfsAsync('revert', '1', w.ws), new RegExp(`is not mounted: revert works on the mounted workspace \\(run cpfs mount ${w.ws} first\\)`), 'offline revert')
    refused(t, await w.cpfsAsync('merge', b, w.ws), /is not mounted: merge works on the mounted workspace \(run cpfs mount /, 'offline merge')
    t.same(manifest(w.ws), offline, 'nothing changed offline')
  })
}
