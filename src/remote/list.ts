// cpfs remote ls: the workspaces under a remote's prefix, from their refs alone.
import { inBatches } from './chunk-index.js'
import { readRef } from './refs.js'
import { Bucket, type S3Location } from './s3.js'

export interface RemoteWorkspace {
  name: string
  turns: number
  branches: number
  pushedAt: number
  host: string
  from: string
  /** Bytes of file data the history reaches (uncompressed), and its chunks. */
  bytes: number
  chunks: number
  packs: number
}

export async function listWorkspaces (loc: S3Location): Promise<RemoteWorkspace[]> {
  const bucket = new Bucket(loc)
  try {
    const names = (await bucket.list('workspaces/')).map(o => /^workspaces\/([^/]+)\/ref$/.exec(o.key)?.[1]).filter((n): n is string => n !== undefined)
    const out: RemoteWorkspace[] = []
    await inBatches(names, 8, async (name) => {
      const r = await readRef(bucket, name)
      if (r === null) return // removed since the listing
      const ref = r.ref
      out.push({ name, turns: ref.stack.length, branches: ref.branches.length, pushedAt: ref.pushedAt, host: ref.host, from: ref.from, bytes: ref.bytes, chunks: ref.chunks, packs: ref.packs.length })
    })
    return out.sort((a, b) => a.name < b.name ? -1 : 1)
  } finally {
    bucket.destroy()
  }
}
