// cpfs remote gc: delete what no ref on the remote reaches, in two steps a grace period apart
// so that a push in flight is never robbed (marks.ts). Each run:
//   1. reads every ref, and what they reach (packs, indexes, trees);
//   2. deletes the objects a mark at least one grace period old named that are still
//      unreachable (and that mark, once done);
//   3. marks the unreachable objects older than the grace period that no mark names yet.
// An object that a push made reachable since it was marked is kept, and unmarked.
import { inBatches } from './chunk-index.js'
import { readMarks, writeMark } from './marks.js'
import { refTrees, type RemoteRef } from './objects.js'
import { readRef } from './refs.js'
import { Bucket, type S3Location } from './s3.js'

export interface GcResult {
  /** Workspaces whose refs were read. */
  workspaces: number
  reachable: number
  /** Objects deleted now (a mark named them one grace period ago), and their bytes. */
  deleted: number
  deletedBytes: number
  /** Objects marked now: a gc one grace period from now deletes them if still unreachable. */
  marked: number
  markedBytes: number
  dryRun: boolean
}

export const DEFAULT_GRACE_HOURS = 24

export async function remoteGc (loc: S3Location, opts: { graceHours?: number, dryRun?: boolean, now?: number } = {}): Promise<GcResult> {
  const bucket = new Bucket(loc)
  try {
    return await gc(bucket, (opts.graceHours ?? DEFAULT_GRACE_HOURS) * 3600_000, Boolean(opts.dryRun), opts.now ?? Date.now())
  } finally {
    bucket.destroy()
  }
}

async function gc (bucket: Bucket, grace: number, dryRun: boolean, now: number): Promise<GcResult> {
  // The marks first, then the refs: an object a ref reaches by the time the refs are read is
  // kept, whatever a mark says.
  const marks = await readMarks(bucket)
  const reachable = await reachableObjects(bucket)
  const objects = new Map<string, { size: number, modified: number }>()
  for (const dir of ['packs/', 'index/', 'trees/']) for (const o of await bucket.list(dir)) objects.set(o.key, o)
  const doomed: string[] = []
  const done: string[] = []
  const alreadyMarked = new Set<string>()
  for (const m of marks) {
    const due = m.at <= now - grace
    for (const name of m.objects) {
      if (reachable.names.has(name) || !objects.has(name)) continue
      // Written again since it was marked (a push sends what it found marked anew, under the
      // same content-addressed name): that push may be about to reach it. Marked again instead.
      if (objects.get(name)!.modified > m.at) continue
      if (due) doomed.push(name)
      else alreadyMarked.add(name)
    }
    if (due) done.push(m.name)
  }
  const fresh: string[] = []
  for (const [name, o] of objects) {
    if (reachable.names.has(name) || alreadyMarked.has(name) || doomed.includes(name)) continue
    if (o.modified <= now - grace) fresh.push(name)
  }
  const bytes = (names: string[]): number => names.reduce((n, k) => n + (objects.get(k)?.size ?? 0), 0)
  const result: GcResult = { workspaces: reachable.refs, reachable: reachable.names.size, deleted: doomed.length, deletedBytes: bytes(doomed), marked: fresh.length, markedBytes: bytes(fresh), dryRun }
  if (dryRun) return result
  // Indexes go before the packs they name: a pusher never finds a chunk in an index whose pack
  // is gone (it also checks that the pack is listed, chunk-index.ts).
  const order = (k: string): number => k.startsWith('index/') ? 0 : k.startsWith('packs/') ? 1 : 2
  await bucket.remove(doomed.sort((a, b) => order(a) - order(b)))
  if (fresh.length) await writeMark(bucket, now, fresh)
  await bucket.remove(done)
  return result
}

/** What every ref under the prefix reaches: its packs, its indexes, its trees. */
async function reachableObjects (bucket: Bucket): Promise<{ refs: number, names: Set<string> }> {
  const names = new Set<string>()
  const refs = (await bucket.list('workspaces/')).map(o => /^workspaces\/([^/]+)\/ref$/.exec(o.key)?.[1]).filter((n): n is string => n !== undefined)
  let count = 0
  await inBatches(refs, 8, async (ws) => {
    const r = await readRef(bucket, ws)
    if (r === null) return
    count++
    addReached(r.ref, names)
  })
  return { refs: count, names }
}

function addReached (ref: RemoteRef, names: Set<string>): void {
  for (const p of ref.packs) names.add(`packs/${p}.pack`)
  for (const i of ref.indexes) names.add(`index/${i}`)
  for (const t of refTrees(ref)) names.add(`trees/${t}`)
}
