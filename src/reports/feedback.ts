// What an agent is told after a tool call (Claude Code's PostToolUse `additionalContext`, the
// MCP tool `changes_since`): what the call changed and what deserves a second look, in a few
// lines. An agent's context is precious: bounded, and nothing at all for a call that changed
// nothing and met nothing worth a look.
import type { StepReport } from './step-report.js'

/** The most characters the feedback takes. */
export const FEEDBACK_MAX = 1500
/** Paths listed per kind of change. */
const LISTED = 6

export function feedbackText (r: StepReport, workspace: string): string | null {
  if (r.changes.length === 0 && r.flags.length === 0) return null
  const s = r.step
  const what = s.tool ? `this ${s.tool} call` : `step ${s.n} (${s.label})`
  const { added, modified, deleted } = r.counts
  const lines: string[] = []
  if (r.changes.length === 0) lines.push(`cpfs: ${what} changed no file in ${workspace}.`)
  else {
    const parts = [added && `created ${added}`, modified && `modified ${modified}`, deleted && `deleted ${deleted}`].filter(Boolean)
    lines.push(`cpfs: ${what} ${parts.join(', ')} path${r.changes.length === 1 ? '' : 's'} in ${workspace}:`)
    for (const [sign, kind] of [['+', 'added'], ['~', null], ['-', 'deleted']] as const) {
      const of = r.changes.filter(c => kind === null ? c.change !== 'added' && c.change !== 'deleted' : c.change === kind)
      if (of.length === 0) continue
      const shown = of.slice(0, LISTED).map(c => c.path.slice(1) + (c.kind === 'd' ? '/' : ''))
      lines.push(`  ${sign} ${shown.join(', ')}${of.length > LISTED ? ` and ${of.length - LISTED} more` : ''}`)
    }
  }
  for (const f of r.flags) lines.push(`Check: ${f}`)
  if (r.changes.length > 0) lines.push(`Undo only this call: cpfs undo --step ${s.id ?? s.n}`)
  let text = lines.join('\n')
  if (text.length > FEEDBACK_MAX) text = text.slice(0, FEEDBACK_MAX - 1) + '…'
  return text
}
