// A revert that fails halfway (src/merge/run.ts) leaves nothing half-applied: what it had made
// is dropped from the head, in memory and in the store, with a stable code. The failure is
// made in a session in this process (no mount): an overlay restore that throws on its second
// call, as a full disk or a bug would. Merges that work are tested on real mounts (test/merge.test.ts).
import t from 'tap'
import { revertIn } from '../../../src/merge/run.js'
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
