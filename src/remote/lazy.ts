// Lazy history: the chunks a clone left on its remote (store/remote-chunks.ts) are fetched
// when something reads them — a rewind, a diff, a file of an older turn read in a mount — and
// kept in the store's cache directory, so each is fetched once per machine.
//
// The read path is synchronous (a FUSE read answers from ChunkStore.get), so the fetch runs
// in a worker thread (lazy-worker.ts) while this thread waits on a shared word: the mount
// stalls for one ranged GET, the way a network filesystem does. The worker fetches the chunk
// and what follows it in its pack (READAHEAD): a file is pushed in order, so reading an old
// file whole costs a request per few MiB, not per chunk.
import * as fs from 'node:fs'
import { Worker } from 'node:worker_threads'
import { CpfsError } from '../errors.js'
import { hashChunk } from '../store/chunks.js'
import { setRemoteChunkReader } from '../store/remote-chunks.js'
import { FAILED, WAITING, cachedChunkPath } from './lazy-protocol.js'

/** How long a read waits for its fetch: the S3 client's own retries end well before. */
const FETCH_TIMEOUT_MS = 5 * 60 * 1000
/** The failure's JSON, at most this long ([1] of the shared words holds its length). */
const MESSAGE_BYTES = 4096

interface Fetcher {
  worker: Worker
  state: Int32Array
  message: Uint8Array
}

const fetchers = new Map<string, Fetcher>()

/** The cached bytes, if they are there and still match their name. */
function cached (storePath: string, hex: string): Buffer | undefined {
  let data: Buffer
  try {
    data = fs.readFileSync(cachedChunkPath(storePath, hex))
  } catch {
    return undefined
  }
  return hashChunk(data).toString('hex') === hex ? data : undefined
}

function fetcherFor (storePath: string): Fetcher {
  let f = fetchers.get(storePath)
  if (f !== undefined) return f
  const state = new Int32Array(new SharedArrayBuffer(8))
  const message = new Uint8Array(new SharedArrayBuffer(MESSAGE_BYTES))
  const worker = new Worker(new URL('./lazy-worker.js', import.meta.url), { workerData: { storePath, state, message } })
  // An idle fetcher never keeps a command from ending.
  worker.unref()
  worker.on('error', () => fetchers.delete(storePath))
  worker.on('exit', () => fetchers.delete(storePath))
  fetchers.set(storePath, f = { worker, state, message })
  return f
}

/** Fetch chunk `hex` into the cache, blocking this thread until it is there or has failed. */
function fetchSync (storePath: string, hex: string, place: Buffer): void {
  const f = fetcherFor(storePath)
  Atomics.store(f.state, 0, WAITING)
  f.worker.postMessage({ hex, place })
  if (Atomics.wait(f.state, 0, WAITING, FETCH_TIMEOUT_MS) === 'timed-out') {
    void f.worker.terminate()
    fetchers.delete(storePath)
    throw new CpfsError('REMOTE_UNREACHABLE', `fetching chunk ${hex} of this lazy clone's history took over ${FETCH_TIMEOUT_MS / 60000} minutes`, 'check that the remote it was cloned from is up and reachable, then run the command again')
  }
  if (Atomics.load(f.state, 0) === FAILED) {
    const len = Atomics.load(f.state, 1)
    const e = JSON.parse(Buffer.from(f.message.subarray(0, len)).toString('utf8')) as { code: string, message: string, hint?: string }
    throw new CpfsError(e.code, e.message, e.hint)
  }
}

function readRemote (storePath: string, hex: string, place: Buffer, fetch: boolean): Buffer | undefined {
  const hit = cached(storePath, hex)
  if (hit !== undefined || !fetch) return hit
  fetchSync(storePath, hex, place)
  const got = cached(storePath, hex)
  if (got === undefined) throw new CpfsError('REMOTE_FAILED', `chunk ${hex} was fetched but is not in ${cachedChunkPath(storePath, hex)}`, 'check the free space and permissions of the store directory, then run the command again')
  return got
}

setRemoteChunkReader(readRemote)
