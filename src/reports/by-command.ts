// `cpfs diff [TURN | A..B] --by-command`: what turns changed, grouped by the process that
// changed each path (its command line and the commands it ran under), as `cpfs blame` names
// them; a path two processes changed is under both. Read-only.
import { inoOfKey, isInoKey } from '../store/entries.js'
import type { ProcessRecord } from '../session/processes.js'
import type { Session } from '../session/session.js'
import { byOf } from '../session/step-analysis.js'
import { describeProcess, type BlameProcess } from './blame.js'
import type { Change } from './changes.js'
import { diffTurns } from './preview.js'
import { viewOf } from '../plans/views.js'

export interface CommandChanges {
  /** The process (null: no process recorded — cpfs itself, or a history from before attribution). */
  process: BlameProcess | null
  changes: Change[]
}

export async function diffByCommand (session: Session, spec: string | undefined): Promise<{ a: number, b: number, commands: CommandChanges[] }> {
  const { a, b, changes } = await diffTurns(session, spec)
  const stack = session.meta.stack
  const after = await viewOf(session, stack.slice(0, b))
  // Which processes changed each path in turns a..b, in the order they first did.
  const who = new Map<string, string[]>()
  for (const layer of session.history.expand(stack.slice(a - 1, b))) {
    for (const key of session.history.layers.get(layer)?.keys() ?? []) {
      const paths = isInoKey(key) ? after.namesOf(inoOfKey(key)) : [key]
      const ids = byOf(session, layer, key)
      for (const p of paths) {
        const list = who.get(p) ?? []
        for (const id of ids.length ? ids : ['']) if (!list.includes(id)) list.push(id)
        who.set(p, list)
      }
    }
  }
  const groups = new Map<string, Change[]>()
  for (const c of changes) {
    for (const id of who.get(c.path) ?? who.get(c.from ?? '') ?? ['']) {
      const g = groups.get(id)
      if (g) g.push(c)
      else groups.set(id, [c])
    }
  }
  const cache = new Map<string, ProcessRecord | null>()
  const commands = [...groups].map(([id, cs]) => ({ process: id === '' ? null : describeProcess(session, id, cache), changes: cs }))
  return { a, b, commands }
}
