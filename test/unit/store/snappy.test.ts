// Snappy's raw format, decoding (src/store/snappy.ts), from hand-made blocks as the format
// description gives them, and what a damaged block still yields.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { snappy, snappyDecode } from '../../../src/store/snappy.js'

t.test('Snappy: literals, copies that overlap, and damage', async t => {
  // "xababab" as the format description shows it: literal "xab", copy offset 2 length 4.
  t.equal(snappyDecode(Buffer.from([7, 2 << 2, 0x78, 0x61, 0x62, 0x01 | (0 << 2), 2])).toString(), 'xababab')
  // A literal of 100 bytes (length in one more byte), a copy with a 2-byte offset.
  const lit = randomBytes(100)
  const s = Buffer.concat([Buffer.from([164, 1]), Buffer.from([60 << 2, 99]), lit, Buffer.from([0x02 | (63 << 2), 100, 0])])
  t.same(snappyDecode(s), Buffer.concat([lit, lit.subarray(0, 64)]))
  t.throws(() => snappyDecode(Buffer.from([4, 0x01, 5])), { code: 'TABLE_FORMAT' }, 'a copy before any output')
  t.throws(() => snappyDecode(Buffer.from([9, 2 << 2, 0x78, 0x61, 0x62])), { code: 'TABLE_FORMAT' }, 'output shorter than announced')
})


t.test('copies with 1-, 2- and 4-byte offsets, and a long literal', async t => {
  // A literal of 5 bytes, then copy-1 (offset 5, length 4): tag 0x01 | (len-4)<<2 | (offset>>8)<<5.
  t.equal(snappyDecode(Buffer.from([9, 4 << 2, ...Buffer.from('hello'), 0x01, 5])).toString(), 'hellohell')
  // copy-4 (tag 11): length 3, offset 5 as four bytes.
  t.equal(snappyDecode(Buffer.from([8, 4 << 2, ...Buffer.from('hello'), 0x03 | (2 << 2), 5, 0, 0, 0])).toString(), 'hellohel')
  // A literal whose length takes two more bytes (tag 61 << 2): 300 bytes.
  const lit = randomBytes(300)
  t.same(snappyDecode(Buffer.concat([Buffer.from([0xac, 0x02, 61 << 2, 299 & 0xff, 299 >> 8]), lit])), lit)
  t.equal(snappyDecode(Buffer.from([0])).length, 0, 'an empty block')
})

t.test('a damaged block: what decodes before the damage, and why it stops', async t => {
  const r = snappy(Buffer.from([10, 4 << 2, ...Buffer.from('hello'), 0x01, 9]))
  t.equal(r.out.toString(), 'hello', 'the literal before a copy that reaches too far back')
  t.type(r.error, 'string')
  t.match(snappy(Buffer.from([0x80])).error ?? '', /length/, 'a length that does not end')
  t.throws(() => snappyDecode(Buffer.from([5, 4 << 2, 0x61])), { code: 'TABLE_FORMAT' }, 'a literal cut short')
  t.equal(snappy(Buffer.from([3, 2 << 2, 0x61, 0x62, 0x63])).error, undefined, 'and an intact one has no error')
})
