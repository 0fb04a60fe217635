// What the history says of itself: the turns of the stack, with the paths each changed and
// how much (cpfs log, the hook's and MCP's summaries).
import type { Lower } from '../real/lower.js'
import { View } from '../overlay/view.js'
import { chunkLen, inoOfKey, isInoKey, type Entry } from '../store/entries.js'
import type { UnderneathWrite } from '../store/underneath.js'
import type { History, LabelledRecord } from './history.js'
import type { RealCapture } from './capture.js'
import type { Space } from './space.js'
import type { Store } from '../store/store.js'
import { decode } from '../store/codec.js'
import { SKIPPED_KEY } from '../store/keys.js'
import { plannedRetention, type RetentionPlan, type RetentionReader } from './retention-plan.js'

export interface TurnInfo {
  turn: number
  layer: number
  openedAt: number
  sealedAt: number | null
  /** What the turn was opened for (a prompt, a command). */
  prompt: string | null
  /** What the turn did, given when it was sealed (cpfs turn -m). */
  message: string | null
  id: string | null
  files: number
  bytes: number
  head: boolean
  /** The paths it changed: as `cpfs diff T` lists them when the log has lines, else as its layer recorded them. */
  changes: Array<{ path: string, change: 'added' | 'modified' | 'deleted' | 'mode' | 'type' | 'symlink' | 'moved' | 'owner' | 'xattrs' }>
  /** Lines added and removed in text files (cpfs log; not computed for hooks). */
  insertions?: number
  deletions?: number
  /** Changes made underneath the mount that this turn holds: how many, and who made the first (store/underneath.ts). */
  underneath?: { count: number, first: UnderneathWrite[] }
}

/**
 * The turns of the stack. `changed[i]`, when given, holds the paths turn i+1 really changed
 * (as `cpfs diff` counts them): its bytes are then those of these paths only. A file
 * written again with the bytes it had (tsc rewriting its outputs, a restore to what is
 * there) is in the layer, but changed nothing: "0 paths ... 21 KiB" said otherwise.
 */
export function turnLog (history: History, lower: Lower, changed?: Array<Set<string>>, stack = history.meta.stack, from = 0): TurnInfo[] {
  const out: TurnInfo[] = []
  stack.forEach((layer, i) => {
    if (i < from) return
    const rec: LabelledRecord = history.store.turnRecord(layer)
    const entries = turnEntries(history, layer)
    const keep = changed?.[i]
    let files = 0
    let bytes = 0
    const changes: TurnInfo['changes'] = []
    const listed = new Set<string>()
    const records: Array<[number, Entry, number]> = []
    for (const [p, e] of entries) {
      let b = 0
      if (e.kind === 'f') for (const [idx, c] of e.chunks) if (c) b += chunkLen(e.size, idx)
      if (isInoKey(p)) {
        records.push([inoOfKey(p), e, b])
        continue
      }
      if (!keep || keep.has(p)) bytes += b
      if (e.kind === 'd' && e.newInTurn !== 1 && !e.redirect) continue
      files++
      listed.add(p)
      changes.push({ path: p, change: e.kind === 'w' ? 'deleted' : e.newInTurn === 1 ? 'added' : 'modified' })
    }
    // An inode record changed (a write through a hard link): its names changed.
    if (records.length) {
      const view = View.build(lower, history.expand(stack.slice(0, i + 1)).map(id => history.layers.get(id) ?? new Map()))
      for (const [ino, e, b] of records) {
        const names = view.namesOf(ino)
        const o = e.kind !== 'w' && e.kind !== 'h' ? e.realPath : undefined
        if (o !== undefined && view.resolve(o)?.key === '#' + ino) names.push(o)
        if (!keep || names.some(p => keep.has(p))) bytes += b
        for (const p of names) {
          if (listed.has(p)) continue
          listed.add(p)
          files++
          changes.push({ path: p, change: 'modified' })
        }
      }
    }
    changes.sort((a, b) => a.path < b.path ? -1 : 1)
    out.push({
      turn: i + 1,
      layer,
      openedAt: rec.openedAt,
      sealedAt: rec.sealedAt ?? null,
      prompt: rec.prompt ?? rec.message ?? null,
      message: rec.summary ?? null,
      id: rec.id ?? null,
      files,
      bytes,
      head: stack === history.meta.stack && i === stack.length - 1,
      changes
    })
  })
  return out
}

/**
 * What a turn's layers recorded, merged: its parts' (steps.ts) then its own, the later entry of
 * a path winning, except that a path a part made new stays new, and one made and removed again
 * within the turn is no change of the turn.
 */
function turnEntries (history: History, layer: number): Map<string, Entry> {
  const parts = history.partsOf(layer)
  const own = history.layers.get(layer) ?? new Map<string, Entry>()
  if (parts.length === 0) return own
  const out = new Map<string, Entry>()
  for (const id of [...parts, layer]) {
    for (const [p, e] of history.layers.get(id) ?? []) {
      const before = out.get(p)
      if (before !== undefined && before.kind !== 'w' && before.newInTurn === 1) {
        if (e.kind === 'w') out.delete(p)
        else out.set(p, { ...e, newInTurn: 1 } as Entry)
      } else out.set(p, e)
    }
  }
  return out
}

export interface SessionStatus {
  workspace: string
  store: string
  head: number
  turns: number
  pending: number
  redo: number
  /** Branches kept besides the head's stack (cpfs log --all). */
  branches: number
  /** What retention will drop next, and when (session/retention.ts); null when config.json cannot be read. */
  retention: RetentionPlan | null
  headChanges: number
  /** Paths the last plan left alone because another process changed them meanwhile. */
  skipped: string[]
  /** Mounted: when a write was last refused because the store's disk is below the reserve (ms). */
  spaceRefusedAt?: number
  /** Mounted: big real files whose original bytes are being read into the store (background capture). */
  capturing?: number
}

/** What sessionStatus reads of a session. */
export interface StatusParts {
  workspace: string
  store: Store
  head: number
  overlay: { head: Map<string, Entry> }
  capture: Pick<RealCapture, 'capturing'>
  space: Pick<Space, 'refusedAt'>
  pending: () => number
}

/** What `cpfs status` says of a session (Session.status). */
export function sessionStatus (s: StatusParts): SessionStatus {
  const skipped = s.store.getSync(SKIPPED_KEY)
  const capturing = s.capture.capturing
  return {
    workspace: s.workspace,
    store: s.store.path,
    head: s.head,
    turns: s.store.meta.stack.length,
    pending: s.pending(),
    redo: s.store.meta.redo.length,
    branches: (s.store.meta.branches ?? []).length,
    retention: retentionOrNull({ meta: s.store.meta, store: s.store }),
    headChanges: s.overlay.head.size,
    skipped: skipped ? decode<string[]>(skipped) : [],
    ...(s.space.refusedAt ? { spaceRefusedAt: s.space.refusedAt } : {}),
    ...(capturing ? { capturing } : {})
  }
}

function retentionOrNull (s: RetentionReader): RetentionPlan | null {
  try {
    return plannedRetention(s)
  } catch {
    return null // a bad config.json is reported by the commands that apply it, not by status
  }
}
