// Human-readable output. Colours only on a TTY and never with NO_COLOR.
import { medianMicros } from '../fuse/stats.js'
import type { StatusInfo } from '../api.js'
import type { PruneReport, StoreInfo } from '../housekeeping.js'
import type { PlanSummary } from '../plans/run.js'
import type { TurnInfo } from '../session/session.js'
import type { Change } from '../plans/changes.js'
import type { RewindPreview } from '../plans/preview.js'

const useColour = process.stdout.isTTY && !process.env.NO_COLOR
const dim = (s: string) => useColour ? `\x1b[2m${s}\x1b[0m` : s
const bold = (s: string) => useColour ? `\x1b[1m${s}\x1b[0m` : s

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

export function formatLog (turns: TurnInfo[]): string {
  const rows = turns.map(t => [
    (t.head ? '*' : ' ') + String(t.turn),
    age(t.openedAt),
    `${t.files} file${t.files === 1 ? '' : 's'}`,
    t.insertions === undefined ? '' : `+${t.insertions} -${t.deletions}`,
    bytes(t.bytes),
    t.id ?? '',
    t.message ?? ''
  ])
  const header = ['TURN', 'OPENED', 'CHANGED', 'LINES', 'BYTES', 'ID', 'MESSAGE']
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
    ['store', `${s.store} (${bytes(s.storeBytes)})`]
  ]
  if (s.ops) {
    const total = Object.values(s.ops.counts).reduce((a, b) => a + b, 0)
    lines.push(['requests', `${total}${s.ops.hist ? `, median handler time ≤ ${medianMicros(s.ops.hist)} µs` : ''}`])
    const rows = Object.entries(s.ops.counts).sort((a, b) => (s.ops!.ms[b[0]] ?? 0) - (s.ops!.ms[a[0]] ?? 0))
    for (const [op, n] of rows) lines.push([`  ${op}`, `${n} calls, ${(s.ops.ms[op] ?? 0).toFixed(0)} ms (${((s.ops.ms[op] ?? 0) * 1000 / n).toFixed(0)} µs each)`])
  }
  if (s.spaceRefusedAt) lines.push(['space', `writes in the mount were refused for lack of space (last ${age(s.spaceRefusedAt)}): the store's disk is below the reserve; remove large files in the mount, or free space on the disk`])
  if (s.interrupted) lines.push(['plan', 'a plan to the real directory was interrupted; the next cpfs command that changes something (unmount, mount, rewind...) finishes it'])
  if (s.skipped.length) lines.push(['skipped', `the last plan left ${s.skipped.map(p => p.slice(1)).join(', ')} as another process wrote them`])
  return lines.map(([k, v]) => `${k.padEnd(10)} ${v}`).join('\n')
}

export function formatSummary (s: PlanSummary): string {
  const base = `applied ${s.ops} operation${s.ops === 1 ? '' : 's'}, verified ${s.verified} path${s.verified === 1 ? '' : 's'}, wrote ${bytes(s.bytesWritten)}`
  return s.recovered ? base + ' (finished an interrupted plan)' : base
}

const LETTER: Record<Change['change'], string> = { added: 'A', deleted: 'D', modified: 'M', mode: 'm', type: 'T', symlink: 'L', moved: 'R', owner: 'o' }

function counts (c: Change): string {
  if (c.binary) return `binary ${c.oldSize ?? 0} -> ${c.newSize ?? 0} bytes`
  const parts = []
  if (c.insertions) parts.push(`+${c.insertions}`)
  if (c.deletions) parts.push(`-${c.deletions}`)
  return parts.join(' ')
}

function line (c: Change): string {
  const p = c.path.slice(1) + (c.kind === 'd' ? '/' : '')
  switch (c.change) {
    case 'moved': return `R ${c.from!.slice(1)}/ -> ${p}`
    case 'mode': return `m ${p}  mode ${c.oldMode!.toString(8)} -> ${c.newMode!.toString(8)}`
    case 'symlink': return `L ${p}  -> ${c.newTarget} (was ${c.oldTarget})`
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

export function formatDiff (changes: Change[]): string {
  if (changes.length === 0) return 'no changes'
  const out: string[] = []
  for (const c of changes) {
    const p = c.path.slice(1)
    if (c.patch && (c.insertions || c.deletions)) {
      if (c.change === 'mode' || (c.oldMode !== undefined && c.newMode !== undefined && c.oldMode !== c.newMode)) out.push(`mode ${p} ${c.oldMode!.toString(8)} -> ${c.newMode!.toString(8)}`)
      out.push(c.patch.trimEnd())
      continue
    }
    switch (c.change) {
      case 'moved': out.push(`moved directory ${c.from!.slice(1)}/ -> ${p}/`); break
      case 'mode': out.push(`mode ${p} ${c.oldMode!.toString(8)} -> ${c.newMode!.toString(8)}`); break
      case 'symlink': out.push(`symlink ${p} -> ${c.newTarget} (was -> ${c.oldTarget})`); break
      case 'owner': out.push(`owner changed: ${p}`); break
      default: {
        const what = c.kind === 'd' ? 'directory' : c.kind === 'l' ? 'symlink' : c.binary ? 'binary file' : 'file'
        const extra = c.binary ? ` (${c.oldSize ?? 0} -> ${c.newSize ?? 0} bytes)` : c.kind === 'l' && c.newTarget ? ` -> ${c.newTarget}` : ''
        out.push(`${c.change} ${what} ${p}${extra}`)
      }
    }
  }
  return out.join('\n')
}

export function formatAll (list: StoreInfo[]): string {
  if (list.length === 0) return 'no workspace has cpfs history here'
  const rows = list.map(s => [
    s.workspace,
    s.orphaned ? 'orphaned' : s.mounted ? 'mounted' : 'not mounted',
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
  return `${r.workspace}: merged ${r.squashed ?? 0} old turns, deleted ${r.layersDeleted ?? 0} layers and ${r.chunksDeleted ?? 0} chunks; store ${bytes(r.before)} -> ${bytes(r.after)}`
}
