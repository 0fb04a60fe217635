// Directory cookies (src/fuse/cookies.ts): the order, the reserved offsets, collisions, and a
// reader that is cut anywhere while the directory changes under it, as getdents(2) through the
// kernel is. Every name neither added nor removed during a listing comes back, and exactly once
// unless it shares its hash with another name and a reply was cut inside their group.
import t from 'tap'
import { compareCookies, cookieBefore, FIRST_COOKIE, keyedHash, Listing, Listings, replyAfter, type Cookie, type NameHash } from '../../../src/fuse/cookies.js'

const rec = (name: string): number => 24 + Buffer.byteLength(name) // a plain record, roughly
const big = (c: Cookie): bigint => (BigInt(c.hi) << 32n) | BigInt(c.lo)

/** keyedHash, remembered (the simulations list thousands of names hundreds of times). */
function memo (h: NameHash): NameHash {
  const m = new Map<string, Cookie>()
  return n => m.get(n) ?? m.set(n, h(n)).get(n) as Cookie
}

/** A seeded generator, so that a failure can be replayed. */
function rng (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = s
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

t.test('cookies are positive 63-bit values above the reserved offsets, stable per key', async t => {
  const h = keyedHash('k1')
  for (let i = 0; i < 5000; i++) {
    const c = h(`name-${i}`)
    t.ok(c.hi >= 0 && c.hi <= 0x7fffffff && c.lo >= 0 && c.lo <= 0xffffffff, 'two 32-bit halves, the top bit clear')
    if (big(c) < BigInt(FIRST_COOKIE)) t.fail('a name took a reserved offset')
  }
  t.same(keyedHash('k1')('a.txt'), h('a.txt'), 'same key, same cookie')
  t.not(big(keyedHash('k2')('a.txt')), big(h('a.txt')), 'another key, another cookie')
  t.equal(big(cookieBefore({ hi: 5, lo: 0 })), (5n << 32n) - 1n, 'the cookie before carries across the halves')
})

t.test('a listing is in cookie order, resumes after any cookie, and keeps groups together', async t => {
  const hashes: Record<string, Cookie> = { a: { hi: 0, lo: 9 }, b: { hi: 0, lo: 7 }, c: { hi: 1, lo: 3 }, d: { hi: 0, lo: 7 }, e: { hi: 0, lo: 100 } }
  const l = new Listing(Object.keys(hashes), n => hashes[n])
  t.same(l.entries.map(e => e.name), ['b', 'd', 'a', 'e', 'c'], 'by cookie, ties by name')
  t.equal(l.after({ hi: 0, lo: 0 }), 0)
  t.equal(l.after({ hi: 0, lo: 2 }), 0, "after '..': the first name")
  t.equal(l.after({ hi: 0, lo: 6 }), 0, 'a cookie of no name: the next one')
  t.equal(l.after({ hi: 0, lo: 7 }), 2, "after a group's cookie: past the whole group")
  t.equal(l.after({ hi: 0, lo: 101 }), 4)
  t.equal(l.after({ hi: 2, lo: 0 }), 5, 'past the end')
  t.equal(l.groupEnd(0), 2)
  t.equal(l.groupEnd(2), 3)

  const all = replyAfter(l, { hi: 0, lo: 0 }, 1000, rec, n => n)
  t.same(all, [
    { name: 'b', next: { hi: 0, lo: 6 }, value: 'b' },
    { name: 'd', next: { hi: 0, lo: 7 }, value: 'd' },
    { name: 'a', next: { hi: 0, lo: 9 }, value: 'a' },
    { name: 'e', next: { hi: 0, lo: 100 }, value: 'e' },
    { name: 'c', next: { hi: 1, lo: 3 }, value: 'c' }
  ], "a group's members but the last resume at the group's start")
  t.same(replyAfter(l, { hi: 0, lo: 0 }, rec('b') + rec('d') - 1, rec, n => n), 'too big', 'a group that cannot fit at all')
  t.same((replyAfter(l, { hi: 0, lo: 9 }, rec('e'), rec, n => n) as Array<{ name: string }>).map(p => p.name), ['e'], 'as much as fits')
  t.same(replyAfter(l, { hi: 0, lo: 0 }, 1000, rec, n => n === 'd' ? null : n).slice(0, 2), [
    { name: 'b', next: { hi: 0, lo: 7 }, value: 'b' },
    { name: 'a', next: { hi: 0, lo: 9 }, value: 'a' }
  ], "a gone member is left out, and the group's last found one moves past it")
})

/**
 * Read a changing directory the way the kernel does: each call returns some of a reply (cut
 * anywhere) and resumes after the last name used. Returns how often each untouched name came.
 */
function readWhileChanging (seed: number, h: NameHash, snapshot: boolean): { missing: string[], twice: string[], collided: Set<string> } {
  const rand = rng(seed)
  const names = new Set<string>()
  for (let i = 0; i < 2000; i++) names.add(`f${i}`)
  const touched = new Set<string>()
  const seen = new Map<string, number>()
  let from: Cookie = { hi: 0, lo: 0 }
  let listing = new Listing([...names], h)
  let made = 0
  for (let guard = 0; guard < 100000; guard++) {
    if (!snapshot || rand() < 0.2) listing = new Listing([...names], h) // a fresh listing, or the kept one
    const reply = replyAfter(listing, from, 200 + Math.floor(rand() * 2000), rec, n => names.has(n) ? n : null)
    if (reply === 'too big') throw new Error('too big')
    if (reply.length === 0) break
    const used = 1 + Math.floor(rand() * reply.length) // getdents took only part of it
    for (const p of reply.slice(0, used)) seen.set(p.name, (seen.get(p.name) ?? 0) + 1)
    from = reply[used - 1].next
    for (let k = 0; k < 20; k++) { // another process removes and creates names meanwhile
      const victim = `f${Math.floor(rand() * 2000)}`
      if (names.delete(victim)) touched.add(victim)
      const fresh = `new${made++}`
      names.add(fresh)
      touched.add(fresh)
    }
  }
  const collided = new Set<string>()
  const byCookie = new Map<bigint, string[]>()
  for (const n of [...names, ...touched]) {
    const k = big(h(n))
    byCookie.set(k, [...(byCookie.get(k) ?? []), n])
  }
  for (const group of byCookie.values()) if (group.length > 1) for (const n of group) collided.add(n)
  const untouched = [...names].filter(n => !touched.has(n))
  return {
    missing: untouched.filter(n => !seen.has(n)),
    twice: untouched.filter(n => (seen.get(n) ?? 0) > 1),
    collided
  }
}

t.test('a listing cut anywhere while names come and go: every untouched name exactly once', async t => {
  for (const snapshot of [false, true]) {
    for (let seed = 1; seed <= 6; seed++) {
      const r = readWhileChanging(seed, memo(keyedHash(`key${seed}`)), snapshot)
      t.same(r.missing, [], `seed ${seed}${snapshot ? ', kept listings' : ''}: none missing`)
      t.same(r.twice, [], `seed ${seed}${snapshot ? ', kept listings' : ''}: none twice`)
    }
  }
})

t.test('with collisions forced (a 12-bit hash): nothing lost, repeats only inside a group', async t => {
  const strong = memo(keyedHash('w'))
  let repeated = 0
  const weak: NameHash = n => ({ hi: 0, lo: FIRST_COOKIE + Number(big(strong(n)) % 4096n) })
  for (let seed = 1; seed <= 10; seed++) {
    const r = readWhileChanging(seed, weak, seed % 2 === 0)
    t.same(r.missing, [], `seed ${seed}: none missing`)
    t.same(r.twice.filter(n => !r.collided.has(n)), [], `seed ${seed}: only names that share a hash come twice`)
    repeated += r.twice.length
  }
  t.ok(repeated > 0, `groups were cut: ${repeated} names came twice, none was lost`)
})

t.test('kept listings: fresh at offset 0, by path, bounded', async t => {
  const h = keyedHash('k')
  const ls = new Listings(2, 10)
  let calls = 0
  const list = (names: string[]) => () => { calls++; return new Listing(names, h) }
  const a = ls.get(5, '/a', true, list(['x']))
  t.equal(ls.get(5, '/a', false, list(['y'])), a, 'reused after offset 0')
  t.not(ls.get(5, '/a', true, list(['y'])), a, 'offset 0 lists again')
  t.equal(ls.get(5, '/moved', false, list(['z'])).entries[0].name, 'z', 'another path: listed again')
  ls.get(6, '/b', true, list(['1']))
  ls.get(7, '/c', true, list(['2']))
  const before = calls
  ls.get(5, '/moved', false, list(['w']))
  t.equal(calls, before + 1, 'the least recently used went when a third came')
  ls.get(8, '/big', true, list(Array.from({ length: 11 }, (_, i) => `n${i}`)))
  ls.get(8, '/big', false, list(['q']))
  t.equal(calls, before + 2, 'a listing over the bound of names is kept while it is the only one')
  ls.clear()
  ls.get(8, '/big', false, list(['q']))
  t.equal(calls, before + 3, 'cleared: listed again')
  t.ok(compareCookies({ hi: 1, lo: 0 }, { hi: 0, lo: 0xffffffff }) > 0, 'the high half first')
})
