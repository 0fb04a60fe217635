// Values in the store are MessagePack (msgpackr). Records are plain objects so that the
// on-disk format does not depend on shared structure definitions: a store stays readable
// by any later version that knows the same field names.
import { Packr } from 'msgpackr'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })

export function encode (value: unknown): Buffer {
  return packr.pack(value)
}

export function decode<T> (buf: Buffer | Uint8Array): T {
  return packr.unpack(buf) as T
}
