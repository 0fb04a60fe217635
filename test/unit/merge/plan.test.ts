// The merge engine's rules (src/merge/plan.ts, text.ts, paths.ts) on in-memory views: a revert
// of turn `turn` over `common`, with `later` on top, decided path by path. File contents live
// beside the entries (a chunk reference per distinct content, as the store would have it).
// (Real mounts and real tools: test/merge.test.ts.)
import t, { type Test } from 'tap'
import { createHash } from 'node:crypto'
import { View } from '../../../src/overlay/view.js'
import type { Entry, FileEntry } from '../../../src/store/entries.js'
import { mergePaths } from '../../../src/merge/paths.js'
import { planMerge, type MergePlan } from '../../../src/merge/plan.js'
import { Side } from '../../../src/merge/sides.js'
import { mergeText } from '../../../src/merge/text.js'
import { realLower } from '../helpers.js'

const bytes = new Map<Entry, Buffer>()
let ino = 100
const meta = (mode: number) => ({ mode, uid: 0, gid: 0, atime: 0, mtime: 0, ctime: 0, ino: ino++ })
const file = (content: string, mode = 0o644): FileEntry => {
  const b = Buffer.from(content, 'latin1')
  const e: FileEntry = { kind: 'f', ...meta(mode), size: b.length, chunks: new Map([[0, createHash('sha256').update(b).digest()]]) }
  bytes.set(e, b)
  return e
}
const dir = (mode = 0o755): Entry => ({ kind: 'd', ...meta(mode), opaque: 1, fresh: 1 })
const symlink = (target: string): Entry => ({ kind: 'l', ...meta(0o777), target })
const gone = (): Entry => ({ kind: 'w' })
const layer = (o: Record<string, Entry>) => new Map(Object.entries(o))

/** The plan reverting `turn` (base: common + turn, theirs: common, ours: common + turn + later). */
async function revert (t: Test, common: Record<string, Entry>, turn: Record<string, Entry>, later: Record<string, Entry>, unsure: string[] = []): Promise<MergePlan> {
  const lower = await realLower(t, {})
  const [c, x, l] = [layer(common), layer(turn), layer(later)]
  const views = [View.build(lower, [c, x]), View.build(lower, [c]), View.build(lower, [c, x, l])]
  const side = (v: View) => new Side(v, (_p, r) => bytes.get((r as { entry: Entry }).entry)!)
  return planMerge(side(views[0]), side(views[1]), side(views[2]), mergePaths([x], views), { unsure })
}

const TEXT = 'one\ntwo\nthree\nfour\nfive\nsix\n'
const ops = (p: MergePlan) => p.ops.map(o => `${o.op} ${o.path}`)
const whys = (p: MergePlan) => p.conflicts.map(c => `${c.why} ${c.path}`)

t.test('changed on one side only: take the other', async t => {
  const p = await revert(t, { '/a': file('a'), '/b': file('b') }, { '/a': file('A'), '/n': file('new') }, { '/b': file('B') })
  t.same(ops(p), ['take /a', 'take /n'], 'the turn\'s paths go back; what only later turns changed stays')
  t.same(p.conflicts, [])
})

t.test('text changed on both sides: line by line, or a conflict with markers', async t => {
  const clean = await revert(t, { '/t': file(TEXT) }, { '/t': file(TEXT.replace('two', 'TWO')) }, { '/t': file(TEXT.replace('TWO', 'TWO').replace('two', 'TWO').replace('five', 'FIVE')) })
  t.same(clean.conflicts, [])
  t.equal(clean.ops[0].op === 'write' && clean.ops[0].data.toString('latin1'), TEXT.replace('five', 'FIVE'), 'the turn\'s line back, the later one kept')
  const clash = await revert(t, { '/t': file(TEXT) }, { '/t': file(TEXT.replace('two', 'TWO')) }, { '/t': file(TEXT.replace('two', 'Two!')) })
  t.same(whys(clash), ['content /t'])
  t.equal(clash.conflicts[0].merged, 'one\n<<<<<<< ours\nTwo!\n||||||| base\nTWO\n=======\ntwo\n>>>>>>> theirs\nthree\nfour\nfive\nsix\n')
  t.same(clash.ops, [], 'a conflict plans nothing for its path')
})

t.test('bytes that are not UTF-8 merge exactly (latin1)', async t => {
  const base = Buffer.from([0x63, 0xe9, 0x0a, 0xff, 0xfe, 0x0a, 0x80, 0x0a, 0xc3, 0x28, 0x0a])
  const theirs = Buffer.from([0x43, 0xe9, 0x0a, 0xff, 0xfe, 0x0a, 0x80, 0x0a, 0xc3, 0x28, 0x0a])
  const ours = Buffer.from([0x63, 0xe9, 0x0a, 0xff, 0xfe, 0x0a, 0x80, 0x0a, 0xc3, 0x29])
  const m = mergeText(base, theirs, ours)
  t.equal(m.conflict, false)
  t.same([...m.merged], [0x43, 0xe9, 0x0a, 0xff, 0xfe, 0x0a, 0x80, 0x0a, 0xc3, 0x29], 'each byte, and no newline added at the end')
})

t.test('binary, modes, symlinks, types, add/add and modify/delete: git\'s answers', async t => {
  const bin = (s: string) => file('\0' + s)
  let p = await revert(t, { '/b': bin('0') }, { '/b': bin('1') }, { '/b': bin('2') })
  t.same(whys(p), ['binary /b'])
  p = await revert(t, { '/m': file('x') }, { '/m': file('x', 0o755) }, { '/m': file('y', 0o755) })
  t.same(ops(p), ['mode /m'], 'the turn\'s chmod goes back, the later content stays')
  t.equal(p.ops[0].op === 'mode' && p.ops[0].mode, 0o644)
  p = await revert(t, { '/m': file('x') }, { '/m': file('x', 0o755) }, { '/m': file('x', 0o700) })
  t.same(whys(p), ['mode /m'], 'both changed the mode')
  p = await revert(t, { '/s': symlink('a') }, { '/s': symlink('b') }, { '/s': symlink('c') })
  t.same(whys(p), ['symlink /s'])
  p = await revert(t, { '/s': symlink('a') }, { '/s': symlink('b') }, {})
  t.same(ops(p), ['take /s'])
  p = await revert(t, { '/x': file('f') }, { '/x': dir() }, { '/x': gone(), '/x2': file('z') })
  t.same(whys(p), ['modify/delete /x'], 'the turn made a file a directory, a later turn removed it: which should win is not known')
  p = await revert(t, { '/x': file('f') }, { '/x': symlink('t') }, { '/x': symlink('u') })
  t.same(whys(p), ['type /x'], 'a file made a symlink, then retargeted: the revert would change its type')
  p = await revert(t, { '/x': file('f') }, { '/x': file('g') }, { '/x': dir() })
  t.same(whys(p), ['type /x'])
  p = await revert(t, {}, { '/n': file('one') }, { '/n': file('two') })
  t.same(whys(p), ['modify/delete /n'], 'made by the turn, changed later')
  p = await revert(t, { '/d': file('d') }, { '/d': gone() }, { '/d': file('again') })
  t.same(whys(p), ['add/add /d'], 'removed by the turn, made again later: both sides add')
  p = await revert(t, { '/d': file('d') }, { '/d': gone() }, { '/d': file('d') })
  t.same(ops(p), [], 'made again as it was: nothing to do')
})

t.test('directories: never dropped with something unseen below', async t => {
  let p = await revert(t, {}, { '/d': dir(), '/d/f': file('f') }, { '/d/later': file('l') })
  t.same(whys(p), ['directory removed /d/later'], 'a file a later turn put in the directory the turn made')
  p = await revert(t, {}, { '/d': dir(), '/d/f': file('f'), '/d/e': dir(), '/d/e/g': file('g') }, {})
  t.same(ops(p), ['take /d'], 'the whole directory goes in one step once every path below is decided')
  p = await revert(t, { '/d': dir(), '/d/f': file('f') }, { '/d': gone() }, {})
  t.same(ops(p), ['take /d'], 'a removed directory comes back whole')
  p = await revert(t, { '/d': dir(), '/d/f': file('f') }, { '/d': gone() }, { '/d': dir(), '/d/g': file('g') })
  t.same(whys(p), [], 'made again later with other contents: the old child comes back beside the new one')
  t.same(ops(p), ['take /d/f'])
})

t.test('hard links and unsure paths are refused', async t => {
  const rec: FileEntry = { ...file('x'), links: 2 }
  bytes.set(rec, Buffer.from('x'))
  const p = await revert(t, { '/a': file('a') }, { '#7': rec, '/l1': { kind: 'h', ino: 7 }, '/l2': { kind: 'h', ino: 7 } }, {})
  t.same(whys(p), ['hard link /l1', 'hard link /l2'], 'each name of a linked file the merge would change')
  const single: FileEntry = { ...file('y'), links: 1 }
  bytes.set(single, Buffer.from('y'))
  const q = await revert(t, {}, { '#8': single, '/only': { kind: 'h', ino: 8 } }, {})
  t.same(ops(q), ['take /only'], 'a single name is a plain file')
  const u = await revert(t, { '/a': file('a') }, { '/a': file('b') }, {}, ['/a'])
  t.same(whys(u), ['unsure /a'])
})

t.test('a directory made on both sides is kept with ours\' mode (git has no directory modes)', async t => {
  const p = await revert(t, { '/d': dir(0o700), '/d/f': file('f') }, { '/d': gone() }, { '/d': dir(0o755), '/d/g': file('g') })
  t.same(whys(p), [])
  t.same(ops(p), ['take /d/f'], 'the old child comes back; the directory keeps ours\' mode')
})
