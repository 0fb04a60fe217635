#!/usr/bin/env node
// What the readable field names of store version 4 cost on disk (docs/decisions.md, "Readable
// records"): typical records encoded as this version writes them (dist/store/codec.js) and as
// version 3 wrote them (the same values under one-letter names, encoded the same way), and
// decode time of each shape (version 3's through the conversion that reads it now).
//   npm run build && node bench/records.mjs
import { Packr } from 'msgpackr'
import { decodeEntry, encode, encodeEntry } from '../dist/store/codec.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })
const hash = () => Buffer.alloc(32, 7)
const now = 1796503615258
const meta = { mode: 0o644, uid: 1000, gid: 1000, atime: now, mtime: now + 2, ctime: now + 15, atimeNs: 907030, mtimeNs: 361577, ctimeNs: 400228, ino: 2 ** 52 + 99 }

/** v4 entry → the v3 value of the same entry (t, n, x, o, d). */
function v3 (e) {
  const { kind, newInTurn, xattrs, realPath, chunks, ...rest } = e
  const out = { t: kind, ...rest }
  if (newInTurn !== undefined) out.n = newInTurn
  if (xattrs !== undefined) out.x = xattrs
  if (realPath !== undefined) out.o = realPath
  if (chunks) out.d = [...chunks].sort((a, b) => a[0] - b[0]).flat()
  return packr.pack(out)
}

const cases = {
  'new file, 1 chunk, new in the turn': { kind: 'f', ...meta, size: 4000, newInTurn: 1, chunks: new Map([[0, hash()]]) },
  'edited real file, 1 chunk, src': { kind: 'f', ...meta, ino: 1234567, size: 200000, src: '/src/app/main.ts', srcSize: 200000, chunks: new Map([[1, hash()]]) },
  'file with an xattr': { kind: 'f', ...meta, size: 10, xattrs: { 'user.mime_type': Buffer.from('text/plain') }, chunks: new Map([[0, hash()]]) },
  'inode record of a real file': { kind: 'f', ...meta, ino: 1234567, size: 5, links: 2, realPath: '/pair2', chunks: new Map([[0, hash()]]) },
  'new directory': { kind: 'd', ...meta, mode: 0o755, opaque: 1, fresh: 1, newInTurn: 1 },
  whiteout: { kind: 'w' },
  'hard-link name': { kind: 'h', ino: 2 ** 52 + 99, newInTurn: 1 }
}

const rows = []
for (const [name, e] of Object.entries(cases)) {
  const a = v3(e).length
  const b = encodeEntry(e).length
  rows.push([name, a, b, `${b - a >= 0 ? '+' : ''}${b - a} (${((b / a - 1) * 100).toFixed(0)} %)`])
}
const fp = { ino: 1234567, size: 200000, mode: 0o644, at: now }
const fp3 = packr.pack({ t: 'f', ...fp, m: now, mn: 361577, c: now, cn: 400228 }).length
const fp4 = encode({ type: 'f', ...fp, mtime: now, mtimeNs: 361577, ctime: now, ctimeNs: 400228 }).length
rows.push(['fingerprint', fp3, fp4, `+${fp4 - fp3} (${((fp4 / fp3 - 1) * 100).toFixed(0)} %)`])
console.log(['record', 'v3 bytes', 'v4 bytes', 'cost'].join('\t'))
for (const r of rows) console.log(r.join('\t'))

// Decoding: a v4 record, and a v3 record through the conversion (once per record and load).
const e = cases['new file, 1 chunk, new in the turn']
const bufs = { v4: encodeEntry(e), 'v3 (converted)': v3(e) }
for (const [name, buf] of Object.entries(bufs)) {
  for (let i = 0; i < 100000; i++) decodeEntry(buf) // warm up
  const n = 1000000
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) decodeEntry(buf)
  console.log(`decodeEntry ${name}: ${(Number(process.hrtime.bigint() - t0) / n).toFixed(0)} ns`)
}
