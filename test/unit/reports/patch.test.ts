// One path's change as a git-style patch (src/reports/patch.ts), checked the way a user uses
// it: applied by `git apply` to a real directory holding the old state, which must then hold
// the new one, bytes, executable bit and symlinks included. And the pieces git's format needs.
import t, { type Test } from 'tap'
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { MAX_EDIT_LINES, filePatch, isBinary, lineCount, quotePath, type Side } from '../../../src/reports/patch.js'
import { tmpDir } from '../helpers.js'

const file = (path: string, data: string | Buffer, mode = 0o644): Side => ({ path, kind: 'f', mode, data: Buffer.from(data) })
const link = (path: string, target: string): Side => ({ path, kind: 'l', mode: 0o777, data: Buffer.from(target) })

/** Make `before` in a fresh directory, apply the patch with git apply, and return the directory. */
function applied (t: Test, before: Side | null, patch: string): string {
  const dir = tmpDir(t, 'patch')
  if (before) {
    const p = join(dir, before.path)
    fs.mkdirSync(join(p, '..'), { recursive: true })
    if (before.kind === 'l') fs.symlinkSync(before.data!.toString(), p)
    else { fs.writeFileSync(p, before.data!); fs.chmodSync(p, before.mode) }
  }
  const r = spawnSync('git', ['apply', '--verbose', '-'], { cwd: dir, input: patch, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`git apply failed: ${r.stderr}\n${patch}`)
  return dir
}

/** The patch from before to after, applied: the directory then holds after (and not before's name). */
function roundTrip (t: Test, before: Side | null, after: Side | null, what: string): string {
  const patch = filePatch(before, after)
  const dir = applied(t, before, patch)
  if (before && after && after.path !== before.path) t.notOk(fs.existsSync(join(dir, before.path)), `${what}: the old name is gone`)
  if (after) {
    const p = join(dir, after.path)
    const st = fs.lstatSync(p)
    if (after.kind === 'l') t.equal(fs.readlinkSync(p), after.data!.toString(), `${what}: the link's target`)
    else {
      t.ok(fs.readFileSync(p).equals(after.data!), `${what}: the bytes`)
      t.equal(Boolean(st.mode & 0o100), Boolean(after.mode & 0o100), `${what}: the executable bit`)
    }
  } else if (before) t.notOk(fs.existsSync(join(dir, before.path)), `${what}: deleted`)
  return patch
}

t.test('text changes apply with git apply', async t => {
  const old = Array.from({ length: 30 }, (_, i) => `line ${i}`).join('\n') + '\n'
  const changed = old.replace('line 3\n', 'line three\n').replace('line 25\n', '')
  const p = roundTrip(t, file('/src/a.txt', old), file('/src/a.txt', changed), 'two hunks')
  t.match(p, /^diff --git a\/src\/a\.txt b\/src\/a\.txt\n--- a\/src\/a\.txt\n\+\+\+ b\/src\/a\.txt\n@@ -1,/)
  t.equal(p.match(/^@@/gm)?.length, 2, 'two hunks, three lines of context')
  roundTrip(t, null, file('/new.txt', 'hello\n'), 'added')
  roundTrip(t, file('/old.txt', 'bye\n'), null, 'deleted')
  roundTrip(t, file('/n', 'no newline'), file('/n', 'no newline, still'), 'no newline at the end')
  t.match(filePatch(file('/n', 'a'), file('/n', 'b')), /\\ No newline at end of file/)
  roundTrip(t, file('/n', 'a\n'), file('/n', 'a'), 'the last newline removed')
})

t.test('modes, renames, symlinks and names that need quoting', async t => {
  roundTrip(t, file('/run.sh', 'echo\n'), file('/run.sh', 'echo\n', 0o755), 'made executable')
  t.match(filePatch(file('/run.sh', 'x'), file('/run.sh', 'x', 0o755)), /old mode 100644\nnew mode 100755\n/)
  t.equal(filePatch(file('/f', 'x', 0o644), file('/f', 'x', 0o600)), '', 'git keeps only the executable bit: nothing to say')
  const renamed = roundTrip(t, file('/a/old name', 'same\n'), file('/b/new name', 'same\n'), 'renamed')
  t.match(renamed, /similarity index 100%\nrename from a\/old name\nrename to b\/new name\n/)
  roundTrip(t, file('/x', 'one\n'), file('/y', 'two\n'), 'renamed and changed')
  roundTrip(t, null, link('/l', '../target dir/é'), 'a symlink added')
  roundTrip(t, link('/l', 'a'), link('/l', 'b'), 'a symlink retargeted')
  roundTrip(t, file('/l', 'was a file\n'), link('/l', 'now a link'), 'a file replaced by a symlink')
  roundTrip(t, null, file('/dir/"quoted"\tand é', 'odd name\n'), 'a name git must C-quote')
})

t.test('binary content travels as a GIT binary patch', async t => {
  const bin = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7919) % 256))
  const p = roundTrip(t, file('/img', bin), file('/img', Buffer.concat([bin, Buffer.from([0, 1, 2])])), 'changed')
  t.match(p, /^index [0-9a-f]{40}\.\.[0-9a-f]{40} 100644\nGIT binary patch\nliteral 3003\n/m)
  roundTrip(t, null, file('/new.bin', bin), 'added')
  roundTrip(t, file('/gone.bin', bin), null, 'deleted')
  roundTrip(t, file('/t', 'text\n'), file('/t', Buffer.from([0xff, 0xfe, 0])), 'text become binary')
  t.match(filePatch(file('/big', 'x'), { path: '/big', kind: 'f', mode: 0o644, data: null }), /Binary files a\/big and b\/big differ\n$/, 'too large to read: named only')
})

t.test('a rewrite past MAX_EDIT_LINES is one hunk, still exact', async t => {
  const n = MAX_EDIT_LINES + 500
  const a = Array.from({ length: n }, (_, i) => `a${i}`).join('\n') + '\n'
  const b = Array.from({ length: n }, (_, i) => `b${i}`).join('\n') + '\n'
  const p = roundTrip(t, file('/big.txt', a), file('/big.txt', b), 'rewritten')
  t.equal(p.match(/^@@/gm)?.length, 1)
  t.match(p, new RegExp(`^@@ -1,${n} \\+1,${n} @@$`, 'm'))
})

t.test('the pieces: binary detection, quoting, line counts', async t => {
  t.ok(isBinary(Buffer.from([0x61, 0, 0x62])), 'a NUL')
  t.ok(isBinary(Buffer.from([0xc3, 0x28])), 'bytes that are not UTF-8')
  t.notOk(isBinary(Buffer.from('é 😀\n')), 'UTF-8 text')
  t.equal(quotePath('a/', '/plain/name.txt'), 'a/plain/name.txt')
  t.equal(quotePath('a/', '/tab\there'), '"a/tab\\there"')
  t.equal(quotePath('', '/é'), '"\\303\\251"', 'non-ASCII bytes in octal, as git writes them')
  t.equal(quotePath('b/', '/say "hi"\\'), '"b/say \\"hi\\"\\\\"')
  t.equal(lineCount(''), 0)
  t.equal(lineCount('a'), 1)
  t.equal(lineCount('a\n'), 1)
  t.equal(lineCount('a\nb'), 2)
})
