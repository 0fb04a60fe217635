// Sandboxed runs kept as branches of the shared history (issue 23, part 5): each
// `cpfs exec --sandbox` run's work becomes a branch (by 'sandbox', with its command line)
// whose base is what the real directory held when it started plus what the run found, so that
// `cpfs merge bN` can bring it into the head. Real mounts, real tools, the CLI and its daemons
// in their own processes: offline and mounted workspaces, two runs at once on one checkout, a
// real file changed during a run, prune, the run's state dir, and merges of two runs.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { CLI, fuseAvailable, isMountedAt, manifest, until, workspace, type Env, type Run } from './helpers.js'

const TREE = `printf 'one\\ntwo\\nthree\\n' > a.txt && echo b > b.txt && echo gone > gone.txt && mkdir d && echo x > d/x
  head -c 3000000 /dev/urandom > big.bin`

/** The tree by real tools: each path, its type, mode and content hash (symlinks: their target). */
const LIST = 'find . -mindepth 1 | sort | while read -r f; do if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; elif [ -d "$f" ]; then echo "$f/ $(stat -c %a "$f")"; else echo "$f $(stat -c %a "$f") $(sha256sum < "$f" | cut -c1-16)"; fi; done'

interface Turn { turn: number, prompt: string | null, changes: Array<{ path: string }> }
interface BranchInfo { branch: string, by: string, what?: string, mergeBase?: number, unsure?: string[], shared: number, length: number, turns: Turn[] }

async function branchesOf (w: Env): Promise<BranchInfo[]> {
  return JSON.parse(await w.okAsync('log', '--all', '--json', w.ws)).branches
}

/** The paths a sandbox branch's own turns changed (those after its base). */
function ownPaths (b: BranchInfo): string[] {
  return [...new Set(b.turns.filter(x => x.turn > b.mergeBase!).flatMap(x => x.changes.map(c => c.path)))].sort()
}

/** Its turn `mergeBase`: the layer pinning what the run found. */
function foundTurn (b: BranchInfo): Turn | undefined {
  return b.turns.find(x => x.turn === b.mergeBase)
}

/** The run's state dirs left under CPFS_HOME. */
function sandboxes (w: Env): string[] {
  try {
    return fs.readdirSync(join(w.home, 'sandboxes'))
  } catch {
    return []
  }
}

/** The daemon logs of the runs going on. */
function daemonLogs (w: Env): string[] {
  return sandboxes(w).map(d => {
    try {
      return fs.readFileSync(join(w.home, 'sandboxes', d, 'daemon.log'), 'utf8')
    } catch {
      return ''
    }
  })
}

/** A waiting loop in bash for a flag file: gives up (a hang) only after about 120 s. */
const hold = (flag: string): string => `for i in $(seq 2400); do [ -e ${flag} ] && break; sleep 0.05; done; [ -e ${flag} ] || { echo "hung waiting for ${flag}" >&2; exit 1; }`

function sandboxRun (w: Env, args: string[], script: string, env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise(resolve => {
    const child = spawn(process.execPath, [CLI, 'exec', w.ws, '--sandbox', ...args, '--', 'bash', '-c', script], { env: { ...w.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', b => { stdout += b })
    child.stderr.on('data', b => { stderr += b })
    child.on('close', code => resolve({ code: code ?? 128, stdout, stderr }))
  })
}

t.jobs = 2

if (fuseAvailable(t)) {
  t.test('a sandboxed run on a workspace not mounted becomes a branch; rewind bN gives its end state', async t => {
    const w = workspace(t, TREE)
    const before = manifest(w.ws)
    const end = join(w.ws, '..', 'end-state')
    // sed -i, a new file, a renamed real directory written below, a removal, chmod, a symlink,
    // and 1 byte written into a 3 MB real file (copy-up keeps the rest in the real file).
    const script = `sed -i s/two/TWO/ a.txt && echo new > n.txt && mv d e && echo more >> e/x && rm gone.txt && chmod 600 b.txt && ln -s a.txt link && printf Z | dd of=big.bin bs=1 seek=70000 conv=notrunc status=none && ${LIST} > ${end}`
    const r = await w.cpfsAsync('exec', w.ws, '--sandbox', '--discard', '--', 'bash', '-c', script)
    t.equal(r.code, 0, r.stderr)
    t.same(manifest(w.ws), before, '--discard: the real directory is as it was')
    t.match(r.stderr, /kept as branch b1/, 'it says which branch')
    const branches = await branchesOf(w)
    t.equal(branches.length, 1, 'one branch')
    t.match(branches[0], { by: 'sandbox', what: `bash -c '${script}'`, mergeBase: 1 }, 'by a sandboxed run, with its command; its base: nothing applied yet, then what it found')
    t.match(foundTurn(branches[0])?.prompt ?? '', /^what the sandboxed run found/, 'turn mergeBase is the layer of what it found')
    t.same(ownPaths(branches[0]), ['/a.txt', '/b.txt', '/big.bin', '/d', '/e', '/e/x', '/gone.txt', '/link', '/n.txt'], 'its own turns hold exactly what it changed')
    t.notOk(branches[0].unsure, 'nothing changed outside it: no unsure path')
    t.same(sandboxes(w), [], 'the run\'s state dir is gone after a clean run')
    await w.okAsync('rewind', 'b1', w.ws)
    t.equal(await w.runAsync(LIST), fs.readFileSync(end, 'utf8'), 'rewind b1: the tree the run ended with (find, stat, sha256sum)')
    t.equal(await w.runAsync('head -c 70001 big.bin | tail -c 1'), 'Z', 'the byte it wrote into the big file')
  })

  t.test('while the workspace is mounted, the mount\'s daemon keeps the run as a branch', async t => {
    const w = workspace(t, TREE)
    await w.okAsync('mount', w.ws)
    t.teardown(() => { if (isMountedAt(w.ws)) w.cpfs('unmount', w.ws, '--discard') })
    await w.runAsync('echo t1 > t1.txt')
    await w.okAsync('turn', w.ws)
    const r = await w.cpfsAsync('exec', w.ws, '--sandbox', '--', 'bash', '-c', 'sed -i s/one/ONE/ a.txt && echo s > s.txt && rm -r d')
    t.equal(r.code, 0, r.stderr)
    t.ok(isMountedAt(w.ws), 'the workspace is still mounted')
    t.equal(await w.runAsync('head -1 a.txt; cat s.txt'), 'ONE\ns\n', 'the run applied to what it ran on (the mount) when it ended, as before')
    const branches = await branchesOf(w)
    const b = branches.find(x => x.by === 'sandbox')
    t.ok(b, 'the daemon holds a sandbox branch')
    t.equal(b?.what, 'bash -c \'sed -i s/one/ONE/ a.txt && echo s > s.txt && rm -r d\'')
    t.same(b && ownPaths(b), ['/a.txt', '/d', '/s.txt'], 'with exactly the run\'s changes')
    t.same(sandboxes(w), [], 'the run\'s state dir is gone')
    await w.runAsync('echo later > a.txt && echo later > s.txt')
    await w.okAsync('rewind', b!.branch, w.ws)
    t.equal(await w.runAsync('cat a.txt s.txt; test ! -e d && echo no-d'), 'ONE\ntwo\nthree\ns\nno-d\n', 'rewind bN in the mount: the run\'s end state')
    await w.okAsync('unmount', w.ws)
  })

  t.test('a run that wrote the same bytes as the mount\'s open turn: the head dropping them leaves the branch whole', async t => {
    const w = workspace(t, TREE)
    const blob = join(w.ws, '..', 'blob')
    fs.writeFileSync(blob, randomBytes(300_000))
    const sum = createHash('sha256').update(fs.readFileSync(blob)).digest('hex')
    await w.okAsync('mount', w.ws)
    t.teardown(() => { if (isMountedAt(w.ws)) w.cpfs('unmount', w.ws, '--discard') })
    await w.runAsync(`cp ${blob} g.bin && sync g.bin`) // the head's own chunks, not sealed yet
    const r = await w.cpfsAsync('exec', w.ws, '--sandbox', '--discard', '--', 'bash', '-c', `cp ${blob} s.bin`)
    t.equal(r.code, 0, r.stderr)
    const b = (await branchesOf(w)).find(x => x.by === 'sandbox')!
    t.ok(b, 'the run is a branch')
    await w.runAsync('rm g.bin && sync .') // the head drops its chunks: they go, unless something else holds them
    await w.okAsync('turn', w.ws)
    await w.okAsync('rewind', b.branch, w.ws)
    t.equal(await w.runAsync('sha256sum < s.bin | cut -d" " -f1'), sum + '\n', 'the branch\'s file reads whole')
    await w.okAsync('unmount', w.ws, '--discard')
    const fsck = await w.cpfsAsync('fsck', w.ws)
    t.equal(fsck.code, 0, `cpfs fsck finds nothing lost: ${fsck.stdout.trim()} ${fsck.stderr.trim()}`)
  })

  t.test('two sandboxed runs at once on one checkout: two branches, each with exactly its own changes', async t => {
    const w = workspace(t, TREE)
    const sync = join(w.ws, '..', 'sync')
    fs.mkdirSync(sync)
    // Each writes, then waits until the other has written: the two runs overlap.
    const a = sandboxRun(w, [], `sed -i s/three/THREE/ a.txt && echo a > a-new.txt && touch ${sync}/a-wrote && ${hold(`${sync}/b-wrote`)}`)
    t.ok(await until(() => fs.existsSync(join(sync, 'a-wrote'))), 'run a has written')
    const b = sandboxRun(w, [], `echo B >> b.txt && mkdir bdir && echo f > bdir/f && touch ${sync}/b-wrote`)
    const [ra, rb] = await Promise.all([a, b])
    t.equal(ra.code, 0, ra.stderr)
    t.equal(rb.code, 0, rb.stderr)
    t.equal(await w.runAsync('tail -1 a.txt; cat a-new.txt b.txt bdir/f'), 'THREE\na\nb\nB\nf\n', 'both applied to the real directory, as before')
    const branches = await branchesOf(w)
    t.equal(branches.length, 2, 'two branches')
    const ba = branches.find(x => x.what?.includes('a-new.txt'))
    const bb = branches.find(x => x.what?.includes('bdir'))
    t.ok(ba && bb && ba.branch !== bb.branch, 'one per run')
    t.same(ba && ownPaths(ba), ['/a-new.txt', '/a.txt'], 'run a\'s branch: its changes only')
    t.same(bb && ownPaths(bb), ['/b.txt', '/bdir', '/bdir/f'], 'run b\'s branch: its changes only')
    t.same(sandboxes(w), [], 'both state dirs are gone')
  })

  /**
   * kept.txt: changed by the run first (its original is kept then), then by someone else.
   * unsure.txt: read by the run, changed by someone else, then removed by the run. With the
   * watcher of writes underneath the mount off, the run cannot know what unsure.txt held when
   * it removed it: unsure. With it on (the default), the run's daemon heard the change and the
   * run's base holds it.
   */
  async function changedDuringRun (t: Parameters<typeof workspace>[0], underneath: 'on' | 'off'): Promise<{ w: Env, b: BranchInfo, r: Run }> {
    const w = workspace(t, 'echo orig > kept.txt && echo orig > unsure.txt')
    const sync = join(w.ws, '..', 'sync')
    fs.mkdirSync(sync)
    const run = sandboxRun(w, ['--discard'], `sed -i s/orig/run/ kept.txt && cat unsure.txt >/dev/null && touch ${sync}/ready && ${hold(`${sync}/changed`)} && rm unsure.txt`, underneath === 'off' ? { CPFS_UNDERNEATH: 'off' } : {})
    t.ok(await until(() => fs.existsSync(join(sync, 'ready'))), 'the run has changed kept.txt and read unsure.txt')
    await w.runAsync('echo changed-outside > kept.txt && echo changed-outside > unsure.txt') // the real directory, outside the sandbox
    // Watched: the run goes on once its daemon has recorded the change to unsure.txt (its log
    // says so), so that the run removes the version changed outside.
    if (underneath === 'on') t.ok(await until(() => daemonLogs(w).some(l => /unsure\.txt changed underneath the mount .*recorded/.test(l))), 'the run\'s daemon heard the outside change')
    fs.writeFileSync(join(sync, 'changed'), '')
    const r = await run
    t.equal(r.code, 0, r.stderr)
    const [b] = (await branchesOf(w))
    t.equal(b.mergeBase, 1)
    t.same(ownPaths(b), ['/kept.txt', '/unsure.txt'], 'the branch\'s own turns: the run\'s changes, not the outside ones')
    return { w, b, r }
  }

  t.test('a real file changed during a run, not watched: the original kept is the base; one not kept is unsure', async t => {
    const { w, b, r } = await changedDuringRun(t, 'off')
    t.match(r.stderr, /1 path changed outside it meanwhile \(a merge refuses them\): \/unsure\.txt/, 'it says which path is unsure')
    t.same(b.unsure, ['/unsure.txt'], 'unsure: the path whose original the run could not keep')
    await w.okAsync('rewind', `${b.branch}:${b.mergeBase! + 1}`, w.ws) // the start of the turn after the base: what the run found
    t.equal(await w.runAsync('cat kept.txt'), 'orig\n', 'the found layer holds kept.txt as the run found it, not as it was changed outside')
    await w.okAsync('rewind', b.branch, w.ws)
    t.equal(await w.runAsync('cat kept.txt; test ! -e unsure.txt && echo removed'), 'run\nremoved\n', 'the branch\'s tip: the run\'s end state')
  })

  t.test('a real file changed during a run, watched: the change heard is in the base, nothing unsure', async t => {
    const { w, b } = await changedDuringRun(t, 'on')
    t.notOk(b.unsure, 'nothing unsure')
    await w.okAsync('rewind', `${b.branch}:${b.mergeBase! + 1}`, w.ws)
    t.equal(await w.runAsync('cat kept.txt unsure.txt'), 'orig\nchanged-outside\n', 'the found layer: kept.txt as the run found it; unsure.txt as it was when the run removed it')
    await w.okAsync('rewind', b.branch, w.ws)
    t.equal(await w.runAsync('cat kept.txt; test ! -e unsure.txt && echo removed'), 'run\nremoved\n', 'the branch\'s tip: the run\'s end state')
  })

  t.test('prune squashing the turns below a sandbox branch keeps its mergeBase on what it found', async t => {
    const w = workspace(t, TREE)
    await w.okAsync('mount', w.ws)
    for (let i = 1; i <= 4; i++) {
      await w.runAsync(`echo ${i} > turn${i}.txt`)
      await w.okAsync('turn', w.ws)
    }
    await w.okAsync('unmount', w.ws) // applies all four turns
    const r = await w.cpfsAsync('exec', w.ws, '--sandbox', '--discard', '--', 'bash', '-c', 'echo run > turn2.txt && echo r > r.txt')
    t.equal(r.code, 0, r.stderr)
    let [b] = (await branchesOf(w))
    const before = b.mergeBase!
    t.ok(before >= 5, `the base holds the applied turns and what the run found (mergeBase ${before})`)
    t.match(foundTurn(b)?.prompt ?? '', /^what the sandboxed run found/)
    const [pruned] = JSON.parse(await w.okAsync('prune', w.ws, '--keep-turns', '1', '--json'))
    t.ok(pruned.squashed >= 2, `prune merged ${pruned.squashed} turns`)
    ;[b] = (await branchesOf(w))
    t.equal(b.mergeBase, before - (pruned.squashed - 1), 'mergeBase moved down with the merged turns')
    t.match(foundTurn(b)?.prompt ?? '', /^what the sandboxed run found/, 'and still names the layer of what the run found')
    t.same(ownPaths(b), ['/r.txt', '/turn2.txt'], 'the run\'s own turns are after it')
    await w.okAsync('rewind', `${b.branch}:${b.mergeBase! + 1}`, w.ws)
    t.equal(await w.runAsync('cat turn2.txt turn4.txt; test ! -e r.txt && echo no-r'), '2\n4\nno-r\n', 'the base: the applied turns, as the run found them')
    await w.okAsync('rewind', b.branch, w.ws)
    t.equal(await w.runAsync('cat turn2.txt r.txt'), 'run\nr\n', 'the tip: the run\'s work')
  })

  t.test('a run whose import fails: exit code unchanged, its store kept, one line saying where', async t => {
    const w = workspace(t, TREE)
    const store = JSON.parse(await w.okAsync('status', w.ws, '--json')).store as string
    fs.mkdirSync(join(store, '..'), { recursive: true })
    fs.writeFileSync(store, 'not a store') // the shared store cannot be opened
    const r = await w.cpfsAsync('exec', w.ws, '--sandbox', '--', 'bash', '-c', 'echo x > x.txt; exit 7')
    t.equal(r.code, 7, 'the command\'s exit code')
    const m = /the sandboxed run's work was not kept as a branch \(.*\); its store is kept in (\S+)\n/.exec(r.stderr)
    t.ok(m, `one line says so: ${r.stderr}`)
    t.ok(m && fs.existsSync(join(m[1], 'store', 'db')), 'the run\'s store is there')
    t.equal(sandboxes(w).length, 1, 'its state dir is kept')
    t.equal(fs.readFileSync(store, 'utf8'), 'not a store', 'nothing was written where the shared store should be')
    t.equal(await w.runAsync('cat x.txt'), 'x\n', 'the run still applied')
  })

  // ---- merges of sandbox branches: need `cpfs merge` (the merge helper's branch) -------------
  t.test('merged: two runs on different files merge cleanly; the same line conflicts and nothing is lost', async t => {
    t.test('different files: cpfs merge bA and cpfs merge bB are both clean', async t => {
      const w = workspace(t, TREE)
      const [ra, rb] = await Promise.all([
        sandboxRun(w, ['--discard'], 'sed -i s/one/ONE/ a.txt'),
        sandboxRun(w, ['--discard'], 'echo B >> b.txt')
      ])
      t.equal(ra.code + rb.code, 0)
      const branches = await branchesOf(w)
      const ba = branches.find(x => x.what?.includes('a.txt'))!
      const bb = branches.find(x => x.what?.includes('b.txt'))!
      await w.okAsync('mount', w.ws)
      t.equal((await w.cpfsAsync('merge', ba.branch, w.ws)).code, 0, 'the first merges cleanly')
      t.equal((await w.cpfsAsync('merge', bb.branch, w.ws)).code, 0, 'the second too')
      t.equal(await w.runAsync('head -1 a.txt; cat b.txt'), 'ONE\nb\nB\n', 'both runs\' work is in the mount')
      await w.okAsync('unmount', w.ws)
      t.equal(await w.runAsync('head -1 a.txt; cat b.txt'), 'ONE\nb\nB\n', 'and in the real directory after the unmount')
    })
    t.test('the same line: the second merge conflicts, changes nothing, and both versions are kept', async t => {
      const w = workspace(t, TREE)
      const [ra, rb] = await Promise.all([
        sandboxRun(w, ['--discard'], 'sed -i s/two/by-a/ a.txt'),
        sandboxRun(w, ['--discard'], 'sed -i s/two/by-b/ a.txt')
      ])
      t.equal(ra.code + rb.code, 0)
      const branches = await branchesOf(w)
      const ba = branches.find(x => x.what?.includes('by-a'))!
      const bb = branches.find(x => x.what?.includes('by-b'))!
      await w.okAsync('mount', w.ws)
      t.equal((await w.cpfsAsync('merge', ba.branch, w.ws)).code, 0, 'the first merges cleanly')
      const after = manifest(w.ws)
      const second = await w.cpfsAsync('merge', bb.branch, w.ws)
      t.not(second.code, 0, 'the second conflicts')
      t.match(second.stderr, /a\.txt/, 'naming the file')
      t.same(manifest(w.ws), after, 'and changes nothing')
      t.match(await w.runAsync('cat a.txt'), /by-a/, 'run a\'s version is in the mount')
      t.ok((await branchesOf(w)).some(x => x.branch === bb.branch), 'run b\'s version is still a branch')
      const rewound = await w.cpfsAsync('rewind', bb.branch, w.ws)
      t.equal(rewound.code, 0, 'and rewinding to it brings it back')
      t.match(await w.runAsync('cat a.txt'), /by-b/, 'run b\'s line')
      await w.okAsync('unmount', w.ws, '--discard')
    })
  })
}
