// `cpfs revert TURN` and `cpfs merge bN`: thin shells over merge-api.ts (loaded when they run).
import { CpfsError } from '../errors.js'
import type { MergeResult } from '../merge-api.js'
import { displayLine } from '../session/labels.js'
import { dirStore, json, target, type Command, type Flags } from './common.js'
import { out } from './output.js'

const mergeLib = async () => await import('../merge-api.js')
const dryRun = { 'dry-run': { type: 'boolean' as const } }

export const mergeCommands: Record<string, Command> = {
  revert: {
    options: { ...dirStore, ...dryRun, ...json },
    args: ['TURN', 'DIR?'],
    run: async (pos, f) => {
      const r = await (await mergeLib()).revert(pos.TURN!, { ...target(pos, f), dryRun: Boolean(f['dry-run']) })
      return report(r, f, `cpfs revert ${displayLine(pos.TURN!)} --dry-run --json`)
    }
  },
  merge: {
    options: { ...dirStore, ...dryRun, ...json },
    args: ['BRANCH', 'DIR?'],
    run: async (pos, f) => {
      const r = await (await mergeLib()).merge(pos.BRANCH!, { ...target(pos, f), dryRun: Boolean(f['dry-run']) })
      return report(r, f, `cpfs merge ${displayLine(pos.BRANCH!)} --dry-run --json`)
    }
  }
}

function report (r: MergeResult, f: Flags, showAll: string): number {
  if (f.json) out(JSON.stringify(r, null, 2))
  if (r.conflicts.length && !r.dryRun) {
    const shown = r.conflicts.slice(0, 5).map(c => `${displayLine(c.path.slice(1))} (${c.why})`).join(', ')
    const more = r.conflicts.length > 5 ? ` and ${r.conflicts.length - 5} more` : ''
    throw new CpfsError('MERGE_CONFLICT', `${r.what} conflicts at ${shown}${more}; nothing was changed`, `${showAll} shows each side; change those paths first, or rewind`)
  }
  if (f.json) return r.conflicts.length ? 1 : 0
  const paths = (n: number): string => `${n} path${n === 1 ? '' : 's'}`
  if (r.dryRun) {
    const lines = [r.changes.length ? `${r.what} would change ${paths(r.changes.length)}:` : `${r.what} would change nothing`]
    for (const c of r.changes) lines.push(`  ${c.change.padEnd(9)} ${displayLine(c.path.slice(1))}`)
    for (const c of r.conflicts) lines.push(`  conflict  ${displayLine(c.path.slice(1))} (${c.why})`)
    if (r.conflicts.length) lines.push(`${r.conflicts.length} conflict${r.conflicts.length === 1 ? '' : 's'}: ${r.what} would be refused`)
    out(lines.join('\n'))
    return r.conflicts.length ? 1 : 0
  }
  if (!r.applied) out(`nothing to do: the head already holds what ${r.what} would make`)
  else out(`${r.what}: turn ${r.turn} changed ${paths(r.changes.length)} (${r.changes.slice(0, 8).map(c => displayLine(c.path.slice(1))).join(', ')}${r.changes.length > 8 ? ', ...' : ''}); head is turn ${r.head}`)
  return 0
}
