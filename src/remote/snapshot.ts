// What a push sends, taken in one exclusive step of the session (mounted: after the mount's
// queued changes have landed, so the head layer is read as it is at that instant): the
// stacks, and the records of every layer they reach, as the store holds them. Records are
// copied byte for byte: a layer pulled elsewhere and pushed again has the same bytes, so
// the same name on the remote.
import type { Session } from '../session/session.js'
import { decode, decodeEntry, encode } from '../store/codec.js'
import { hexName } from '../store/chunks.js'
import type { Branch } from '../store/branches.js'
import { PROCESS_PREFIX, entryPrefix, prefixEnd, turnKey } from '../store/keys.js'
import type { RemoteLayer } from './objects.js'

export interface LocalSnapshot {
  stack: number[]
  parts: Record<string, number[]>
  branches: Branch[]
  layers: Map<number, RemoteLayer>
  processes: Array<[string, Buffer]>
}

export async function takeSnapshot (session: Session): Promise<LocalSnapshot> {
  return await session.exclusive(async () => {
    await session.persister.flushAll(false)
    const meta = session.meta
    const stack = meta.stack.slice()
    const branches = structuredClone(meta.branches ?? [])
    const parts: Record<string, number[]> = {}
    const wanted = new Set<number>()
    for (const s of [stack, ...branches.map(b => b.stack)]) {
      for (const id of s) {
        wanted.add(id)
        const p = meta.parts?.[id]
        if (p !== undefined) {
          parts[id] = p.slice()
          for (const q of p) wanted.add(q)
        }
      }
    }
    const layers = new Map<number, RemoteLayer>()
    for (const id of [...wanted].sort((a, b) => a - b)) layers.set(id, await readLayer(session, id))
    // The head's chunks may be deleted again before its turn is sealed (a file written twice):
    // this push refers to them now.
    const head = layers.get(stack[stack.length - 1])
    for (const [, raw] of head?.records ?? []) {
      const e = decodeEntry(raw)
      if (e.kind === 'f') for (const ref of e.chunks.values()) if (ref) session.chunks.pin(hexName(ref))
    }
    const processes: Array<[string, Buffer]> = []
    for await (const [key, raw] of session.store.entries({ gte: PROCESS_PREFIX, lt: prefixEnd(PROCESS_PREFIX) })) processes.push([key.slice(1), Buffer.from(raw)])
    return { stack, parts, branches, layers, processes }
  })
}

async function readLayer (session: Session, id: number): Promise<RemoteLayer> {
  const raw = session.store.getSync(turnKey(id))
  const { layer, ...turn } = raw ? decode<Record<string, unknown>>(raw) : { layer: id, openedAt: 0 }
  const records: Array<[string, Buffer]> = []
  const prefix = entryPrefix(id)
  for await (const [key, value] of session.store.entries({ gte: prefix, lt: prefixEnd(prefix) })) records.push([key.slice(prefix.length), Buffer.from(value)])
  return { kind: 'layer', turn: encode(turn), records }
}
