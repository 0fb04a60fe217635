// The search of cpfs bisect (src/session/bisect-range.ts), against a brute force: for every
// place the first bad turn can be, with and without turns that cannot be tested, the search
// ends at it (or at the smallest range the skips allow), testing each turn at most once.
import t from 'tap'
import { BisectRange, verdictOf, type Verdict } from '../../../src/session/bisect-range.js'

/** Run the search on turns good..bad where `judge` says what each turn is; returns the outcome and the turns tested. */
function search (good: number, bad: number, judge: (t: number) => Verdict): { outcome: ReturnType<BisectRange['outcome']>, tested: number[] } {
  const r = new BisectRange(good, bad)
  const tested: number[] = []
  for (let next = r.next(); next !== null; next = r.next()) {
    tested.push(next)
    r.record(next, judge(next))
  }
  return { outcome: r.outcome(), tested }
}

t.test('exit codes read as git bisect run reads them', async t => {
  t.equal(verdictOf(0), 'good')
  t.equal(verdictOf(1), 'bad')
  t.equal(verdictOf(127), 'bad')
  t.equal(verdictOf(125), 'skip')
  t.equal(verdictOf(128), null, '128 and above stop the search')
  t.equal(verdictOf(255), null)
  t.equal(verdictOf(null, 'SIGKILL'), null, 'a signal stops it')
})

t.test('every first bad turn is found, in about log2 probes, each turn tested once', async t => {
  for (let bad = 2; bad <= 40; bad += 7) {
    for (let first = 2; first <= bad; first++) {
      const { outcome, tested } = search(1, bad, (x) => x >= first ? 'bad' : 'good')
      t.same(outcome, { first }, `1..${bad}, first bad ${first}`)
      t.equal(new Set(tested).size, tested.length, 'no turn tested twice')
      t.ok(tested.every(x => x > 1 && x < bad), 'the ends are not tested again')
      t.ok(tested.length <= Math.ceil(Math.log2(bad)), `${tested.length} probes for ${bad - 1} turns`)
    }
  }
})

t.test('skipped turns: stepped around, and a range when they sit next to the first bad one', async t => {
  // 4 and 5 cannot be tested, 6 is the first bad: one of 4-6.
  t.same(search(1, 10, (x) => x === 4 || x === 5 ? 'skip' : x >= 6 ? 'bad' : 'good').outcome, { oneOf: [4, 6] })
  // A skipped turn away from the answer changes nothing.
  t.same(search(1, 10, (x) => x === 3 ? 'skip' : x >= 7 ? 'bad' : 'good').outcome, { first: 7 })
  // Every turn between untestable: the range is all of them and the bad end.
  t.same(search(2, 6, () => 'skip').outcome, { oneOf: [3, 6] })
  // Brute force over every skip pattern of 1..8 and every first bad turn: the answer holds it.
  for (let mask = 0; mask < 1 << 6; mask++) {
    for (let first = 2; first <= 8; first++) {
      const skip = (x: number) => x > 1 && x < 8 && (mask & (1 << (x - 2))) !== 0
      const { outcome } = search(1, 8, (x) => skip(x) ? 'skip' : x >= first ? 'bad' : 'good')
      const [a, b] = 'first' in outcome ? [outcome.first, outcome.first] : outcome.oneOf
      if (!(a <= first && first <= b)) t.fail(`mask ${mask}, first ${first}: ${JSON.stringify(outcome)}`)
      // Everything in the range but its last turn was skipped: it could not be narrowed.
      for (let x = a; x < b; x++) if (!skip(x)) t.fail(`mask ${mask}: ${x} was testable yet left in ${a}-${b}`)
    }
  }
  t.pass('every skip pattern of 6 turns')
})

t.test('a good end after the bad one is refused', async t => {
  t.throws(() => new BisectRange(5, 3), { code: 'BAD_RANGE' })
  t.throws(() => new BisectRange(3, 3), { code: 'BAD_RANGE' })
  t.throws(() => new BisectRange(1, 5).outcome(), /not done/, 'no outcome before the search is done')
})
