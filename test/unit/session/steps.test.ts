// Steps inside a turn (src/session/steps.ts, History.sealPart, session/step-analysis.ts,
// session/undo-step.ts), driven through a Session in this process: parts are sealed at a
// step's begin and end without changing the turn's number or view, a step's changes are its
// own, undoing one keeps what came after, and everything survives a reopened store, a rewind
// and prune. In-process writes record no process: every change in a step's span is its own
// (as with CPFS_ATTRIBUTION=0). The hook's pure helpers too.
import t from 'tap'
import { sessionIn, tmpDir, type Tap } from '../helpers.js'
import type { Filesystem } from '../../contract/filesystems.js'
import { stepReport } from '../../../src/reports/step-report.js'
import { feedbackText, FEEDBACK_MAX } from '../../../src/reports/feedback.js'
import { undoStepIn, listSteps } from '../../../src/steps-api.js'
import { namedPaths, toolLabel } from '../../../src/hook-tools.js'
import { parseProcessId } from '../../../src/session/processes.js'
import { squashOldest } from '../../../src/session/prune.js'
import { collectGarbage } from '../../../src/store/gc.js'

const read = async (f: Filesystem, p: string): Promise<string | null> => {
  try { return (await f.readFile(p)).toString() } catch (e: any) { if (e.code === 'ENOENT') return null; throw e }
}
const session = (t: Tap, dir = tmpDir(t, 'steps')) => sessionIn(t, dir)

t.test('a step seals parts of the turn: same turn, same view, its own changes', async t => {
  const { s, fs: w } = await session(t)
  await w.writeFile('before.txt', 'b')
  const step = await s.steps.begin({ label: 'gen', id: 'g1' })
  t.equal(s.head, 1, 'still turn 1')
  t.equal(s.history.partsOf(s.headLayer).length, 1, 'what came before is a part now')
  t.equal(step.between, s.history.partsOf(s.headLayer)[0], 'and the step knows it (changes between steps)')
  await w.writeFile('a.txt', 'gen')
  await w.writeFile('new.txt', 'n')
  const ended = await s.steps.end('g1')
  t.equal(ended.parts.length, 1, 'its span is one part')
  t.same(s.steps.open, [], 'no step open')
  t.equal(await read(w, 'a.txt'), 'gen', 'the view is the same')
  t.same(s.log().map(l => [l.turn, l.files]), [[1, 3]], 'the log counts the turn\'s paths across its parts')
  const r = await stepReport(s, 'g1')
  t.same(r.changes.map(c => [c.path, c.change]), [['/w/a.txt', 'modified'], ['/w/new.txt', 'added']], 'the step\'s changes, not the write before it')
  t.same(r.between.map(c => c.path), ['/w/before.txt'], 'what changed between steps is said')
  await w.writeFile('later.txt', 'l')
  await s.steps.begin({ label: 'empty' })
  const empty = await s.steps.end()
  t.same(empty.parts, [], 'a step that changed nothing seals no part')
  t.match(feedbackText(await stepReport(s, empty.n), '/w'), /^cpfs: step 2 \(empty\) changed no file in \/w\.\nCheck: before this call, 1 path was changed outside any tool call: w\/later\.txt/, 'its feedback: nothing, but what changed before it')
  await s.steps.begin({ label: 'quiet' })
  t.equal(feedbackText(await stepReport(s, (await s.steps.end()).n), '/w'), null, 'a step after which nothing at all happened: no feedback')
  t.same((await listSteps(s, 10)).map(x => [x.n, x.id, x.files]), [[1, 'g1', 2], [2, null, 0], [3, null, 0]], 'the list')
})

t.test('undo of a step keeps later work; conflicts are named; everything survives a reopen', async t => {
  const dir = tmpDir(t, 'steps-undo')
  let { s, fs: w, close } = await session(t, dir)
  await s.steps.begin({ label: 'one', id: 's1' })
  await w.writeFile('a.txt', 'one')
  await w.writeFile('x.txt', 'x')
  await s.steps.end()
  await s.steps.begin({ label: 'two', id: 's2' })
  await w.writeFile('y.txt', 'y')
  await s.steps.end()
  await close()
  ;({ s, fs: w, close } = await session(t, dir))
  t.equal(s.history.partsOf(s.headLayer).length, 2, 'the parts were stored')
  const u = await undoStepIn(s, 's1', {})
  t.same(u.paths, ['/w/a.txt', '/w/x.txt'], 'undo s1')
  t.equal(await read(w, 'a.txt'), 'lower', 'a.txt back to the lower')
  t.equal(await read(w, 'x.txt'), null, 'x.txt gone')
  t.equal(await read(w, 'y.txt'), 'y', 'the later step kept')
  await s.steps.begin({ label: 'three', id: 's3' })
  await w.writeFile('y.txt', 'y3')
  await s.steps.end()
  await t.rejects(undoStepIn(s, 's2', {}), { code: 'STEP_CONFLICT', message: /y\.txt \(changed later/ }, 'a later step changed y.txt: refused')
  t.equal(await read(w, 'y.txt'), 'y3', 'nothing changed')
  await undoStepIn(s, 's2', { force: true })
  t.equal(await read(w, 'y.txt'), null, '--force: back to before s2')
})

t.test('rewind ends open steps; a step across a turn; prune and gc keep what is live', async t => {
  const { s, fs: w } = await session(t)
  await s.steps.begin({ label: 'across', id: 'x' })
  await w.writeFile('a.txt', '1')
  await s.turn()
  await w.writeFile('b.txt', '2')
  await s.steps.end()
  t.same((await stepReport(s, 'x')).changes.map(c => c.path), ['/w/a.txt', '/w/b.txt'], 'both turns\' changes')
  await s.turn()
  await s.steps.begin({ label: 'rewound', id: 'r' })
  await w.writeFile('c.txt', '3')
  await s.rewind(2)
  t.same(s.steps.open, [], 'the rewind ended the open step')
  t.equal(await read(w, 'c.txt'), null)
  await s.redo()
  t.equal(await read(w, 'c.txt'), '3', 'redo brings the step\'s change back')
  await w.writeFile('d.txt', '4')
  await s.turn()
  const viewBefore = { a: await read(w, 'a.txt'), b: await read(w, 'b.txt'), c: await read(w, 'c.txt') }
  await squashOldest(s, 2)
  await collectGarbage(s.store)
  t.same({ a: await read(w, 'a.txt'), b: await read(w, 'b.txt'), c: await read(w, 'c.txt') }, viewBefore, 'prune merged the turns with their parts: the view is the same')
  t.same((await listSteps(s, 10)).map(x => x.id), ['r'], 'gc dropped the step whose layers were merged away; the later one stays')
  await t.rejects(undoStepIn(s, 'x', {}), { code: 'UNKNOWN_STEP' }, 'and it is no longer known')
  await s.rewind(s.head - 1)
  t.equal(await read(w, 'd.txt'), null, 'and the turns after still rewind')
})

t.test('the hook\'s helpers: labels, named paths, process ids, bounded feedback', async t => {
  t.equal(toolLabel({ hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'npm test\nmore' } }), 'Bash: npm test')
  t.equal(toolLabel({ hook_event_name: 'PreToolUse', tool_name: 'Edit', tool_input: { file_path: '/w/src/a.ts' } }), 'Edit: /w/src/a.ts')
  t.equal(toolLabel({ hook_event_name: 'PreToolUse', tool_name: 'Task', tool_input: {} }), 'Task')
  t.same(namedPaths({ hook_event_name: 'PreToolUse', cwd: '/w/src', tool_input: { command: "sed -i 's/a/b/g' a.ts ../lib/x.js && rm -rf /etc/x --force && npm test" } }, '/w'), ['/src/a.ts', '/lib/x.js'], 'paths in a command, from its cwd, inside the workspace only; not a sed script, a flag or a word')
  t.same(namedPaths({ hook_event_name: 'PreToolUse', tool_input: { file_path: '/w/README.md' } }, '/w'), ['/README.md'])
  t.same(namedPaths({ hook_event_name: 'PreToolUse', tool_input: { command: 'npm test' } }, '/w'), [], 'a command naming no path')
  t.same(parseProcessId('1a2b3c4d.123.456'), { boot: '1a2b3c4d', pid: 123, start: 456 })
  t.equal(parseProcessId('nonsense'), null)
  const step = { n: 1, label: 'x', owner: null, openedAt: 0, ticks: [0, 0] as [number, number], parts: [], from: 1, tool: 'Bash' }
  const many = Array.from({ length: 3000 }, (_, i) => ({ path: `/dir/file-with-a-long-name-${i}.txt`, change: 'deleted' as const, kind: 'f' as const, insertions: 0, deletions: 1, binary: false }))
  const text = feedbackText({ step, turn: 1, open: false, inHistory: true, changes: many, counts: { added: 0, modified: 0, deleted: 3000 }, others: [], background: [], flags: ['deleted 3000 files'], between: [], betweenBy: [] }, '/w')!
  t.ok(text.length <= FEEDBACK_MAX, `bounded: ${text.length} characters for 3,000 deletions`)
  t.match(text, /deleted 3000 paths[^]*and 2994 more[^]*Check: deleted 3000 files/, 'counts, the first paths, the flags')
})
