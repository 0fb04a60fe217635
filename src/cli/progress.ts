// Progress of long work on a terminal: one line, redrawn in place, with the phase, what is
// done of the total (items and bytes), the rate and the time left; at the end one summary
// line. Nothing at all without a terminal, with --json or CPFS_QUIET, or when the work was
// over before the line would have appeared.
import { withProgress, type ProgressEvent, type ProgressSink } from '../progress.js'

/** Work that ends sooner shows nothing: no flicker on every quick rewind (tests: at once). */
const SHOW_AFTER_MS = process.env.CPFS_TEST_PROGRESS_AT_ONCE ? 0 : 300
const REDRAW_MS = 100

export interface Renderer {
  sink: ProgressSink
  /** Clear the line; if progress was shown, write the summary line. */
  finish: (ok: boolean) => void
}

interface PhaseSeen { name: string, unit: string, done: number, bytes: number, started: number, ended?: number }

export function bytesText (n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++ }
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} ${units[i]}`
}

export function secondsText (s: number): string {
  if (!Number.isFinite(s)) return '?'
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`
  return `${Math.floor(m / 60)} h ${m % 60} min`
}

function count (n: number, unit: string): string {
  return n === 1 ? `1 ${unit.replace(/(ie)?s$/, (_m, ie) => ie ? 'y' : '')}` : `${n} ${unit}`
}

/** The progress line for one event, `elapsed` seconds into its phase. */
export function progressLine (e: ProgressEvent, elapsed: number): string {
  const parts = [e.phase]
  if (e.total !== undefined) parts.push(`${e.done}/${e.total} ${e.unit}`)
  else if (e.done > 0) parts.push(count(e.done, e.unit))
  if (e.totalBytes) parts.push(`${bytesText(e.bytes)}/${bytesText(e.totalBytes)}`)
  else if (e.bytes > 0) parts.push(bytesText(e.bytes))
  if (elapsed > 0.2) {
    if (e.bytes > 0) parts.push(`${bytesText(e.bytes / elapsed)}/s`)
    else if (e.done > 0 && e.unit !== 'steps') parts.push(`${Math.round(e.done / elapsed)} ${e.unit}/s`)
    const share = e.fraction ?? (e.totalBytes ? e.bytes / e.totalBytes : e.total ? e.done / e.total : undefined)
    if (share !== undefined && share > 0 && share < 1) parts.push(`ETA ${secondsText(elapsed * (1 - share) / share)}`)
  }
  return parts.join('  ')
}

/** A renderer writing to `out` (a terminal), or null when progress must stay quiet. */
export function progressRenderer (out: NodeJS.WriteStream, opts: { json?: boolean } = {}): Renderer | null {
  if (!out.isTTY || opts.json || process.env.CPFS_QUIET) return null
  const started = Date.now()
  const phases: PhaseSeen[] = []
  let shown = false
  let lastDraw = 0
  const width = (): number => Math.max(20, (out.columns || 80) - 1)
  const draw = (text: string): void => {
    out.write(`\r${text.slice(0, width())}\x1b[K`)
    shown = true
  }
  const sink: ProgressSink = (e) => {
    const now = Date.now()
    let p = phases.at(-1)
    if (!p || p.name !== e.phase || p.ended !== undefined) {
      p = { name: e.phase, unit: e.unit, done: 0, bytes: 0, started: now }
      phases.push(p)
    }
    p.done = e.done
    p.bytes = e.bytes
    if (e.end) p.ended = now
    if (now - started < SHOW_AFTER_MS || (now - lastDraw < REDRAW_MS && !e.end)) return
    lastDraw = now
    draw(`cpfs: ${progressLine(e, (now - p.started) / 1000)}`)
  }
  const finish = (ok: boolean): void => {
    if (!shown) return
    const total = (Date.now() - started) / 1000
    // The phases that took time, each with its time and what it did (and the rate).
    const ended = phases.filter(p => p.ended !== undefined)
    const long = ended.filter(p => p.ended! - p.started >= 100)
    const done = long.length ? long : ended.filter(p => p.done > 0 || p.bytes > 0)
    const text = done.map(p => {
      const s = (p.ended! - p.started) / 1000
      const what = [p.done > 0 && p.unit !== 'steps' ? count(p.done, p.unit) : '', p.bytes > 0 ? bytesText(p.bytes) : ''].filter(Boolean).join(', ')
      const rate = p.bytes >= 1024 ** 2 && s > 0.05 ? `, ${bytesText(p.bytes / s)}/s` : ''
      return `${p.name} ${secondsText(s)}${what ? ` (${what}${rate})` : ''}`
    })
    out.write(`\r\x1b[Kcpfs: ${ok ? 'done' : 'stopped'} in ${secondsText(total)}${text.length ? ': ' + text.join(', ') : ''}\n`)
  }
  return { sink, finish }
}

/** Run a command's work with its progress on stderr when that is a terminal (and not --json). */
export async function showingProgress<T> (json: boolean, fn: () => Promise<T>): Promise<T> {
  const r = progressRenderer(process.stderr, { json })
  if (!r) return await fn()
  let ok = false
  try {
    const v = await withProgress(r.sink, fn)
    ok = true
    return v
  } finally {
    r.finish(ok)
  }
}
