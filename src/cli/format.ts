// Human-readable output. Colours only on a TTY and never with NO_COLOR.
import type { StatusInfo } from '../api.js'
import type { PlanSummary } from '../plans/run.js'
import type { TurnInfo } from '../session/session.js'

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
    bytes(t.bytes),
    t.id ?? '',
    t.message ?? ''
  ])
  const header = ['TURN', 'OPENED', 'CHANGED', 'BYTES', 'ID', 'MESSAGE']
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
  return lines.map(([k, v]) => `${k.padEnd(10)} ${v}`).join('\n')
}

export function formatSummary (s: PlanSummary): string {
  const base = `applied ${s.ops} operation${s.ops === 1 ? '' : 's'}, verified ${s.verified} path${s.verified === 1 ? '' : 's'}, wrote ${bytes(s.bytesWritten)}`
  return s.recovered ? base + ' (finished an interrupted plan)' : base
}
