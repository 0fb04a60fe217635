// Reading a workspace's ref: the one mutable object, read with its ETag so that the write
// that follows can be a compare-and-swap against exactly what was read.
import { decodeRef, refName, type RemoteRef } from './objects.js'
import type { Bucket } from './s3.js'

export async function readRef (bucket: Bucket, workspace: string): Promise<{ ref: RemoteRef, etag: string } | null> {
  const got = await bucket.get(refName(workspace))
  if (got === null) return null
  return { ref: decodeRef(got.body, `the ref of ${workspace}`), etag: got.etag }
}
