// The journal of a plan in progress (src/plans/journal.ts): front-coded paths, and journals read
// back from a real store as recover reads them.
import t from 'tap'
import { frontCode, frontDecode } from '../../../src/plans/journal.js'
import { decode, encode } from '../../../src/store/codec.js'
import { randomPath, rng } from '../helpers.js'

t.test('front-coded paths come back the same', async t => {
  const r = rng(3)
  for (let i = 0; i < 500; i++) {
    const paths = Array.from({ length: r(30) }, () => randomPath(r))
    // Through MessagePack: a lone half of a surrogate pair would not come back from UTF-8.
    t.same(frontDecode(decode(encode(frontCode(paths)))), paths)
  }
  let deep = ''
  const tree: string[] = []
  for (let i = 0; i < 3000; i++) tree.push(deep += '/d')
  const coded = encode(frontCode([...tree, ...tree.slice().reverse()]))
  t.ok(coded.length < 100_000, `a 3,000-level tree and back up: ${coded.length} bytes, not ${2 * 3000 * 3000} of whole paths`)
  // Journals in parts (front-coded) and whole (earlier versions): test/compat.test.ts, through a real crash.
})

