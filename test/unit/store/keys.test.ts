// The store's key layout (src/store/keys.ts): keys of one kind share a prefix and sort as their
// numbers do, so that a range scan reads one layer, in order, and nothing else.
import t from 'tap'
import { baseKey, chunkKey, entryKey, entryPrefix, layerId, prefixEnd, turnKey, underneathKey, underneathPrefix } from '../../../src/store/keys.js'
import { fingerprintKey } from '../../../src/store/fingerprints.js'
import { inoKey, inoOfKey, isInoKey } from '../../../src/store/entries.js'

/** As LevelDB orders keys: bytewise over UTF-8. */
const sorted = (keys: string[]): string[] => keys.slice().sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
const inRange = (key: string, prefix: string): boolean => key >= prefix && key < prefixEnd(prefix)

t.test('layer ids are fixed-width, so keys sort as numbers', async t => {
  t.equal(layerId(7), '0000000007')
  t.equal(layerId(2 ** 32), '4294967296')
  const layers = [1, 2, 9, 10, 11, 100, 99, 1_000_000]
  t.same(sorted(layers.map(turnKey)), layers.slice().sort((a, b) => a - b).map(turnKey), 'turn keys')
  t.same(sorted([underneathKey(3, 10), underneathKey(3, 9), underneathKey(3, 100)]), [underneathKey(3, 9), underneathKey(3, 10), underneathKey(3, 100)], 'changes underneath, by sequence')
})

t.test('a layer\'s prefix holds its entries and no other layer\'s', async t => {
  const paths = ['/', '/a', '/a/b', '/é', '/😀', '/\u{ffff}x', '/' + 'z'.repeat(5000)]
  for (const p of paths) {
    t.ok(inRange(entryKey(12, p), entryPrefix(12)), `entry ${p.slice(0, 20)} in layer 12's range`)
    t.notOk(inRange(entryKey(12, p), entryPrefix(1)), 'not in layer 1\'s')
    t.notOk(inRange(entryKey(12, p), entryPrefix(120)), 'nor in layer 120\'s')
  }
  t.ok(inRange(underneathKey(5, 1), underneathPrefix(5)))
  t.notOk(inRange(underneathKey(50, 1), underneathPrefix(5)))
  t.equal(entryKey(3, '/a').slice(entryPrefix(3).length), '/a', 'the path follows the prefix')
})

t.test('each kind of key has its own first letter', async t => {
  const first = [entryKey(1, '/a'), turnKey(1), baseKey('/a'), chunkKey('ab'), underneathKey(1, 1), fingerprintKey('/a')].map(k => k[0])
  t.same(first, ['e', 't', 'b', 'c', 'u', 'o'])
  t.equal(new Set(first).size, first.length)
})

t.test('inode records are keyed apart from paths', async t => {
  t.equal(inoKey(2 ** 52 + 3), '#4503599627370499')
  t.ok(isInoKey(inoKey(5)))
  t.notOk(isInoKey('/a'), 'a path is not an inode key')
  t.equal(inoOfKey(inoKey(2 ** 52 + 3)), 2 ** 52 + 3)
})
