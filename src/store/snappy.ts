// Snappy's raw format, decoding only (LevelDB compresses table blocks with it; tables.ts reads
// them), written from Snappy's format_description.txt: the uncompressed length as a varint,
// then elements, each a tag byte whose low two bits say literal (00) or copy with a 1-, 2- or
// 4-byte offset (01, 10, 11).
import { CpfsError } from '../errors.js'

/** Snappy's raw format: varint length, then literals and copies (format_description.txt). */
export function snappyDecode (src: Uint8Array): Buffer {
  const { out, error } = snappy(src)
  if (error) throw new CpfsError('TABLE_FORMAT', error)
  return out
}

/** What decodes, and where it stops if it does not all decode (a damaged block's prefix). */
export function snappy (src: Uint8Array): { out: Buffer, error?: string } {
  // The uncompressed length: a little-endian varint of at most 32 bits.
  let len = 0
  let p = 0
  for (let shift = 1; ; shift *= 128) {
    if (p >= src.length || shift > 2 ** 28) return { out: Buffer.alloc(0), error: 'Snappy length does not read' }
    len += (src[p] & 0x7f) * shift
    if (src[p++] < 0x80) break
  }
  if (len > 0xffffffff) return { out: Buffer.alloc(0), error: 'Snappy length too large' }
  const out = Buffer.allocUnsafe(len)
  let o = 0
  const stop = (error: string): { out: Buffer, error: string } => ({ out: out.subarray(0, o), error })
  while (p < src.length) {
    const tag = src[p++]
    if ((tag & 3) === 0) {
      let n = tag >>> 2
      if (n >= 60) {
        const bytes = n - 59 // the length takes 1-4 more bytes, little-endian
        if (p + bytes > src.length) return stop('Snappy literal length cut short')
        n = 0
        for (let i = bytes - 1; i >= 0; i--) n = n * 256 + src[p + i]
        p += bytes
      }
      n += 1
      if (p + n > src.length || o + n > len) return stop('Snappy literal runs past its end')
      out.set(src.subarray(p, p + n), o)
      o += n
      p += n
      continue
    }
    let length: number
    let offset: number
    const bytes = [0, 1, 2, 4][tag & 3]
    if (p + bytes > src.length) return stop('Snappy copy cut short')
    if ((tag & 3) === 1) {
      length = ((tag >>> 2) & 7) + 4
      offset = ((tag >>> 5) << 8) | src[p]
    } else {
      length = (tag >>> 2) + 1
      offset = bytes === 2 ? src[p] | src[p + 1] << 8 : (src[p] | src[p + 1] << 8 | src[p + 2] << 16 | src[p + 3] << 24) >>> 0
    }
    p += bytes
    if (offset === 0 || offset > o || o + length > len) return stop('Snappy copy points outside the output')
    // Byte by byte: a copy may overlap what it writes (a run).
    for (let i = 0; i < length; i++, o++) out[o] = out[o - offset]
  }
  return o === len ? { out } : stop(`Snappy output is ${o} bytes, ${len} announced`)
}

