// One path's change as a git-style patch, the format both `git apply` and `patch -p1` read:
// `diff --git` headers, new/deleted file and mode lines, renames, `--- a/P` / `+++ b/P` (or
// /dev/null), hunks with three lines of context, "\ No newline at end of file", symlinks as
// mode 120000 with their target as content, and binary files as a "GIT binary patch" (zlib +
// base85, with the blob ids git apply checks). Git keeps only the executable bit of a mode:
// other mode changes, owners and empty directories have no patch form (cpfs diff lists them
// above the patch).
import { createHash } from 'node:crypto'
import { isUtf8 } from 'node:buffer'
import { deflateSync } from 'node:zlib'
import { structuredPatch } from 'diff'

export interface Side {
  /** Workspace path, '/'-rooted. */
  path: string
  kind: 'f' | 'l'
  /** Permission bits. */
  mode: number
  /** The content (a symlink's target); null when too large to read for a diff. */
  data: Buffer | null
}

const BINARY_PROBE = 8192

/** Not diffable as lines: a NUL near the start (git's test), or bytes that are not UTF-8 (a text diff would not give them back). */
export function isBinary (b: Buffer): boolean {
  return b.subarray(0, BINARY_PROBE).includes(0) || !isUtf8(b)
}

/** The mode git records: symlink, executable or not. */
function gitMode (s: Side): string {
  return s.kind === 'l' ? '120000' : s.mode & 0o111 ? '100755' : '100644'
}

/** A path as git writes it: C-quoted when it holds quotes, backslashes, controls or non-ASCII bytes. */
export function quotePath (prefix: string, p: string): string {
  const raw = Buffer.from(prefix + p.slice(1))
  let plain = true
  for (const c of raw) if (c < 0x20 || c === 0x22 || c === 0x5c || c >= 0x7f) plain = false
  if (plain) return raw.toString()
  let out = '"'
  for (const c of raw) {
    if (c === 0x22) out += '\\"'
    else if (c === 0x5c) out += '\\\\'
    else if (c === 0x09) out += '\\t'
    else if (c === 0x0a) out += '\\n'
    else if (c < 0x20 || c >= 0x7f) out += '\\' + c.toString(8).padStart(3, '0')
    else out += String.fromCharCode(c)
  }
  return out + '"'
}

function blobId (b: Buffer): string {
  return createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex')
}

const B85 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~'

/** git's base85 "literal" body: zlib-deflated bytes, 52 per line, each line led by its length. */
function literal (b: Buffer): string {
  const z = deflateSync(b)
  const lines: string[] = []
  for (let at = 0; at < z.length; at += 52) {
    const chunk = z.subarray(at, at + 52)
    let line = chunk.length <= 26 ? String.fromCharCode(64 + chunk.length) : String.fromCharCode(96 + chunk.length - 26)
    for (let i = 0; i < chunk.length; i += 4) {
      let v = 0
      for (let k = 0; k < 4; k++) v = v * 256 + (chunk[i + k] ?? 0)
      let group = ''
      for (let k = 0; k < 5; k++) { group = B85[v % 85] + group; v = Math.floor(v / 85) }
      line += group
    }
    lines.push(line)
  }
  return `literal ${b.length}\n${lines.join('\n')}\n`
}

/**
 * Past this many inserted plus deleted lines, the minimal diff is not searched for (Myers is
 * quadratic in it: a 20,000-line file rewritten line by line took the daemon over a minute,
 * during which the mount answered nothing); the change is then shown as all old lines out and
 * all new lines in — a larger patch, still exact.
 */
export const MAX_EDIT_LINES = 2000

function splitLines (s: string): { lines: string[], endsWithNewline: boolean } {
  if (s === '') return { lines: [], endsWithNewline: true }
  const endsWithNewline = s.endsWith('\n')
  const lines = (endsWithNewline ? s.slice(0, -1) : s).split('\n')
  return { lines, endsWithNewline }
}

/** The number of lines in a text, as a diff counts them. */
export function lineCount (s: string): number {
  return splitLines(s).lines.length
}

/** One hunk replacing every line of `a` by every line of `b`. */
function wholeHunk (a: string, b: string): string {
  const o = splitLines(a)
  const n = splitLines(b)
  const side = (x: { lines: string[], endsWithNewline: boolean }, sign: string): string =>
    x.lines.map(l => sign + l + '\n').join('') + (x.lines.length && !x.endsWithNewline ? '\\ No newline at end of file\n' : '')
  return `@@ -${o.lines.length ? 1 : 0},${o.lines.length} +${n.lines.length ? 1 : 0},${n.lines.length} @@\n` + side(o, '-') + side(n, '+')
}

function hunks (a: string, b: string): string {
  let out = ''
  const patch = structuredPatch('a', 'b', a, b, '', '', { context: 3, maxEditLength: MAX_EDIT_LINES })
  if (!patch) return wholeHunk(a, b)
  for (const h of patch.hunks) {
    const os = h.oldLines === 0 ? h.oldStart - 1 : h.oldStart
    const ns = h.newLines === 0 ? h.newStart - 1 : h.newStart
    out += `@@ -${os},${h.oldLines} +${ns},${h.newLines} @@\n` + h.lines.map(l => l + '\n').join('')
  }
  return out
}

/**
 * The patch taking `before` to `after` (either may be null: added, deleted). A change of type
 * (file to symlink) is a deletion and an addition, as git writes it. Empty when git has nothing
 * to say (a mode change that keeps the executable bit).
 */
export function filePatch (before: Side | null, after: Side | null): string {
  if (before && after && before.kind !== after.kind) return filePatch(before, null) + filePatch(null, after)
  const a = before ?? after!
  const b = after ?? before!
  const names = `${quotePath('a/', a.path)} ${quotePath('b/', b.path)}`
  let head = `diff --git ${names}\n`
  if (!before) head += `new file mode ${gitMode(b)}\n`
  else if (!after) head += `deleted file mode ${gitMode(a)}\n`
  else if (gitMode(a) !== gitMode(b)) head += `old mode ${gitMode(a)}\nnew mode ${gitMode(b)}\n`
  const renamed = before && after && before.path !== after.path
  const oldData = before?.data ?? Buffer.alloc(0)
  const newData = after?.data ?? Buffer.alloc(0)
  const same = before !== null && after !== null && before.data !== null && after.data !== null && before.data.equals(after.data)
  if (renamed) head = head + (same ? 'similarity index 100%\n' : '') + `rename from ${quotePath('', a.path)}\nrename to ${quotePath('', b.path)}\n`
  if (same || (before?.data?.length === 0 && !after) || (after?.data?.length === 0 && !before)) {
    // Nothing in the content to show: the header says it all (an empty file, a rename, a mode).
    return renamed || !before || !after || gitMode(a) !== gitMode(b) ? head : ''
  }
  const from = before ? quotePath('a/', a.path) : '/dev/null'
  const to = after ? quotePath('b/', b.path) : '/dev/null'
  if ((before && before.data === null) || (after && after.data === null)) {
    return head + `Binary files ${from} and ${to} differ\n`
  }
  if ((before && isBinary(oldData)) || (after && isBinary(newData))) {
    const mode = before && after && gitMode(a) === gitMode(b) ? ` ${gitMode(b)}` : ''
    const zero = '0'.repeat(40)
    return head + `index ${before ? blobId(oldData) : zero}..${after ? blobId(newData) : zero}${mode}\nGIT binary patch\n${literal(newData)}\n${literal(oldData)}\n`
  }
  // As git does: a tab ends a name with a space in it, so that patch(1) finds where it ends.
  const tab = (n: string): string => n.includes(' ') ? n + '\t' : n
  return head + `--- ${tab(from)}\n+++ ${tab(to)}\n` + hunks(oldData.toString('utf8'), newData.toString('utf8'))
}
