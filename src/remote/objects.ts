// What a remote holds (docs/decisions.md, "History beyond one machine"). Under the remote's
// prefix:
//
//   packs/<sha256>.pack        chunks, compressed, in the local pack format (store/pack-format.ts)
//   index/<sha256>             which chunks each pack of one push holds, and where
//   trees/<sha256>             a layer (one turn's records) or a workspace's root tree
//   workspaces/<name>/ref      a workspace's history: the only object ever overwritten
//
// Every object but a ref is immutable and named by the SHA-256 of its content (a pack: of its
// header and its record headers, which hold each chunk's SHA-256 — the local packs' Merkle
// name). A reader checks every object against its name before it uses anything in it. A push
// writes packs, then the index, then trees, then the ref (compare-and-swap): a crash at any
// point leaves objects nothing refers to, never a ref to something missing.
import { createHash } from 'node:crypto'
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib'
import { CpfsError } from '../errors.js'
import { decode, encode } from '../store/codec.js'
import { isInoKey } from '../store/entries.js'
import { isSafePath } from '../paths/paths.js'

export const REMOTE_FORMAT = 1

export function sha256Hex (b: Buffer): string {
  return createHash('sha256').update(b).digest('hex')
}

export function packName (hex: string): string {
  return `packs/${hex}.pack`
}

export function indexName (hex: string): string {
  return `index/${hex}`
}

export function treeName (hex: string): string {
  return `trees/${hex}`
}

export function refName (workspace: string): string {
  return `workspaces/${workspace}/ref`
}

/** A workspace's name on a remote: one path component of letters, digits, . _ - */
export function checkWorkspaceName (name: string): string {
  if (!/^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/.test(name)) {
    throw new CpfsError('REMOTE_NAME', `${JSON.stringify(name)} cannot name a workspace on a remote`, 'use letters, digits, . _ and - (up to 128), not starting with . or -')
  }
  return name
}

/** Brotli at quality 5: 24–26% of raw on source trees, at ~40 MB/s on one core here. */
export function compress (b: Buffer): Buffer {
  return brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: b.length } })
}

/** A tree, index, ref or mark is never this big decompressed: a bigger one is an attack or damage. */
const MAX_OBJECT = 1024 * 1024 * 1024

export function decompress (b: Buffer, what: string, max = MAX_OBJECT): Buffer {
  try {
    return brotliDecompressSync(b, { maxOutputLength: max })
  } catch {
    throw damaged(what, 'it does not decompress')
  }
}

export function damaged (what: string, why: string): CpfsError {
  return new CpfsError('REMOTE_CORRUPT', `${what} on the remote is damaged: ${why}`, 'nothing was changed here; push it again from a machine that has it, or see cpfs remote ls')
}

/** A content-addressed object: its body (compressed MessagePack) and its name (hash of the MessagePack). */
export function sealObject (value: unknown): { hex: string, body: Buffer } {
  const raw = encode(value)
  return { hex: sha256Hex(raw), body: compress(raw) }
}

/** The name sealObject would give `value`, without compressing it. */
export function treeHash (value: unknown): string {
  return sha256Hex(encode(value))
}

/**
 * A layer's records alone (not its turn record, which sealing the turn changes): what a head
 * turn held when this workspace and the remote last matched (config.ts noteSyncedHead).
 */
export function recordsHash (layer: RemoteLayer): string {
  return sha256Hex(encode(layer.records))
}

/** The value of a content-addressed object, checked against its name. */
export function openObject<T> (body: Buffer, hex: string, what: string): T {
  const raw = decompress(body, what)
  if (sha256Hex(raw) !== hex) throw damaged(what, 'its content does not match its name')
  try {
    return decode<T>(raw)
  } catch {
    throw damaged(what, 'it does not decode')
  }
}

/** One turn's layer: its turn record (without the local layer id) and its records, as stored. */
export interface RemoteLayer {
  kind: 'layer'
  /** The turn record's fields but `layer`, as the store encodes them. */
  turn: Buffer
  /** [entry key after the layer prefix (a path or #ino), the record's bytes], in key order. */
  records: Array<[string, Buffer]>
}

/** The workspace as it was before cpfs changed it (the lower): every path, content by chunk. */
export interface RemoteRoot {
  kind: 'root'
  /** [path, entry record bytes (complete: no src, no redirect)], in path order. */
  entries: Array<[string, Buffer]>
}

/** Which chunks the packs of one push hold. */
export interface RemoteIndex {
  packs: Array<{
    name: string
    /** Flat: [SHA-256, offset of the data, stored length, chunk length, compression] per chunk. */
    chunks: Array<Buffer | number>
  }>
}

export interface RemoteBranch {
  n: number
  /** Tree names of its layers, turn 1 first. */
  stack: string[]
  leftAt: number
  by: string
  what?: string
  mergeBase?: number
  unsure?: string[]
}

/** A workspace's history on the remote (the mutable object; compare-and-swap). */
export interface RemoteRef {
  format: number
  /** The history this ref continues: set by the first push of a store, kept by its clones. */
  lineage: string
  pushedAt: number
  host: string
  /** The workspace path that pushed (for people, not for cpfs). */
  from: string
  root: string
  /**
   * Which store's layer the last of `stack` is (`<store id>:<layer id>`): the head layer keeps
   * changing until its turn is sealed, so that store may replace it; anyone else must pull first.
   */
  head: string
  /** Tree names of the turns' layers, turn 1 first (the last is the head turn as pushed). */
  stack: string[]
  /** Turns made of several layers: a turn layer's tree → its parts' trees, oldest first. */
  parts: Record<string, string[]>
  branches: RemoteBranch[]
  /** Every pack that holds a chunk this ref reaches, and the indexes that say where. */
  packs: string[]
  indexes: string[]
  /** The processes the layers' records name (attribution): [id, record bytes]. */
  processes: Array<[string, Buffer]>
  /** Chunks and their bytes (uncompressed) that this ref reaches: what `remote ls` shows. */
  chunks: number
  bytes: number
}

/** Every tree a ref reaches. */
export function refTrees (ref: RemoteRef): Set<string> {
  const out = new Set<string>([ref.root, ...ref.stack])
  for (const parts of Object.values(ref.parts)) for (const p of parts) out.add(p)
  for (const b of ref.branches) for (const t of b.stack) out.add(t)
  return out
}

export function encodeRef (ref: RemoteRef): Buffer {
  return compress(encode(ref))
}

export function decodeRef (body: Buffer, what: string): RemoteRef {
  let ref: RemoteRef
  try {
    ref = decode<RemoteRef>(decompress(body, what))
  } catch (err) {
    if (err instanceof CpfsError) throw err
    throw damaged(what, 'it does not decode')
  }
  if (typeof ref !== 'object' || ref === null || typeof ref.format !== 'number') throw damaged(what, 'it is not a cpfs ref')
  if (ref.format <= REMOTE_FORMAT && !wellFormed(ref)) throw damaged(what, 'its fields are not those of a cpfs ref')
  if (ref.format > REMOTE_FORMAT) throw new CpfsError('REMOTE_FORMAT', `${what} was written by a newer cpfs (remote format ${ref.format}; this one reads ${REMOTE_FORMAT})`, 'upgrade cpfs')
  return ref
}

const HEX = /^[0-9a-f]{64}$/

function names (x: unknown): boolean {
  return Array.isArray(x) && x.every(h => typeof h === 'string' && HEX.test(h))
}

/** Every field a reader uses, of the type it uses it as: a ref is the one object not checked against a name. */
function wellFormed (r: RemoteRef): boolean {
  return typeof r.lineage === 'string' && typeof r.head === 'string' && typeof r.root === 'string' && HEX.test(r.root) &&
    names(r.stack) && r.stack.length > 0 && names(r.packs) && names(r.indexes) &&
    typeof r.parts === 'object' && r.parts !== null && Object.entries(r.parts).every(([k, v]) => HEX.test(k) && names(v)) &&
    Array.isArray(r.branches) && r.branches.every(b => typeof b === 'object' && b !== null && Number.isInteger(b.n) && names(b.stack) && b.stack.length > 0) &&
    Array.isArray(r.processes) && typeof r.pushedAt === 'number' && typeof r.host === 'string' && typeof r.from === 'string'
}

/**
 * What a remote says is checked before anything is written: every path in its trees stays
 * inside the workspace (no '..', empty or '.' component, NUL), and the ref's turns are layers.
 */
export function checkTrees (ref: RemoteRef, trees: Map<string, RemoteLayer | RemoteRoot>): void {
  for (const [hex, t] of trees) {
    const keys = t.kind === 'root' ? t.entries.map(([p]) => p) : t.kind === 'layer' ? t.records.map(([k]) => k) : null
    if (keys === null) throw damaged(`tree ${hex}`, 'it is neither a layer nor a root tree')
    const bad = keys.find(k => !isInoKey(k) && !isSafePath(k))
    if (bad !== undefined) throw damaged(`tree ${hex}`, `it holds a path that would leave the workspace (${JSON.stringify(bad).slice(0, 80)})`)
  }
  const root = trees.get(ref.root)
  if (root !== undefined && root.kind !== 'root') throw damaged(`the ref`, 'its root is not a root tree')
  for (const h of [...ref.stack, ...Object.values(ref.parts).flat(), ...ref.branches.flatMap(b => b.stack)]) {
    const t = trees.get(h)
    if (t !== undefined && t.kind !== 'layer') throw damaged(`the ref`, `its turn ${h} is not a layer`)
  }
}
