// What the MCP tools answer, shaped for an agent's context: summaries by default, every path
// in one form (workspace-relative, no leading '/', the workspace itself is '.'), and never
// more than a bound of characters (MAX_CHARS unless the call asks for another within
// [MIN_CHARS, LIMIT_CHARS]). One `npm ci` turn holds 20,000 paths and more: listing them all
// made list_turns answer 2.7 million characters, more than any agent's context takes. Lists
// come in pages (offset, limit) with the next offset in the answer; what does not fit is
// counted, never silently dropped.
import type { Change } from './reports/changes.js'
import type { PlanSummary } from './plans/finish.js'
import type { TurnInfo } from './session/session.js'
import { z } from 'zod'
import { CpfsError, isCpfsError } from './errors.js'



export const MAX_CHARS = 20_000
export const MIN_CHARS = 2_000
export const LIMIT_CHARS = 100_000
/** Room kept for the fields added after a list is packed (totals, next_offset, a note). */
const TAIL = 400
/** Labels (prompts, messages) are cut to this many characters in list_turns. */
const LABEL_CHARS = 300

/** A workspace path ("/src/a.txt", "/") in the tools' form ("src/a.txt", "."). */
export function rel (p: string): string {
  return p === '/' || p === '' ? '.' : p.startsWith('/') ? p.slice(1) : p
}

function cut (s: string | null, n: number): string | null {
  return s !== null && s.length > n ? s.slice(0, n - 1) + '…' : s
}

const size = (v: unknown): number => JSON.stringify(v).length

/** The text of an answer, cut at `max` characters as a last resort (the shaping below keeps within it). */
export function bounded (text: string, max: number): string {
  if (text.length <= max) return text
  const note = `… (answer cut at ${max} characters)`
  return text.slice(0, max - note.length) + note
}

/**
 * Items of `all` from `offset` on, as many as `limit` allows and fit in `budget` characters
 * with `base`; `fit` may shrink an item that alone is too big (else it is left out). Returns
 * the items and the offset of the first one left out (undefined: none).
 */
function pack<T, U> (all: T[], offset: number, limit: number, budget: number, shape: (x: T) => U, fit?: (u: U, room: number) => U | null): { items: U[], next: number | undefined } {
  const items: U[] = []
  let used = 0
  let i = offset
  for (; i < all.length && items.length < limit; i++) {
    let u = shape(all[i])
    const room = budget - used
    if (size(u) + 1 > room) {
      const smaller = items.length === 0 && fit ? fit(u, room - 1) : null
      if (smaller === null) break
      u = smaller
    }
    items.push(u)
    used += size(u) + 1
  }
  return { items, next: i < all.length ? i : undefined }
}

export interface TurnsPage {
  /** How many turns the workspace has (the head is the last). */
  turns: number
  from: number
  to: number
  list: unknown[]
  note?: string
  older?: string
  newer?: string
}

/**
 * list_turns: `limit` turns from `from` on, or up to `to` (default: the newest), each with
 * counts, labels and its first `pathsPerTurn` paths. A page too big for the bound lists fewer
 * paths per turn first (halving, down to none), then leaves out its oldest turns (an agent
 * wants the recent ones); the answer says which.
 */
export function turnsPage (turns: TurnInfo[], opts: { from?: number, to?: number, limit: number, pathsPerTurn: number, max: number }): TurnsPage {
  const total = turns.length
  const clamp = (n: number) => Math.max(1, Math.min(n, total))
  const from = opts.from !== undefined ? clamp(opts.from) : clamp((opts.to ?? total) - opts.limit + 1)
  const to = opts.from !== undefined ? Math.min(total, from + opts.limit - 1) : clamp(opts.to ?? total)
  const shape = (t: TurnInfo, perTurn: number) => {
    const o: Record<string, unknown> = { turn: t.turn }
    if (t.head) o.head = true
    o.id = t.id
    o.prompt = cut(t.prompt, LABEL_CHARS)
    o.message = cut(t.message, LABEL_CHARS)
    o.opened = t.openedAt > 0 ? new Date(t.openedAt).toISOString() : null
    o.files = t.files
    o.bytes = t.bytes
    if (t.insertions !== undefined) Object.assign(o, { insertions: t.insertions, deletions: t.deletions })
    const shown = t.changes.slice(0, perTurn)
    o.paths = shown.map(c => ({ path: rel(c.path), change: c.change }))
    if (t.files > shown.length) o.more_paths = t.files - shown.length
    return o
  }
  const page = turns.slice(from - 1, to)
  const budget = opts.max - TAIL
  let perTurn = opts.pathsPerTurn
  while (perTurn > 0 && size(page.map(t => shape(t, perTurn))) > budget) perTurn = Math.floor(perTurn / 2)
  // Newest first into the budget, then back in turn order.
  const { items } = pack(page.slice().reverse(), 0, page.length, budget, (t: TurnInfo) => shape(t, perTurn))
  const list = items.reverse()
  const first = to - list.length + 1
  const out: TurnsPage = { turns: total, from: list.length ? first : from, to, list }
  if (perTurn < opts.pathsPerTurn) out.note = `${perTurn} paths per turn listed (not ${opts.pathsPerTurn}) to stay within the answer's bound: ask for fewer turns, or see show_diff`
  if (first > 1) out.older = `turns 1..${first - 1} are not listed: call again with to_turn: ${first - 1}`
  if (to < total) out.newer = `turns ${to + 1}..${total} are not listed: call again with from_turn: ${to + 1}`
  return out
}

/** One change as the tools show it: workspace-relative paths, counts, a patch when asked. */
function changeOut (c: Change): Record<string, unknown> {
  const o: Record<string, unknown> = { path: rel(c.path), change: c.change, insertions: c.insertions, deletions: c.deletions }
  if (c.kind === 'd') o.directory = true
  if (c.from !== undefined) o.from = rel(c.from)
  if (c.binary) Object.assign(o, { binary: true, old_size: c.oldSize ?? 0, new_size: c.newSize ?? 0 })
  if (c.oldMode !== undefined && c.newMode !== undefined && c.oldMode !== c.newMode) Object.assign(o, { old_mode: c.oldMode.toString(8), new_mode: c.newMode.toString(8) })
  if (c.change === 'symlink' || (c.kind === 'l' && c.newTarget !== undefined)) o.target = c.newTarget
  if (c.patch !== undefined) o.patch = c.patch
  return o
}

/** show_diff: totals over every path, and one page of the changes (patches cut to fit, said so). */
export function diffPage (changes: Change[], opts: { a: number, b: number, offset: number, limit: number, max: number, spec: string }): Record<string, unknown> {
  let insertions = 0
  let deletions = 0
  for (const c of changes) { insertions += c.insertions; deletions += c.deletions }
  const base: Record<string, unknown> = { from_turn: opts.a, to_turn: opts.b, paths: changes.length, insertions, deletions, offset: opts.offset }
  // The first change of a page always fits (else paging would stop there): its patch is cut,
  // at a line end, as far as the bound needs (JSON escapes make it longer than its text).
  const fit = (o: Record<string, unknown>, room: number) => {
    if (typeof o.patch !== 'string') return null
    const patch = o.patch
    const note = (n: number) => `the patch has ${patch.length} characters; only the first ${n} are here: cpfs diff ${opts.spec} -- ${o.path as string} prints it whole`
    let n = patch.length
    do {
      n = Math.floor(n * Math.min(0.9, room / size({ ...o, patch: patch.slice(0, n), patch_cut: note(n) })))
      const end = patch.lastIndexOf('\n', n)
      if (end > 0) n = end + 1
      Object.assign(o, { patch: patch.slice(0, n), patch_cut: note(n) })
    } while (n > 0 && size(o) > room)
    if (size(o) > room) delete o.patch
    return size(o) <= room ? o : null
  }
  const { items, next } = pack(changes, opts.offset, opts.limit, opts.max - size(base) - TAIL, changeOut, fit)
  const out: Record<string, unknown> = { ...base, changes: items }
  if (next !== undefined) out.next_offset = next
  return out
}

/** rewind_dry_run: the agent SDKs' shape, with the list of paths paged and its total given. */
export function previewPage (p: { canRewind: boolean, error?: string, filesChanged: string[], insertions: number, deletions: number }, opts: { offset: number, limit: number, max: number }): Record<string, unknown> {
  const out: Record<string, unknown> = { canRewind: p.canRewind }
  if (p.error !== undefined) out.error = p.error
  const base = { ...out, insertions: p.insertions, deletions: p.deletions, filesChangedTotal: p.filesChanged.length }
  const { items, next } = pack(p.filesChanged, opts.offset, opts.limit, opts.max - size(base) - TAIL, (f: string) => rel(f))
  Object.assign(out, { filesChanged: items, insertions: p.insertions, deletions: p.deletions, filesChangedTotal: p.filesChanged.length })
  if (opts.offset > 0) out.offset = opts.offset
  if (next !== undefined) out.next_offset = next
  return out
}

/** A plan's summary (rewind, redo) with its paths in the tools' form and at most `shown` of them. */
export function summaryOut (s: PlanSummary | undefined | null, shown = 20): Record<string, unknown> | undefined {
  if (!s) return undefined
  const o: Record<string, unknown> = { ops: s.ops, verified: s.verified, bytesWritten: s.bytesWritten, changed: s.changed.slice(0, shown).map(rel), changedCount: s.changedCount ?? s.changed.length }
  if (s.recovered) o.recovered = true
  if (s.skipped?.length) Object.assign(o, { skipped: s.skipped.slice(0, shown).map(rel), skippedCount: s.skipped.length })
  return o
}

export type ToolResult = { content: Array<{ type: 'text', text: string }>, isError?: boolean }

export async function answer (max: number, fn: () => Promise<unknown>, notes: () => Promise<string[]> = async () => []): Promise<ToolResult> {
  try {
    const value = await fn()
    const extra = await notes()
    const text = typeof value === 'string' ? value : JSON.stringify(value)
    const content: ToolResult['content'] = [{ type: 'text', text: bounded(text, max - extra.reduce((n, x) => n + x.length, 0)) }]
    for (const n of extra) content.push({ type: 'text', text: n })
    return { content }
  } catch (err) {
    const e = isCpfsError(err) ? err : new CpfsError('INTERNAL', String((err as Error)?.message ?? err))
    return { content: [{ type: 'text', text: bounded(e.line(), max) }], isError: true }
  }
}

export const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }
export const BOUND = `The answer is JSON of at most ${MAX_CHARS.toLocaleString('en')} characters (max_chars changes it, ${MIN_CHARS.toLocaleString('en')} to ${LIMIT_CHARS.toLocaleString('en')}); paths are workspace-relative, without a leading "/" ("." is the workspace).`

/**
 * The input schema of a tool: its arguments, and nothing else. An unknown argument (a typo, an
 * argument of another tool) is refused with a message naming it and the ones the tool takes,
 * instead of being dropped without a word.
 */
export function args<T extends z.ZodRawShape> (tool: string, shape: T) {
  const names = Object.keys(shape)
  return z.object(shape, {
    errorMap: (issue, ctx) => issue.code === 'unrecognized_keys'
      ? { message: `unknown argument${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map(k => JSON.stringify(k)).join(', ')}: ${tool} takes ${names.length ? names.join(', ') : 'no arguments'}` }
      : { message: ctx.defaultError }
  }).strict()
}

export const maxChars = z.number().int().min(MIN_CHARS).max(LIMIT_CHARS).optional().describe(`the most characters the answer may have (default ${MAX_CHARS})`)
