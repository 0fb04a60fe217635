// Chunks a store holds on a remote only. A lazy clone (remote/clone.ts) fetches the chunks of
// its head view and records, for every other chunk its history names, where the remote has it
// (`R<hex>`, keys.ts). Reading such a chunk goes through the reader that remote/lazy.ts
// registers here: the store sits below the remote code and must not import it, and the read
// path (a FUSE read, a plan writing a file) is synchronous, so the reader blocks until the
// chunk is fetched, checked and cached.
import { CpfsError } from '../errors.js'
import { remoteChunkKey } from './keys.js'
import type { Store } from './store.js'

/**
 * The chunk's bytes (checked against `hex` by the caller too), fetched if need be — unless
 * `fetch` is false: then only a copy fetched earlier, or undefined. `place`: the R<hex> value.
 */
export type RemoteChunkReader = (storePath: string, hex: string, place: Buffer, fetch: boolean) => Buffer | undefined

let reader: RemoteChunkReader | undefined

export function setRemoteChunkReader (r: RemoteChunkReader): void {
  reader = r
}

/**
 * The bytes of a chunk the store holds on its remote only, or undefined when it names none.
 * Without `fetch`, a chunk not fetched before is a NOT_FETCHED error (reports that only
 * summarize, such as the log's line counts, read what is here and no more).
 */
export function readRemoteChunk (store: Store, hex: string, fetch = true): Buffer | undefined {
  const place = store.getSync(remoteChunkKey(hex))
  if (place === undefined) return undefined
  if (reader === undefined && fetch) {
    throw new CpfsError('REMOTE_CHUNK', `chunk ${hex} of this history is on its remote only, and this program cannot fetch it`, 'read it through the cpfs command or the cpfs library, which fetch it (or clone again with --full)')
  }
  const got = reader?.(store.path, hex, place, fetch)
  if (got === undefined) throw new CpfsError('NOT_FETCHED', `chunk ${hex} of this history is on its remote only`, 'cpfs diff, show or rewind fetch it')
  return got
}
