// The daemon's memory budgets (issue 21): every cache and buffer that grows with the work has a
// size here, settable like the other settings (config.ts): an environment variable first, then
// "memory" in $CPFS_HOME/config.json, e.g.
//   { "memory": { "chunkCache": "16M", "dirty": "8M", "inflight": "16M", "levelCache": "4M", "heap": "2G" } }
// What the defaults cost and save is measured in docs/decisions.md ("Bounded daemon memory", and
// "Daemon memory, second pass" for the 4 MiB chunk cache).
import { CpfsError } from '../errors.js'
import { parseSize, readConfig } from './config.js'

export interface MemoryBudgets {
  /** Chunks kept after a read or a write (ChunkStore's read cache). */
  chunkCache: number
  /** Written bytes not yet in a batch: past this, a batch is cut at once (Persister). */
  dirty: number
  /** Chunk bytes handed to LevelDB and not written yet: past this, WRITEs wait (Persister). */
  inflight: number
  /** LevelDB's block cache (its memtable is LEVEL_WRITE_BUFFER in store.ts, 4 MiB). */
  levelCache: number
  /**
   * V8's old-space ceiling for the daemon (--max-old-space-size): a safety limit, not a target
   * (a session of 1,000,000 paths needs GBs; dying at the ceiling loses the work), so the default
   * stays three quarters of the machine's memory. What keeps the heap small is the growing
   * factor (daemons.ts), not this.
   */
  heap: number | null
}

const MiB = 1024 * 1024

export const DEFAULT_BUDGETS: Readonly<MemoryBudgets> = {
  chunkCache: 4 * MiB,
  dirty: 8 * MiB,
  inflight: 16 * MiB,
  levelCache: 4 * MiB,
  heap: null
}

/** The smallest each budget may be: below it a single request (1 MiB WRITE) or chunk would not fit. */
const MINIMUM: Record<keyof MemoryBudgets, number> = {
  chunkCache: 0,
  dirty: MiB,
  inflight: 2 * MiB,
  levelCache: 0,
  heap: 64 * MiB
}

const ENV: Record<keyof MemoryBudgets, string> = {
  chunkCache: 'CPFS_CHUNK_CACHE',
  dirty: 'CPFS_DIRTY_BYTES',
  inflight: 'CPFS_INFLIGHT_BYTES',
  levelCache: 'CPFS_LEVEL_CACHE',
  heap: 'CPFS_HEAP'
}

/** The budgets in force: environment, then config.json's "memory", then the defaults. */
export function memoryBudgets (): MemoryBudgets {
  const conf = readConfig().memory ?? {}
  if (typeof conf !== 'object' || Array.isArray(conf)) {
    throw new CpfsError('BAD_CONFIG', '"memory" in config.json is not an object', 'write it like { "memory": { "dirty": "8M" } }, or remove it')
  }
  const out: MemoryBudgets = { ...DEFAULT_BUDGETS }
  for (const key of Object.keys(ENV) as Array<keyof MemoryBudgets>) {
    const raw = process.env[ENV[key]] ?? conf[key]
    if (raw === undefined || raw === '') continue
    const n = parseSize(raw)
    if (n < MINIMUM[key]) {
      throw new CpfsError('BAD_CONFIG', `the memory budget ${key} (${ENV[key]}) is ${n} bytes, below its minimum of ${MINIMUM[key]}`, `set it to ${MINIMUM[key] / MiB}M or more`)
    }
    out[key] = n
  }
  return out
}
