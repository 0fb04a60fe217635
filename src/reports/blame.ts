// `cpfs blame PATH`: every turn that changed a path, with what changed and who changed it —
// the processes the mount recorded (session/attribution.ts), each with its command line and
// the commands it ran under, and the writes other processes made underneath the mount
// (daemon/underneath.ts). Read-only.
import { decode, entryBy } from '../store/codec.js'
import { inoKey, type Entry } from '../store/entries.js'
import { entryKey, processKey } from '../store/keys.js'
import { underneathOf } from '../store/underneath.js'
import type { ProcessRecord } from '../session/processes.js'
import type { Session } from '../session/session.js'
import type { Change } from './changes.js'
import { diffTurns } from './preview.js'
import { Membership } from '../session/step-analysis.js'
import type { StepRecord } from '../session/steps.js'

/** How many ancestors of a process a blame line shows (the records hold up to PARENT_DEPTH). */
const SHOWN_PARENTS = 4

export interface BlameProcess {
  pid: number
  uid: number
  command: string
  started: number
  /** Its ancestors' commands, nearest first (a shell, the tool that ran it, the agent). */
  parents: Array<{ pid: number, command: string }>
}

export interface BlameLine {
  turn: number
  /** What the turn did to the path, as `cpfs diff TURN -- PATH` says; null when nothing shows (changed and changed back). */
  change: Change['change'] | null
  insertions: number
  deletions: number
  /** Who: a process in the mount, a process writing underneath it, or nobody recorded (cpfs itself, or a store from before attribution). */
  by: 'mount' | 'underneath' | 'unrecorded'
  /** When the path last changed in that turn (ms; its ctime then), null for a deletion. */
  at: number | null
  process: BlameProcess | null
  /** The step (a tool call, a command) the change was made in, when one was open. */
  step: { n: number, id: string | null, label: string } | null
}

export interface Blame {
  path: string
  lines: BlameLine[]
}

/** Every turn of the stack that changed workspace path `path` ('/a/b'), oldest first. */
export async function blamePath (session: Session, path: string): Promise<Blame> {
  await session.persister.flushAll(false)
  const stack = session.meta.stack
  await session.history.load(stack)
  const lines: BlameLine[] = []
  const processes = new Map<string, ProcessRecord | null>()
  // A hard link's changes are its inode record's (entries.ts): the one its link entry in the
  // nearest layer names, or, for a real file with several names, the one of its real inode.
  const real = session.lower.stat(path)
  const realKey = real !== null && real.kind !== 'd' && ('nlink' in real ? real.nlink : real.links ?? 1) > 1 ? inoKey(real.ino) : null
  let ino: number | null = null
  let viaReal = realKey !== null
  for (let i = 0; i < stack.length; i++) {
    const turn = i + 1
    let change: Change | null | undefined
    // A turn's parts (steps) first, then its own layer: one line per layer and process.
    for (const layer of session.history.expand([stack[i]])) {
      const entries = session.history.layers.get(layer)
      const own = entries?.get(path)
      if (own !== undefined) {
        ino = own.kind === 'h' ? own.ino : null
        viaReal = false // the path names something of its own from here on
      }
      const keys = [path]
      if (ino !== null) keys.push(inoKey(ino))
      else if (viaReal && realKey !== null) keys.push(realKey)
      const by = changedBy(session, layer, keys)
      const outside = (await underneathOf(session.store, layer, Infinity)).first.filter(w => '/' + w.path === path)
      if (!keys.some(k => entries?.has(k)) && by.length === 0 && outside.length === 0) continue
      if (change === undefined) change = (await diffTurns(session, String(turn), { paths: [path] })).changes.find(c => c.path === path || c.from === path) ?? null
      const base = { turn, change: change?.change ?? null, insertions: change?.insertions ?? 0, deletions: change?.deletions ?? 0 }
      const at = changedAt(keys.map(k => entries?.get(k)))
      const steps = stepsOf(session, layer)
      for (const id of by) lines.push({ ...base, by: 'mount', at, process: describeProcess(session, id, processes), step: stepOf(session, steps, id) })
      for (const w of outside) lines.push({ ...base, by: 'underneath', at: w.at, process: { pid: w.pid, uid: -1, command: w.command, started: 0, parents: [] }, step: null })
      if (by.length === 0 && outside.length === 0) lines.push({ ...base, by: 'unrecorded', at, process: null, step: null })
    }
  }
  return { path, lines }
}

/** The steps that were open while `layer` was the head (a part's record says). */
function stepsOf (session: Session, layer: number): StepRecord[] {
  const ns = layer === session.headLayer ? session.steps.open : session.store.turnRecord(layer).steps ?? []
  const out: StepRecord[] = []
  for (const n of ns) {
    const r = session.steps.record(n)
    if (r) out.push(r)
  }
  return out
}

/** Of the steps open in a layer, the one process `id` belongs to (session/step-analysis.ts). */
function stepOf (session: Session, steps: StepRecord[], id: string): BlameLine['step'] {
  const s = steps.find(s => new Membership(session, s).member(id, true))
  return s ? { n: s.n, id: s.id ?? null, label: s.label } : null
}

/**
 * The processes that changed `keys` in `layer`, in the order they first did: the head's from
 * the mount's memory (what its next batch stores), any layer's from its entries' records.
 */
function changedBy (session: Session, layer: number, keys: string[]): string[] {
  const out = new Set<string>()
  for (const key of keys) {
    const live = layer === session.headLayer ? session.attribution.byOf(key) : undefined
    for (const id of live ?? entryBy(session.store.getSync(entryKey(layer, key))) ?? []) out.add(id)
  }
  return [...out]
}

/** When the path last changed in a layer: the latest ctime of its entries there (null: none, or a deletion). */
function changedAt (entries: Array<Entry | undefined>): number | null {
  let at: number | null = null
  for (const e of entries) if (e !== undefined && 'ctime' in e) at = Math.max(at ?? 0, e.ctime)
  return at
}

function record (session: Session, id: string, cache: Map<string, ProcessRecord | null>): ProcessRecord | null {
  if (!cache.has(id)) {
    const raw = session.store.getSync(processKey(id))
    cache.set(id, raw ? decode<ProcessRecord>(raw) : null)
  }
  return cache.get(id)!
}

export function describeProcess (session: Session, id: string, cache: Map<string, ProcessRecord | null>): BlameProcess | null {
  const rec = record(session, id, cache)
  if (rec === null) return null
  const parents: BlameProcess['parents'] = []
  let up = rec.parent
  while (up !== null && parents.length < SHOWN_PARENTS) {
    const p = record(session, up, cache)
    if (p === null) break
    parents.push({ pid: p.pid, command: p.command })
    up = p.parent
  }
  return { pid: rec.pid, uid: rec.uid, command: rec.command, started: rec.started, parents }
}
