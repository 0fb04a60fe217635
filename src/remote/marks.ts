// gc marks: what `cpfs remote gc` found unreachable, written before anything is deleted
// (`gc/<time in ms>`, a compressed MessagePack list of object names). A later gc deletes only
// what a mark at least one grace period old named and no ref reaches then; a push does not
// build on a marked object, and checks the marks again right before its ref swap (push.ts).
// That is what keeps a concurrent push from being robbed without any lock (docs/decisions.md).
import { decode, encode } from '../store/codec.js'
import { compress, decompress } from './objects.js'
import type { Bucket } from './s3.js'

export interface Mark {
  /** Its object's name, gc/<at>. */
  name: string
  at: number
  objects: string[]
}

export async function readMarks (bucket: Bucket): Promise<Mark[]> {
  const out: Mark[] = []
  for (const o of await bucket.list('gc/')) {
    const m = /^gc\/(\d+)$/.exec(o.key)
    if (!m) continue
    const got = await bucket.get(o.key)
    if (got === null) continue // removed by the gc that replaced it
    let objects: string[]
    try {
      objects = decode<string[]>(decompress(got.body, o.key))
    } catch {
      continue // unreadable: a mark that cannot be read marks nothing (nothing is deleted for it)
    }
    out.push({ name: o.key, at: Number(m[1]), objects })
  }
  return out.sort((a, b) => a.at - b.at)
}

export async function writeMark (bucket: Bucket, at: number, objects: string[]): Promise<string> {
  const name = `gc/${at}`
  await bucket.put(name, compress(encode(objects)))
  return name
}

/** Every object any mark names. */
export function markedObjects (marks: Mark[]): Set<string> {
  const out = new Set<string>()
  for (const m of marks) for (const o of m.objects) out.add(o)
  return out
}
