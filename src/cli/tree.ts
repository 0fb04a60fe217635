// `cpfs log --all` and `--graph`: the head's turns and every branch kept beside them.
import type { BranchInfo } from '../session/branch-log.js'
import type { TurnInfo } from '../session/session.js'
import { displayLine } from '../session/labels.js'
import { age, formatLog } from './format.js'
import { page, target, type Flags } from './common.js'
import { out } from './output.js'

const WHY: Record<BranchInfo['by'], string> = {
  rewind: 'a rewind',
  undo: 'an undo',
  discard: 'unmount --discard',
  redo: 'a redo (what was written after a rewind)',
  'outside changes': 'changes made outside cpfs (redo could no longer go back)',
  'older cpfs': 'a rewind before this version of cpfs',
  sandbox: 'a sandboxed run (cpfs exec --sandbox)',
  pull: 'cpfs pull (turns another machine pushed)'
}

function left (b: BranchInfo): string {
  const shares = b.shared === 0 ? 'shares only the original tree' : `shares turns 1-${b.shared}`
  const cmd = b.what === undefined ? '' : displayLine(b.what)
  const what = cmd ? `: ${cmd.length > 80 ? cmd.slice(0, 79) + '…' : cmd}` : ''
  return `branch ${b.branch}: left ${age(b.leftAt)} by ${WHY[b.by]}${what}; ${shares} with the head${b.redo ? '; cpfs redo goes back to it' : ''}`
}

/** The log, then each branch with its own turns (`cpfs rewind bN:T` goes to one, `cpfs rewind bN` to its tip). */
export function formatBranches (turns: TurnInfo[], branches: BranchInfo[]): string {
  const parts = [formatLog(turns)]
  for (const b of branches) {
    parts.push('', left(b), formatLog(b.turns, t => ' ' + (t as TurnInfo & { ref: string }).ref))
  }
  if (branches.length === 0) parts.push('', 'no other branch: nothing was rewound, undone or discarded')
  return parts.join('\n')
}

function row (mark: string, ref: string, t: TurnInfo): string {
  const what = displayLine(t.prompt ?? t.message ?? '')
  return `${mark.padEnd(3)} ${ref.padEnd(10)} ${t.openedAt > 0 ? age(t.openedAt).padEnd(8) : '-'.padEnd(8)} ${`${t.files} path${t.files === 1 ? '' : 's'}`.padEnd(10)} ${what.length > 60 ? what.slice(0, 59) + '…' : what}`.trimEnd()
}

/**
 * The tree, newest first, as git log --graph draws it: the head's turns on the left line, each
 * branch's own turns on a line of their own that joins the left one below the last turn they share.
 */
export function formatGraph (turns: TurnInfo[], branches: BranchInfo[]): string {
  const out: string[] = []
  const branch = (b: BranchInfo): void => {
    for (const bt of [...b.turns].reverse()) out.push(row('| o', bt.ref, bt))
    out.push(`|/   ${left(b)}`)
  }
  branches.filter(x => x.shared >= turns.length).forEach(branch)
  for (let i = turns.length; i >= 1; i--) {
    const t = turns[i - 1]
    out.push(row(t.head ? '*' : 'o', String(t.turn) + (t.head ? ' (head)' : ''), t))
    branches.filter(x => x.shared === i - 1).forEach(branch)
  }
  return out.join('\n')
}

/** `cpfs log --all | --graph [--json]`: the turns given, and the branches. */
export async function logTree (turns: TurnInfo[], pos: Record<string, string | undefined>, f: Flags): Promise<number> {
  const branches = await (await import('../tree-api.js')).branches(target(pos, f))
  await page(f)
  if (f.json) out(JSON.stringify({ turns, branches }, null, 2))
  else out(f.graph ? formatGraph(turns, branches) : formatBranches(turns, branches))
  return 0
}
