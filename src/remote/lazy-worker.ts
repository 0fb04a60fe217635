// The fetching side of lazy.ts, in a worker thread: one request at a time, from a thread that
// waits on `state` for it. A chunk's place (its R<hex> record) names its pack, offset, stored
// length, full length and compression; the worker reads that record and up to READAHEAD bytes
// of the records after it, checks each chunk against its SHA-256 and writes it to the cache
// (a private name, then a rename: a reader never sees half a chunk; a second process
// fetching the same chunk writes the same bytes).
import * as fs from 'node:fs'
import { dirname } from 'node:path'
import { randomBytes } from 'node:crypto'
import { parentPort, workerData } from 'node:worker_threads'
import { decodePlace } from './chunk-index.js'
import { RECORD_HEADER, readRecordHeader } from '../store/pack-format.js'
import { DONE, FAILED, cachedChunkPath } from './lazy-protocol.js'
import type { Bucket } from './s3.js'

/** Bytes after the wanted record read with it: the rest of an old file, most likely. */
const READAHEAD = 4 * 1024 * 1024

const { storePath, state, message } = workerData as { storePath: string, state: Int32Array, message: Uint8Array }
let bucket: Bucket | undefined

parentPort!.on('message', (req: { hex: string, place: Uint8Array }) => {
  fetchInto(req.hex, Buffer.from(req.place)).then(() => {
    Atomics.store(state, 0, DONE)
  }, (err: any) => {
    const text = Buffer.from(JSON.stringify({
      code: typeof err?.code === 'string' ? err.code : 'REMOTE_FAILED',
      message: String(err?.message ?? err).slice(0, 1500),
      hint: typeof err?.hint === 'string' ? err.hint.slice(0, 1000) : undefined
    }))
    const n = Math.min(text.length, message.length)
    message.set(text.subarray(0, n))
    Atomics.store(state, 1, n)
    Atomics.store(state, 0, FAILED)
  }).finally(() => Atomics.notify(state, 0))
})

async function openBucket (): Promise<Bucket> {
  const [{ lazySource }, { Bucket, parseS3Url }] = await Promise.all([import('./config.js'), import('./s3.js')])
  const src = lazySource(storePath)
  if (src === undefined) throw new Error(`${storePath} names chunks on a remote but not the remote (remotes.json has no "lazy")`)
  return new Bucket({ ...parseS3Url(src.url), ...(src.endpoint !== undefined ? { endpoint: src.endpoint } : {}) })
}

async function fetchInto (hex: string, raw: Buffer): Promise<void> {
  const { pack, offset, stored } = decodePlace(raw)
  bucket ??= await openBucket()
  const { openChunk, readRange } = await import('./fetch.js')
  const { damaged } = await import('./objects.js')
  const what = `pack ${pack}`
  const body = await readRange(bucket, pack, offset - RECORD_HEADER, offset + stored + READAHEAD)
  let first = true
  for (let at = 0; at + RECORD_HEADER <= body.length;) {
    const r = readRecordHeader(body.subarray(at, at + RECORD_HEADER))
    const end = at + RECORD_HEADER + (typeof r === 'string' ? 0 : r.stored)
    if (typeof r === 'string' || end > body.length) {
      if (first) throw damaged(what, `no record of chunk ${hex} where its index says (${typeof r === 'string' ? r : 'torn'})`)
      break
    }
    const name = r.hash.toString('hex')
    if (first && name !== hex) throw damaged(what, `the record at ${offset - RECORD_HEADER} holds chunk ${name}, not ${hex}`)
    let data: Buffer
    try {
      data = openChunk(body.subarray(at + RECORD_HEADER, end), r, what)
    } catch (err) {
      // The chunk asked for must check; one read ahead that does not only ends the readahead.
      if (first) throw err
      break
    }
    keep(name, data, first)
    first = false
    at = end
  }
}

/** Into the cache; a chunk read ahead is not written again, the one asked for is (its copy there may be damaged). */
function keep (hex: string, data: Buffer, asked: boolean): void {
  const file = cachedChunkPath(storePath, hex)
  if (!asked && fs.existsSync(file)) return
  fs.mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`
  fs.writeFileSync(tmp, data, { mode: 0o600 })
  fs.renameSync(tmp, file)
}
