// Human-readable output. Colours on a terminal unless NO_COLOR is set (or --color says otherwise).
// Every label that came from outside (prompts, messages, ids) is shown neutralised: one line,
// no control characters a terminal would act on.
import { medianMicros } from '../fuse/stats.js'
import type { StatusInfo, UnmountResult } from '../api.js'
import type { PruneReport, StoreInfo } from '../housekeeping.js'
import type { PlanSummary } from '../plans/finish.js'
import type { TurnInfo } from '../session/session.js'
import type { RetentionPlan } from '../session/retention-plan.js'
import type { Change } from '../reports/changes.js'
import type { Blame } from '../reports/blame.js'
import type { RewindPreview } from '../reports/preview.js'

import { displayLine } from '../session/labels.js'
import { CpfsError } from '../errors.js'

let colourMode: 'auto' | 'always' | 'never' = 'auto'

/** --color WHEN: always, never, or auto (a terminal, and NO_COLOR unset or empty). */
export function setColour (when: string): void {
  if (when !== 'auto' && when !== 'always' && when !== 'never') throw new CpfsError('USAGE', `--color must be auto, always or never, not "${displayLine(when)}"`, 'e.g. --color=always')
  colourMode = when
}

function colourOn (): boolean {
  if (colourMode !== 'auto') return colourMode === 'always'
  return Boolean(process.stdout.isTTY) && !process.env.NO_COLOR
}

const paint = (code: string) => (s: string) => colourOn() ? `\x1b[${code}m${s}\x1b[0m` : s
const dim = paint('2')
const bold = paint('1')
const red = paint('31')
const green = paint('32')
const cyan = paint('36')

export function bytes (n: number): string {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let v = n
  let u = -1
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++ }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`
}

export function age (ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000))
  if (s < 60) return `${s}s ago`
  if (s < 3600) return `${Math.round(s / 60)}m ago`
  if (s < 86400) return `${Math.round(s / 3600)}h ago`
  return `${Math.round(s / 86400)}d ago`
}

/** Cut to n characters for a table cell. */
function cell (s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s
}

export function formatLog (turns: TurnInfo[], label = (t: TurnInfo): string => (t.head ? '*' : ' ') + String(t.turn)): string {
  const rows = turns.map(t => [
    label(t),
    t.openedAt > 0 ? age(t.openedAt) : '-', // 0: a record without its time (offline restores wrote such, issue 19)
    `${t.files} path${t.files === 1 ? '' : 's'}`,
    t.insertions === undefined ? '' : `+${t.insertions} -${t.deletions}`,
    bytes(t.bytes),
    cell(displayLine(t.id), 40),
    cell(displayLine(t.prompt), 50),
    displayLine(t.message)
  ])
  const header = ['TURN', 'OPENED', 'CHANGED', 'LINES', 'BYTES', 'ID', 'PROMPT', 'MESSAGE']
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)))
  const line = (r: string[]) => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i])).join('  ').trimEnd()
  return [dim(line(header)), ...rows.map(r => r[0].startsWith('*') ? bold(line(r)) : line(r))].join('\n')
}

export function formatStatus (s: StatusInfo): string {
  const lines = [
    ['workspace', s.workspace],
    ['mounted', s.mounted ? `yes (daemon pid ${s.pid})` : s.stale ? 'no — a stale mount is left (cpfs mount recovers it)' : 'no'],
    ['head', s.head === null ? '-' : `turn ${s.head}`],
    ['turns', String(s.turns)],
    ['pending', `${s.pending} turn${s.pending === 1 ? '' : 's'} not yet applied to the real directory`],
    ['redo', s.redo ? `${s.redo} step${s.redo === 1 ? '' : 's'} available` : 'none'],
    ['branches', s.branches ? `${s.branches} kept besides the head's (cpfs log --all)` : 'none'],
    ...(s.retention ? [['retention', describeRetention(s.retention, s.storeBytes)]] : []),
    ['store', `${s.store} (${bytes(s.storeBytes)})`]
  ]
  if (s.ops) {
    const total = Object.values(s.ops.counts).reduce((a, b) => a + b, 0)
    lines.push(['requests', `${total}${s.ops.hist ? `, median handler time ≤ ${medianMicros(s.ops.hist)} µs` : ''}`])
    const rows = Object.entries(s.ops.counts).sort((a, b) => (s.ops!.ms[b[0]] ?? 0) - (s.ops!.ms[a[0]] ?? 0))
    for (const [op, n] of rows) lines.push([`  ${op}`, `${n} calls, ${(s.ops.ms[op] ?? 0).toFixed(0)} ms (${((s.ops.ms[op] ?? 0) * 1000 / n).toFixed(0)} µs each)`])
  }
  if (s.underneath) lines.push(['underneath', describeWatch(s.underneath)])
  if (s.capturing) lines.push(['keeping', `the original bytes of ${s.capturing} big file${s.capturing === 1 ? '' : 's'} the mount changed are being read into the store`])
  if (s.spaceRefusedAt) lines.push(['space', `writes in the mount were refused for lack of space (last ${age(s.spaceRefusedAt)}): the store's disk is below the reserve; remove large files in the mount, or free space on the disk`])
  if (s.interrupted) lines.push(['plan', 'a plan to the real directory was interrupted; the next cpfs command that changes something (unmount, mount, rewind...) finishes it'])
  if (s.skipped.length) lines.push(['skipped', `the last plan left ${s.skipped.map(p => p.slice(1)).join(', ')} as another process wrote them`])
  return lines.map(([k, v]) => `${k.padEnd(10)} ${v}`).join('\n')
}

/** What retention drops next and when, in one line (session/retention-plan.ts). */
function describeRetention (r: RetentionPlan, storeBytes: number): string {
  const when = r.dueAt === null ? 'never by itself ("auto": false; cpfs prune applies it)' : r.dueAt <= Date.now() ? 'at the next unmount' : `at the first unmount after ${new Date(r.dueAt).toISOString().slice(0, 16).replace('T', ' ')}`
  const what: string[] = []
  if (r.branches.length) what.push(`drops branch${r.branches.length === 1 ? '' : 'es'} ${r.branches.join(', ')}`)
  if (r.turns) what.push(`merges turns 1-${r.turns}`)
  if (r.maxBytes !== null && storeBytes > r.maxBytes) what.push(`the store is over ${bytes(r.maxBytes)}: the branches left longest ago go, then the oldest turns, until it fits`)
  const rules = [r.settings.olderThanDays !== undefined ? `older than ${r.settings.olderThanDays} days` : '', r.maxBytes !== null ? `beyond ${bytes(r.maxBytes)}` : '', r.settings.keepBranches !== undefined ? `past ${r.settings.keepBranches} branch${r.settings.keepBranches === 1 ? '' : 'es'}` : '', r.settings.keepTurns !== undefined ? `past ${r.settings.keepTurns} turn${r.settings.keepTurns === 1 ? '' : 's'}` : ''].filter(Boolean).join(', ')
  return `${when}: ${what.length ? what.join('; ') : 'nothing to drop yet'} (drops what is ${rules || 'nothing: no limits set'})`
}

/** The watch of writes made underneath the mount, in one line. */
function describeWatch (w: NonNullable<StatusInfo['underneath']>): string {
  if (w.state !== 'watching' || !('dirs' in w)) return `not watched: ${w.why ?? 'unknown'}`
  const marking = w.marked ? `watching ${w.dirs} director${w.dirs === 1 ? 'y' : 'ies'}` : `marking directories (${w.dirs} so far)`
  const heard = w.recorded ? `; ${w.recorded} change${w.recorded === 1 ? '' : 's'} made there recorded${w.notKept ? ` (${w.notKept} without their earlier content)` : ''}` : ''
  return `${marking}${heard}${w.missed ? '; some changes were not heard (too many at once)' : ''}`
}

/** What `cpfs unmount` did, in one line; without a mount it says what it did instead. */
export function formatUnmount (r: UnmountResult, dir: string): string {
  const turns = (n: number) => `${n} turn${n === 1 ? '' : 's'}`
  const aside = (n: number) => `${turns(n)} set aside as a branch (cpfs redo brings ${n === 1 ? 'it' : 'them'} back)`
  if (r.notMounted) {
    const was = r.notMounted === 'stale' ? `removed the stale mount of ${dir} (its daemon had stopped)` : `${dir} was not mounted`
    if (!r.applied) return `${was}; the real directory was left as it was${r.discarded ? `; ${aside(r.discarded)}` : ''}`
    if (!r.pending) return `${was}; nothing was left to apply${r.summary?.ops ? `; ${formatSummary(r.summary)}` : ''}`
    return `${was}; applied the ${turns(r.pending)} it still had to apply: ${formatSummary(r.summary!)}`
  }
  if (!r.applied) return `unmounted; the real directory was left as it was${r.discarded ? `; ${aside(r.discarded)}` : ''}`
  return `unmounted; ${formatSummary(r.summary!)}`
}

export function formatSummary (s: PlanSummary): string {
  const base = `applied ${s.ops} operation${s.ops === 1 ? '' : 's'}, verified ${s.verified} path${s.verified === 1 ? '' : 's'}, wrote ${bytes(s.bytesWritten)}`
  return s.recovered ? base + ' (finished an interrupted plan)' : base
}

const LETTER: Record<Change['change'], string> = { added: 'A', deleted: 'D', modified: 'M', mode: 'm', type: 'T', symlink: 'L', moved: 'R', owner: 'o', xattrs: 'x' }

function counts (c: Change): string {
  if (c.binary) return `binary ${c.oldSize ?? 0} -> ${c.newSize ?? 0} bytes`
  const parts = []
  if (c.insertions) parts.push(`+${c.insertions}`)
  if (c.deletions) parts.push(`-${c.deletions}`)
  return parts.join(' ')
}

function line (c: Change): string {
  const p = displayLine(c.path.slice(1) + (c.kind === 'd' ? '/' : ''))
  switch (c.change) {
    case 'moved': return `R ${displayLine(c.from!.slice(1))}/ -> ${p}`
    case 'mode': return `m ${p}  mode ${c.oldMode!.toString(8)} -> ${c.newMode!.toString(8)}`
    case 'symlink': return `L ${p}  -> ${displayLine(c.newTarget)} (was ${displayLine(c.oldTarget)})`
    default: return `${LETTER[c.change]} ${p}${c.kind === 'l' && c.newTarget ? ' -> ' + c.newTarget : ''}  ${counts(c)}`.trimEnd()
  }
}

export function formatPreview (turn: string, p: RewindPreview): string {
  const total = `+${p.insertions} -${p.deletions}`
  const head = p.changes.length === 0
    ? `rewind to turn ${turn} would change nothing`
    : `rewind to turn ${turn} would change ${p.changes.length} path${p.changes.length === 1 ? '' : 's'} (${total}):`
  const lines = [head, ...p.changes.map(c => '  ' + line(c))]
  if (!p.canRewind) lines.push(`refused: ${p.error}`)
  return lines.join('\n')
}

export function formatStat (changes: Change[]): string {
  if (changes.length === 0) return 'no changes'
  let ins = 0
  let del = 0
  for (const c of changes) { ins += c.insertions; del += c.deletions }
  return [...changes.map(c => ' ' + line(c)), ` ${changes.length} path${changes.length === 1 ? '' : 's'} changed, +${ins} -${del}`].join('\n')
}

/** What a path's change is, in words, when a patch cannot say it (or says it only in part). */
function note (c: Change): string | null {
  const p = c.path.slice(1)
  switch (c.change) {
    case 'moved': return `moved directory ${c.from!.slice(1)}/ -> ${p}/`
    case 'owner': return `owner changed: ${p}`
    case 'xattrs': return `extended attributes changed: ${p}`
    case 'mode': return `mode ${p} ${c.oldMode!.toString(8)} -> ${c.newMode!.toString(8)}`
    default:
      if (c.oldMode !== undefined && c.newMode !== undefined && c.oldMode !== c.newMode) return `mode ${p} ${c.oldMode.toString(8)} -> ${c.newMode.toString(8)}`
      if (c.kind === 'd' && (c.change === 'added' || c.change === 'deleted')) return `${c.change} directory ${p}/`
      if (c.kind !== 'f' && c.kind !== 'l' && c.kind !== 'd') return `${c.change} special file ${p}`
      if (c.binary && !c.patch?.includes('GIT binary patch')) return `${c.change} binary file ${p} (${c.oldSize ?? 0} -> ${c.newSize ?? 0} bytes)`
      return null
  }
}

/** Colour a git-style patch as git does: headers bold, hunk lines cyan, removed red, added green. */
function paintPatch (text: string): string {
  if (!colourOn()) return text
  let inHunk = false
  return text.split('\n').map(l => {
    if (l.startsWith('diff --git ')) inHunk = false
    if (l.startsWith('@@')) { inHunk = true; return cyan(l) }
    if (!inHunk) return l === '' ? l : bold(l)
    if (l.startsWith('+')) return green(l)
    if (l.startsWith('-')) return red(l)
    return l
  }).join('\n')
}

/**
 * A patch `git apply` and `patch -p1` accept, after a preamble of what a patch cannot carry
 * (directory moves, other mode bits, owners, empty directories, special files); both tools
 * skip text before the first `diff --git`.
 */
export function formatDiff (changes: Change[]): string {
  if (changes.length === 0) return 'no changes'
  const notes = changes.map(note).filter((n): n is string => n !== null).map(n => displayLine(n))
  const patch = changes.map(c => c.patch ?? '').join('')
  const head = notes.length ? notes.join('\n') + (patch ? '\n\n' : '\n') : ''
  return head + paintPatch(patch)
}

/** A local date and time to the second (blame lines). */
function when (ms: number): string {
  const d = new Date(ms)
  const two = (n: number): string => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`
}

function cut (s: string, max: number): string {
  return s.length > max ? s.slice(0, max - 1) + '…' : s
}

/** `cpfs blame`: one line per turn and process that changed the path, then what it ran under. */
export function formatBlame (b: Blame): string {
  if (b.lines.length === 0) return `no turn changed ${displayLine(b.path.slice(1))}`
  return b.lines.map(l => {
    const what = l.change === null ? 'changed back' : l.change + (l.insertions || l.deletions ? ` +${l.insertions} -${l.deletions}` : '')
    const head = `turn ${l.turn}${l.step ? `  step ${l.step.id ?? l.step.n}` : ''}  ${what}`
    if (l.process === null) return `${head}  ${dim(l.by === 'unrecorded' ? '(no process recorded: a change by cpfs itself, or made before cpfs recorded processes)' : '(its process had ended)')}`
    const where = l.by === 'underneath' ? ' (underneath the mount)' : ''
    const line = `${head}  ${l.at === null ? '' : when(l.at) + '  '}pid ${l.process.pid}${where}  ${displayLine(l.process.command)}`
    const under = l.process.parents.map(p => cut(displayLine(p.command), 60)).join(dim(' < '))
    return under ? `${line}\n    ${dim('under')} ${under}` : line
  }).join('\n')
}

export function formatAll (list: StoreInfo[]): string {
  if (list.length === 0) return 'no workspace has cpfs history here'
  const rows = list.map(s => [
    s.workspace,
    (s.orphaned ? 'orphaned' : s.mounted ? 'mounted' : 'not mounted') + (s.sandbox ? ' (sandbox)' : ''),
    s.turns === null ? '-' : String(s.turns),
    bytes(s.bytes),
    s.lastUsed ? age(s.lastUsed) : '-'
  ])
  const header = ['WORKSPACE', 'STATE', 'TURNS', 'SIZE', 'LAST USED']
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)))
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()
  return [dim(line(header)), ...rows.map(line)].join('\n')
}

export function formatPrune (r: PruneReport): string {
  if (r.removed) return `${r.workspace}: orphaned history removed (${bytes(r.before)})`
  return `${r.workspace}: merged ${r.squashed ?? 0} old turns, dropped ${r.branchesDropped ?? 0} branch${r.branchesDropped === 1 ? '' : 'es'}, deleted ${r.layersDeleted ?? 0} layers and ${r.chunksDeleted ?? 0} chunks; store ${bytes(r.before)} -> ${bytes(r.after)}`
}
