// What lazy.ts (the reading thread) and lazy-worker.ts (the fetching thread) share: where a
// fetched chunk is kept, and the values of the word the reader waits on. Kept apart so the
// worker loads neither the store nor LevelDB.
import { join } from 'node:path'

/** The word's values: 0 while fetching, 1 done, 2 failed (the failure, JSON, in the message buffer). */
export const WAITING = 0
export const DONE = 1
export const FAILED = 2

/** Where a fetched chunk is kept: store/remote-cache/chunks/ab/abcd… */
export function cachedChunkPath (storePath: string, hex: string): string {
  return join(storePath, 'remote-cache', 'chunks', hex.slice(0, 2), hex)
}
