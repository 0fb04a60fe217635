// Revert and merge in a session in this process, no mount (src/merge/run.ts). A revert that
// fails halfway — an overlay restore that throws on its second call, as a full disk or a bug
// would — leaves nothing half-applied: what it had made is dropped from the head, in memory and
// in the store, with a stable code. A branch's merge base: its shared turns or its mergeBase.
// Merges that work end to end are tested on real mounts (test/merge.test.ts).
import t from 'tap'
import { mergeBranchIn, revertIn } from '../../../src/merge/run.js'
import type { View } from '../../../src/overlay/view.js'
import { sessionIn, tmpDir } from '../helpers.js'

t.test('a failure halfway: MERGE_FAILED, and the head is as it was (also after a reopen)', async t => {
  const dir = tmpDir(t, 'merge-run')
  const first = await sessionIn(t, dir)
  const { s, fs } = first
  await fs.writeFile('a', 'A0')
  await fs.writeFile('b', 'B0')
  await s.turn()
  await fs.writeFile('a', 'A1')
  await fs.writeFile('b', 'B1')
  await s.turn()
  const head = s.head
  const restore = s.overlay.restore.bind(s.overlay)
  let calls = 0
  s.overlay.restore = (p: string, src: View) => {
    if (++calls === 2) throw new Error('the disk caught fire')
    restore(p, src)
  }
  await t.rejects(revertIn(s, '2'), { code: 'MERGE_FAILED', message: /^revert turn 2 failed halfway \(the disk caught fire\); what it had done was dropped/ })
  t.equal(calls, 2, 'the first path was changed before the failure')
  t.same([String(await fs.readFile('a')), String(await fs.readFile('b'))], ['A1', 'B1'], 'neither path is reverted')
  t.equal(s.head, head, 'no turn was sealed for it')
  t.equal(s.overlay.head.size, 0, 'the head layer holds nothing')
  s.overlay.restore = restore
  await first.close()
  const again = await sessionIn(t, dir)
  t.same([String(await again.fs.readFile('a')), String(await again.fs.readFile('b'))], ['A1', 'B1'], 'nor after reopening the store')
  const ok = await revertIn(again.s, '2')
  t.equal(ok.applied, true, 'then it works')
  t.same([String(await again.fs.readFile('a')), String(await again.fs.readFile('b'))], ['A0', 'B0'])
})

t.test('merge bN: the base is the turns shared with the head, or the branch\'s mergeBase; unsure paths are conflicts', async t => {
  const { s, fs } = await sessionIn(t, tmpDir(t, 'merge-base'))
  await fs.writeFile('a', 'A')
  await s.turn()
  await fs.writeFile('x', 'X') // turn 2: on the branch, before its own work when mergeBase is 2
  await s.turn()
  await fs.writeFile('y', 'Y') // turn 3: the branch's own work
  await s.turn()
  await s.rewind(2)
  const b = s.meta.branches!.find(x => x.stack.length === 4)!
  t.ok(b, 'the rewind left a branch')
  const paths = async () => (await mergeBranchIn(s, `b${b.n}`, { dryRun: true })).changes.map(c => c.path)
  t.same(await paths(), ['/w/x', '/w/y'], 'shared turns only (turn 1): x and y come')
  b.mergeBase = 2
  t.same(await paths(), ['/w/y'], 'mergeBase 2: only what came after its base')
  b.unsure = ['/w/y']
  const r = await mergeBranchIn(s, `b${b.n}`, { dryRun: true })
  t.same(r.conflicts.map(c => `${c.why} ${c.path}`), ['unsure /w/y'], 'an unsure path is a conflict')
  await mergeBranchIn(s, `b${b.n}`)
  await t.rejects(fs.readFile('y'), 'and nothing was applied')
})
