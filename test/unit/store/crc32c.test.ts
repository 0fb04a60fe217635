// CRC32C as LevelDB uses it (src/store/crc32c.ts): published check values, LevelDB's mask, and
// the one changed byte that explains a mismatch.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { crc32c, locateByte, maskCrc, unmaskCrc } from '../../../src/store/crc32c.js'
import { rng } from '../helpers.js'

t.test('CRC32C and LevelDB\'s mask', async t => {
  t.equal(crc32c(Buffer.from('123456789')), 0xe3069283, 'the check value of CRC-32C')
  // LevelDB's own test vectors (util/crc32c_test.cc), iSCSI's (RFC 3720 B.4)
  t.equal(crc32c(Buffer.alloc(32)), 0x8a9136aa)
  t.equal(crc32c(Buffer.alloc(32, 0xff)), 0x62a8ab43)
  t.equal(crc32c(Buffer.from(Array.from({ length: 32 }, (_, i) => i))), 0x46dd794e)
  t.equal(crc32c(Buffer.from(Array.from({ length: 32 }, (_, i) => 31 - i))), 0x113fdb5c)
  const b = randomBytes(1000)
  t.equal(crc32c(b, 0, 1000), crc32c(b.subarray(0, 1000)), 'a range is the same as a slice')
  t.equal(crc32c(b, 3, 997), crc32c(b.subarray(3, 997)), 'at any alignment')
  for (const c of [0, 1, 0xe3069283, 0xffffffff]) t.equal(unmaskCrc(maskCrc(c)), c)
  t.not(maskCrc(0xe3069283), 0xe3069283)
})


t.test('a one-byte change is located; two changes are not explained', async t => {
  const r = rng(21)
  for (const len of [1, 7, 8, 9, 100, 4096]) {
    const data = randomBytes(len)
    const stored = maskCrc(crc32c(data))
    t.equal(locateByte(data, stored), null, `${len} bytes, intact: nothing to locate`)
    const at = r(len)
    const was = data[at]
    data[at] ^= 1 + r(255)
    t.same(locateByte(data, stored), { at, byte: was }, `${len} bytes: the byte at ${at} and what it was`)
    if (len > 1) {
      const other = (at + 1 + r(len - 1)) % len
      data[other] ^= 0x80
      t.equal(locateByte(data, stored), null, `${len} bytes, two bytes changed: no single byte explains it`)
    }
  }
  // A damaged byte of the stored CRC itself: located past the data.
  const data = randomBytes(50)
  const stored = maskCrc(crc32c(data))
  const wrong = (stored ^ (0x5a << 8)) >>> 0
  t.same(locateByte(data, wrong), { at: 51, byte: (stored >>> 8) & 0xff }, 'in the checksum, its second byte')
})
