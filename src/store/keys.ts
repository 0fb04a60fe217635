// LevelDB key layout (utf8 keys). Layer ids are zero-padded so keys sort numerically.
//   m                 store metadata (stack of layer ids, redo stack, applied stack, counters)
//   t<layer>          turn record for a layer (time, message, external id)
//   e<layer><path>    layer entry (paths start with "/", the workspace root is "/")
//   b<path>           base entry: the real directory's original state of a path, captured
//                     before a plan first changed it
//   c<hex>            chunk bytes, keyed by SHA-256 (stores of version 4 and before; read, never written)
//   r<hex>            where a chunk's bytes are: [pack id, offset, length] (store/packs.ts)
//   R<hex>            a chunk a lazy clone holds on its remote only: where the remote has it
//                     (store/remote-chunks.ts; an r<hex> of the same chunk wins)
//   o<path>           fingerprint: what cpfs last knew of the real path (store/fingerprints.ts)
//   j                 the journal of a plan in progress (its header: plans/journal.ts)
//   J<index>          the parts of that journal (operations, expectations, fingerprints)
//   w                 the last write-ahead-log record LevelDB holds (wal.ts)
//   u<layer><seq>     a change made underneath the mount by another process while that layer
//                     was the head: who, when, whether its earlier content was kept
//                     (daemon/underneath.ts)
//   p<process>        a process that changed something in the mount: pid, user, start, command
//                     line, parent (session/processes.ts); entries name theirs in `by`
//                     (session/attribution.ts)
//   s                 the integrity witness (integrity.ts); a the anchors of a plan (plans/commit.ts)
//   x<n>              step n: a labelled span of a turn (a tool call, a command) and the
//                     layers it changed (session/steps.ts)
//   X<id>             the number of the step with external id <id> (a tool_use_id)

export const META_KEY = 'm'
export const JOURNAL_KEY = 'j'
/** The paths the last plan skipped because another process changed them (cpfs status). */
export const SKIPPED_KEY = 'k'

export function layerId (n: number): string {
  return n.toString().padStart(10, '0')
}

export function turnKey (layer: number): string {
  return 't' + layerId(layer)
}

export function entryKey (layer: number, path: string): string {
  return 'e' + layerId(layer) + path
}

export function entryPrefix (layer: number): string {
  return 'e' + layerId(layer)
}

export function underneathKey (layer: number, seq: number): string {
  return 'u' + layerId(layer) + seq.toString().padStart(16, '0')
}

export function underneathPrefix (layer: number): string {
  return 'u' + layerId(layer)
}

export function processKey (id: string): string {
  return 'p' + id
}

export const PROCESS_PREFIX = 'p'
export const STEP_PREFIX = 'x'

export function stepKey (n: number): string {
  return STEP_PREFIX + layerId(n)
}

export function stepIdKey (id: string): string {
  return 'X' + id
}

export function baseKey (path: string): string {
  return 'b' + path
}

export function chunkKey (hex: string): string {
  return 'c' + hex
}

export function refKey (hex: string): string {
  return 'r' + hex
}

export const REF_PREFIX = 'r'
export const LEGACY_CHUNK_PREFIX = 'c'
export const REMOTE_CHUNK_PREFIX = 'R'

export function remoteChunkKey (hex: string): string {
  return REMOTE_CHUNK_PREFIX + hex
}

/** Upper bound for a prefix range scan. */
export function prefixEnd (prefix: string): string {
  return prefix + '\uffff'
}

export type BatchOp =
  | { type: 'put', key: string, value: Buffer }
  | { type: 'del', key: string }
