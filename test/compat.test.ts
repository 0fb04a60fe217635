// Histories written by older cpfs still read, mount and apply byte-exact: cpfs 0.1 (dense chunk
// lists in which 1 meant "the same bytes as the lower file", millisecond times, store version
// 1), cpfs 0.2 (sparse chunk maps, ns times, store version 2, hard links as copies) and store
// version 3 (one-letter field names in records: a fixture written by that version). And a
// name longer than the real directory takes (cpfs 0.1 and 0.2 accepted any length) is refused
// up front by the plan, with one line, changing nothing.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { ClassicLevel } from 'classic-level'
import { Packr } from 'msgpackr'
import { CLI, ROOT, daemonsGone, fuseAvailable, stopDaemon, workspace, type Env } from './helpers.js'
import { frontDecode } from '../src/plans/journal.js'
import { Store } from '../src/store/store.js'
import { Wal } from '../src/store/wal.js'

const packr = new Packr({ useRecords: false, mapsAsObjects: true })
const CHUNK = 64 * 1024

if (fuseAvailable(t)) {
  t.test('a version-1 store: a partly rewritten lower file and a new file', async t => {
    const lower = Buffer.alloc(3 * CHUNK, 'L')
    const w = workspace(t)
    fs.writeFileSync(join(w.ws, 'lower.bin'), lower)
    // Register the workspace the way cpfs does, then write the old format by hand.
    w.ok('mount', w.ws)
    const store = JSON.parse(w.ok('status', w.ws, '--json')).store
    w.ok('unmount', w.ws, '--discard')
    fs.rmSync(store, { recursive: true })
    fs.mkdirSync(store, { recursive: true })
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const written = Buffer.alloc(CHUNK, 'W')
    const hash = createHash('sha256').update(written).digest()
    const now = Date.now()
    const meta = { mode: 0o644, uid: 0, gid: 0, atime: now, mtime: now, ctime: now, ino: 0x80000001 }
    await db.batch([
      { type: 'put', key: 'm', value: packr.pack({ version: 1, workspace: w.ws, stack: [1], redo: [], applied: [], nextLayer: 2, nextIno: 0x80000005, createdAt: now }) },
      { type: 'put', key: 't0000000001', value: packr.pack({ layer: 1, openedAt: now }) },
      // lower.bin: chunk 0 rewritten, chunk 1 the lower's, then truncated within chunk 2's place.
      { type: 'put', key: 'e0000000001/lower.bin', value: packr.pack({ t: 'f', ...meta, size: 2 * CHUNK, chunks: [hash, 1], src: '/lower.bin' }) },
      { type: 'put', key: 'e0000000001/new.txt', value: packr.pack({ t: 'f', ...meta, ino: 0x80000002, size: CHUNK + 5, chunks: [hash, null], n: 1 }) },
      { type: 'put', key: 'c' + hash.toString('hex'), value: written }
    ], { sync: true })
    await db.close()

    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log[0].changes.map((c: any) => c.path), ['/lower.bin', '/new.txt'], 'the old history reads')
    w.ok('mount', w.ws)
    const got = fs.readFileSync(join(w.ws, 'lower.bin'))
    t.ok(got.equals(Buffer.concat([written, lower.subarray(CHUNK, 2 * CHUNK)])), 'the mount shows the rewritten chunk, then the lower\'s')
    const n = fs.readFileSync(join(w.ws, 'new.txt'))
    t.ok(n.equals(Buffer.concat([written, Buffer.alloc(5)])), 'a hole reads as zeros')
    w.ok('unmount', w.ws)
    t.ok(fs.readFileSync(join(w.ws, 'lower.bin')).equals(got), 'applied byte-exact')
    t.ok(fs.readFileSync(join(w.ws, 'new.txt')).equals(n))
    w.ok('rewind', '1', w.ws)
    t.ok(fs.readFileSync(join(w.ws, 'lower.bin')).equals(lower), 'and turn 1 rewinds to the original')
  })

  /** Register the workspace the way cpfs does, then remove the store it made; returns its path. */
  function registered (w: Env): string {
    w.ok('mount', w.ws)
    const store = JSON.parse(w.ok('status', w.ws, '--json')).store
    w.ok('unmount', w.ws, '--discard')
    fs.rmSync(store, { recursive: true })
    fs.mkdirSync(store, { recursive: true })
    return store
  }

  /** Register the workspace the way cpfs does, then replace its store with `records`, written by hand. */
  async function oldStore (w: ReturnType<typeof workspace>, records: Array<{ key: string, value: Buffer }>): Promise<string> {
    const store = registered(w)
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    await db.batch(records.map(r => ({ type: 'put' as const, ...r })), { sync: true })
    await db.close()
    return store
  }

  async function storeVersion (store: string): Promise<number> {
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const m = packr.unpack(await db.get('m'))
    await db.close()
    return m.version
  }

  t.test('a version-2 store: an edit of a real file with two names, a chmod, a new file; applied with the real link kept', async t => {
    const w = workspace(t, 'printf "L%.0s" $(seq 100000) > big && ln big big2 && echo x > x')
    const bigIno = fs.statSync(join(w.ws, 'big')).ino
    const now = Date.now()
    const written = Buffer.alloc(CHUNK, 'W')
    const hash = createHash('sha256').update(written).digest()
    const meta = { mode: 0o644, uid: 0, gid: 0, atime: now, mtime: now, ctime: now, atimeNs: 5, mtimeNs: 6, ctimeNs: 7 }
    const store = await oldStore(w, [
      { key: 'm', value: packr.pack({ version: 2, workspace: w.ws, stack: [1], redo: [], applied: [], nextLayer: 2, nextIno: 2 ** 52 + 3, createdAt: now }) },
      { key: 't0000000001', value: packr.pack({ layer: 1, openedAt: now }) },
      // big (two real names): chunk 0 rewritten, the rest still the lower's (sparse map, src).
      { key: 'e0000000001/big', value: packr.pack({ t: 'f', ...meta, ino: bigIno, size: 100000, src: '/big', srcSize: 100000, d: [0, hash] }) },
      { key: 'e0000000001/x', value: packr.pack({ t: 'f', ...meta, mode: 0o600, ino: fs.statSync(join(w.ws, 'x')).ino, size: 2, src: '/x', srcSize: 2, d: [] }) },
      { key: 'e0000000001/new', value: packr.pack({ t: 'f', ...meta, ino: 2 ** 52 + 1, size: CHUNK + 3, d: [0, hash, 1, null], n: 1 }) },
      { key: 'c' + hash.toString('hex'), value: written }
    ])
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log[0].changes.map((c: any) => c.path).sort(), ['/big', '/new', '/x'], 'the old history reads')
    w.ok('mount', w.ws)
    const big = Buffer.concat([written, Buffer.alloc(100000 - CHUNK, 'L')])
    t.ok(fs.readFileSync(join(w.ws, 'big')).equals(big), 'the mount shows the rewritten chunk, then the lower\'s')
    t.equal(fs.statSync(join(w.ws, 'x')).mode & 0o777, 0o600, 'the chmod')
    t.ok(fs.readFileSync(join(w.ws, 'new')).equals(Buffer.concat([written, Buffer.alloc(3)])), 'a hole reads as zeros')
    t.equal(fs.statSync(join(w.ws, 'new'), { bigint: true }).mtimeNs % 1000000n, 6n, 'nanosecond times')
    w.ok('unmount', w.ws)
    t.ok(fs.readFileSync(join(w.ws, 'big')).equals(big), 'applied byte-exact')
    t.equal(fs.statSync(join(w.ws, 'big2')).ino, bigIno, 'the real hard link is kept: one inode')
    t.ok(fs.readFileSync(join(w.ws, 'big2')).equals(big), 'and the other name shows the edit')
    t.equal(fs.statSync(join(w.ws, 'x')).mode & 0o777, 0o600)
    t.equal(await storeVersion(store), 7, 'the store is version 7 after its first write (an older cpfs refuses it)')
    w.ok('rewind', '1', w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'big2'), 'utf8'), 'L'.repeat(100000), 'turn 1 rewinds to the original')
    t.equal(fs.statSync(join(w.ws, 'big')).ino, bigIno, 'still one real file with two names')
    t.notOk(fs.existsSync(join(w.ws, 'new')))
  })

  t.test('a history holding a name longer than the real directory takes: the plan refuses up front, one line, nothing changed', async t => {
    const w = workspace(t, 'echo keep > keep')
    const now = Date.now()
    const meta = { mode: 0o644, uid: 0, gid: 0, atime: now, mtime: now, ctime: now }
    const long = 'n'.repeat(300)
    await oldStore(w, [
      { key: 'm', value: packr.pack({ version: 2, workspace: w.ws, stack: [1], redo: [], applied: [], nextLayer: 2, nextIno: 2 ** 52 + 3, createdAt: now }) },
      { key: 't0000000001', value: packr.pack({ layer: 1, openedAt: now }) },
      { key: 'e0000000001/ok', value: packr.pack({ t: 'l', ...meta, ino: 2 ** 52 + 1, target: 'keep', n: 1 }) },
      { key: `e0000000001/${long}`, value: packr.pack({ t: 'l', ...meta, ino: 2 ** 52 + 2, target: 'keep', n: 1 }) }
    ])
    const before = fs.readdirSync(w.ws).sort()
    w.ok('mount', w.ws)
    const r = w.cpfs('unmount', w.ws)
    t.not(r.code, 0, 'unmount cannot apply it')
    t.match(r.stderr, /^cpfs: the real directory's filesystem takes names of at most 255 bytes, and the history holds a longer one: "n+…" \(300 bytes\); nothing was changed \(rename or remove it in the mount/, 'one line naming the cause and the fix')
    t.equal(r.stderr.trim().split('\n').length, 1, 'one line')
    t.equal(w.cpfs('unmount', w.ws, '--discard').code, 0, 'discard still works')
    t.same(fs.readdirSync(w.ws).sort(), before, 'the real directory is unchanged: not even the other name was applied')
  })

  /**
   * A plan interrupted by kill -9 (test hook: the applier dies after operation 3), with its
   * journal left as `rewrite` makes it; then the next command must finish it byte-exact.
   */
  async function interruptedPlan (t: Test, rewrite: (db: ClassicLevel<string, Buffer>) => Promise<void>): Promise<Env> {
    const w = workspace(t, 'mkdir a && echo one > a/one && echo top > top', { env: { CPFS_TEST_CRASH_AFTER_OP: '3' } })
    w.ok('mount', w.ws)
    w.run('for i in $(seq 12); do echo "n $i" > a/new$i; done && echo changed > top && rm a/one')
    const store = JSON.parse(w.ok('status', w.ws, '--json')).store
    await stopDaemon(w.home, w.ws)
    t.equal(w.cpfs('unmount', w.ws).code, 128, 'the applier was killed in the middle of the plan')
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    try {
      await rewrite(db)
    } finally {
      await db.close()
    }
    delete w.env.CPFS_TEST_CRASH_AFTER_OP
    return w
  }

  async function journalParts (db: ClassicLevel<string, Buffer>): Promise<string[]> {
    const keys: string[] = []
    for await (const k of db.keys({ gte: 'J', lt: 'J\uffff' })) keys.push(k)
    return keys
  }

  function finished (t: Test, w: Env): void {
    const r = w.cpfs('unmount', w.ws)
    t.equal(r.code, 0, `the next command finishes the plan: ${r.stderr.trim()}`)
    t.match(r.stderr, /finished a plan that was interrupted/, 'and says so')
    t.equal(fs.readFileSync(join(w.ws, 'top'), 'utf8'), 'changed\n', 'a rewritten file is the new version')
    t.same(fs.readdirSync(join(w.ws, 'a')).sort(), Array.from({ length: 12 }, (_, i) => `new${i + 1}`).sort(), 'every new file is there and the removed one is gone')
    t.equal(fs.readFileSync(join(w.ws, 'a/new7'), 'utf8'), 'n 7\n', 'with its content')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).pending, 0, 'nothing is pending')
  }

  t.test('a plan journal written as one value (cpfs before journal parts) is finished after a crash', async t => {
    const w = await interruptedPlan(t, async db => {
      // The format before parts: the whole journal is the value of 'j'.
      const header = packr.unpack(await db.get('j'))
      const whole: any = { id: header.id, targetStack: header.targetStack, ops: [], expect: [], prints: [] }
      if (header.after) whole.after = header.after
      const parts = await journalParts(db)
      t.ok(parts.length >= 1, 'this version wrote the journal in parts')
      for (const k of parts) {
        // A part keeps each list's paths apart, front-coded (src/plans/journal.ts).
        const part = packr.unpack(await db.get(k))
        const opPaths = frontDecode(part.opPaths)
        const expectPaths = frontDecode(part.expectPaths)
        const printPaths = frontDecode(part.printPaths)
        part.ops.forEach((op: any, i: number) => whole.ops.push({ ...op, path: opPaths[i] }))
        part.expect.forEach((e: any, i: number) => whole.expect.push([expectPaths[i], e]))
        part.prints.forEach((f: any, i: number) => whole.prints.push([printPaths[i], f]))
      }
      t.ok(whole.ops.length > 3, 'the journal holds the whole plan')
      await db.batch([{ type: 'put', key: 'j', value: packr.pack(whole) }, ...parts.map(key => ({ type: 'del' as const, key }))])
    })
    finished(t, w)
  })

  t.test('parts of a journal no header names (a crash before the plan started) are removed with the journal', async t => {
    let store = ''
    const w = await interruptedPlan(t, async db => {
      await db.put('J99999999', packr.pack({ ops: [{ op: 'remove', type: 'f' }], opPaths: [0, '/top'], expect: [], expectPaths: [], prints: [], printPaths: [] }))
      store = db.location
    })
    finished(t, w)
    const db = new ClassicLevel<string, Buffer>(store, { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    t.same(await journalParts(db), [], 'no part of any journal is left in the store')
    await db.close()
  })

  /**
   * The view below dir as test/fixtures/store-v3/make.mjs records it: path → type and mode,
   * content hash, symlink target, user xattrs; and which names share an inode.
   */
  function view (dir: string): { tree: Record<string, any>, links: string[] } {
    const tree: Record<string, any> = {}
    const inodes = new Map<number, string[]>()
    const walk = (rel: string): void => {
      for (const name of fs.readdirSync(join(dir, rel)).sort()) {
        const r = rel ? `${rel}/${name}` : name
        const full = join(dir, r)
        const st = fs.lstatSync(full)
        const e: any = { mode: (st.mode & 0o170000).toString(8) + ':' + (st.mode & 0o7777).toString(8) }
        if (st.isDirectory()) walk(r)
        else if (st.isSymbolicLink()) e.target = fs.readlinkSync(full)
        else if (st.isFile()) e.sha = createHash('sha256').update(fs.readFileSync(full)).digest('hex')
        if (!st.isSymbolicLink()) {
          const x = spawnSync('getfattr', ['--absolute-names', '-d', '-m', '^user\\.', full], { encoding: 'utf8' }).stdout.split('\n').filter(l => l && !l.startsWith('#')).sort()
          if (x.length) e.xattrs = x
        }
        if (!st.isDirectory() && st.nlink > 1) inodes.set(st.ino, [...inodes.get(st.ino) ?? [], r])
        tree[r] = e
      }
    }
    walk('')
    return { tree, links: [...inodes.values()].filter(n => n.length > 1).map(n => n.sort().join(' ')).sort() }
  }

  /**
   * A workspace set up from test/fixtures/<name>: its real directory is the fixture's own
   * filesystem image, loop-mounted (the store knows its inode numbers and ctimes), and its
   * store is the one the older cpfs wrote, in the place this workspace's store goes.
   */
  function fromFixture (t: Test, name: string): { expected: any, w: Env, store: string } {
    const fixture = join(ROOT, 'test', 'fixtures', name)
    const expected = JSON.parse(fs.readFileSync(join(fixture, 'expected.json'), 'utf8'))
    const w = workspace(t)
    const img = join(dirname(w.ws), 'real.img')
    fs.writeFileSync(img, gunzipSync(fs.readFileSync(join(fixture, 'real.img.gz'))))
    w.run(`mount -o loop ${img} ${w.ws}`)
    const store = registered(w)
    w.run(`tar -C ${store} -xzf ${join(fixture, 'store.tar.gz')}`)
    return { expected, w, store }
  }

  /**
   * A fixture's write-ahead log, rewritten for the workspace it is extracted at: the log's
   * records carry the metadata too, and the workspace is here now in them as well.
   */
  function walHere (store: string, ws: string) {
    const old = Wal.open(store)
    const logged = old.records(store)
    old.close()
    fs.rmSync(join(store, 'wal'))
    const wal = Wal.open(store)
    wal.seq = logged[0].seq - 1
    for (const r of logged) wal.append(r.ops.map(op => op.type === 'put' && op.key === 'm' ? { ...op, value: packr.pack({ ...packr.unpack(op.value), workspace: ws }) } : op))
    wal.close()
    return logged
  }

  /** Every record of the store, decoded (chunks left out). */
  async function records (store: string): Promise<Map<string, any>> {
    // An old store's unmount is followed by the daemon's automatic retention (its createdAt is
    // long past): the store is that daemon's until it exits.
    if (!await daemonsGone(store)) throw new Error(`a daemon still holds ${store}`)
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const out = new Map<string, any>()
    for await (const [k, v] of db.iterator()) if (k[0] !== 'c') out.set(k, k[0] === 'r' ? v : packr.unpack(v))
    await db.close()
    return out
  }

  t.test('a version-4 store (test/fixtures/store-v4): its write-ahead log (chunk bytes in it) replays, every turn shows and rewinds byte-exact, chunks stay readable in LevelDB, new ones go to pack files', async t => {
    const { expected, w, store } = fromFixture(t, 'store-v4')
    t.equal(fs.statSync(join(store, 'wal')).size, expected.walBytes, 'the last turn is in the old write-ahead log only')
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const meta = packr.unpack(await db.get('m'))
    t.equal(meta.version, 4, 'the fixture is a version-4 store')
    await db.put('m', packr.pack({ ...meta, workspace: w.ws }))
    const logged = walHere(store, w.ws)
    t.ok(logged.some(r => r.ops.some(op => op.key[0] === 'c')), 'with chunk puts in its records')
    let legacy = 0
    for await (const k of db.keys({ gte: 'c', lt: 'c\uffff' })) if (k) legacy++
    await db.close()
    t.ok(legacy >= 5, `its chunks are LevelDB values (${legacy})`)

    t.same(JSON.parse(w.ok('log', w.ws, '--json')).map((l: any) => l.changes.length > 0), [true, true, true], 'the old history reads, the logged turn included')
    // Written before cpfs recorded processes: blame lists the turns, each without one.
    const blamed = JSON.parse(w.ok('blame', join(w.ws, 'real.bin'), w.ws, '--json'))
    t.ok(blamed.lines.length > 0 && blamed.lines.every((l: any) => l.by === 'unrecorded' && l.process === null), `blame of an old store's file: its turns, no process recorded (${JSON.stringify(blamed.lines.map((l: any) => [l.turn, l.change, l.by]))})`)
    w.ok('mount', w.ws)
    t.same(view(w.ws), expected.head, 'the mount shows the head as the killed daemon had answered it')
    for (const turn of [3, 2, 1]) {
      w.ok('rewind', String(turn), w.ws)
      t.same(view(w.ws), expected.turns[turn], `rewound to the start of turn ${turn}: byte-exact`)
    }
    for (let turn = 1; turn < 3; turn++) w.ok('redo', w.ws)
    w.ok('redo', w.ws)
    t.same(view(w.ws), expected.head, 'and redo brings the head back')
    const fresh = Buffer.alloc(3 * CHUNK + 11, 'N')
    fresh.write('a new file after the upgrade', 1000)
    fs.writeFileSync(join(w.ws, 'after.bin'), fresh)
    w.ok('turn', w.ws)
    w.ok('unmount', w.ws)
    t.ok(fs.readFileSync(join(w.ws, 'after.bin')).equals(fresh), 'a write after the upgrade is applied byte-exact')
    t.equal(createHash('sha256').update(fs.readFileSync(join(w.ws, 'wal.bin'))).digest('hex'), expected.head.tree['wal.bin'].sha, 'and so is a file that was only in the old log')
    // The unmount answered; the daemon's retention (the store is old) may still write packs.
    t.ok(await daemonsGone(store), 'the daemon is gone after its retention run')
    const packs = fs.readdirSync(join(store, 'packs'))
    t.ok(packs.length >= 1 && packs.every(n => /^\d{10}-[0-9a-f]{64}\.pack$/.test(n)), `new chunks are in sealed pack files: ${packs.join(' ')}`)
    const now = await records(store)
    t.equal(now.get('m').version, 7, 'the store is version 7')
    t.ok([...now.keys()].some(k => k[0] === 'r'), 'LevelDB holds references to pack bytes')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'cpfs fsck finds nothing wrong (old chunks in LevelDB, new ones in packs)')
    w.ok('mount', w.ws)
    w.ok('rewind', '1', w.ws)
    t.same(view(w.ws), expected.turns[1], 'turn 1 still rewinds byte-exact after all that')
    w.ok('unmount', w.ws, '--discard')
  })

  t.test('a version-5 store (test/fixtures/store-v5, written before steps): its log replays, processes are blamed, every turn rewinds byte-exact, steps work, it becomes version 7', async t => {
    const { expected, w, store } = fromFixture(t, 'store-v5')
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const meta = packr.unpack(await db.get('m'))
    t.equal(meta.version, 5, 'the fixture is a version-5 store')
    t.equal(meta.parts, undefined, 'with no parts')
    await db.put('m', packr.pack({ ...meta, workspace: w.ws }))
    await db.close()
    const logged = walHere(store, w.ws)
    t.ok(logged.length > 0, 'turn 3 is in its write-ahead log')
    t.same(JSON.parse(w.ok('log', w.ws, '--json')).map((l: any) => l.changes.length > 0), [true, true, true], 'the old history reads, the logged turn included')
    const blamed = JSON.parse(w.ok('blame', join(w.ws, 'pair1'), w.ws, '--json'))
    t.match(blamed.lines, [{ turn: 1, by: 'mount', process: { command: /echo more|bash/ }, step: null }], 'blame: the process version 5 recorded, and no step')
    t.same(JSON.parse(w.ok('log', '--steps', '--json', w.ws)), [], 'no steps in an old store')
    w.ok('mount', w.ws)
    t.same(view(w.ws), expected.head, 'the mount shows the head')
    for (const turn of [3, 2, 1]) {
      w.ok('rewind', String(turn), w.ws)
      t.same(view(w.ws), expected.turns[turn], `rewound to the start of turn ${turn}: byte-exact`)
    }
    for (let turn = 1; turn <= 3; turn++) w.ok('redo', w.ws)
    t.same(view(w.ws), expected.head, 'and redo brings the head back')
    const cpfs = `'${process.execPath}' '${CLI}'`
    w.run(`${cpfs} step begin upgrade --id up >/dev/null; echo after > after.txt; rm logged.txt; ${cpfs} step end up >/dev/null`)
    t.same(JSON.parse(w.ok('step', 'show', 'up', '--json', w.ws)).changes.map((c: any) => c.path), ['/after.txt', '/logged.txt'], 'a step in the upgraded store')
    w.ok('undo', '--step', 'up', w.ws)
    t.same(view(w.ws), expected.head, 'undone: the head as it was')
    for (const turn of [3, 1]) {
      w.ok('rewind', String(turn), w.ws)
      t.same(view(w.ws), expected.turns[turn], `after the step: turn ${turn} still rewinds byte-exact`)
    }
    w.ok('unmount', w.ws, '--discard')
    const now = await records(store)
    t.equal(now.get('m').version, 7, 'the store is version 7 (an older cpfs refuses it: it could not see the parts)')
    t.ok(Object.keys(now.get('m').parts ?? {}).length > 0, 'with parts')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'cpfs fsck finds nothing wrong')
  })

  t.test('a version-6 store (test/fixtures/store-v6, written before branches): its redo and discarded stacks become branches, every turn of them rewinds, it becomes version 7', async t => {
    const fixture = join(ROOT, 'test', 'fixtures', 'store-v6')
    const expected = JSON.parse(fs.readFileSync(join(fixture, 'expected.json'), 'utf8'))
    const w = workspace(t)
    const store = registered(w)
    w.run(`tar -C ${store} -xzf ${join(fixture, 'store.tar.gz')}`)
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const meta = packr.unpack(await db.get('m'))
    t.equal(meta.version, 6, 'the fixture is a version-6 store')
    t.same([meta.redo.length, meta.discarded.length, meta.branches], [2, 1, undefined], 'with two redo stacks, one discarded stack and no branches')
    await db.put('m', packr.pack({ ...meta, workspace: w.ws }))
    await db.close()
    const files = () => Object.fromEntries(fs.readdirSync(w.ws).sort().map(n => [n, fs.readFileSync(join(w.ws, n), 'utf8')]))
    const { branches } = JSON.parse(w.ok('log', '--all', '--json', w.ws))
    t.same(branches.map((b: any) => [b.by, b.length]).sort(), [['discard', 2], ['older cpfs', 3]], 'both stacks are branches: the discarded one and the first rewind\'s')
    const first = branches.find((b: any) => b.by === 'older cpfs').branch
    t.match(w.ok('log', '--graph', w.ws), new RegExp(`${first}:3`), 'the graph names its turns')
    w.ok('mount', w.ws)
    t.same(files(), expected.now, 'the mount shows the head')
    for (const [ref, want] of [[`${first}:2`, expected.turn2], [`${first}:3`, expected.turn3], [first, expected.tip]]) {
      w.ok('rewind', ref, w.ws)
      t.same(files(), want, `rewind ${ref}`)
    }
    w.run('echo new > new.txt')
    w.ok('redo', w.ws)
    t.same(files(), expected.turn3, 'redo goes back, over a write')
    w.ok('unmount', w.ws)
    t.equal((await records(store)).get('m').version, 7, 'the store is version 7')
    t.equal((await records(store)).get('m').discarded, undefined, 'the discarded stack lives on as a branch only, which retention can drop')
    t.equal(JSON.parse(w.ok('log', '--all', '--json', w.ws)).branches.filter((b: any) => b.turns.some((x: any) => x.changes.some((c: any) => c.path === '/new.txt'))).length, 1, 'the write made before that redo is a branch too')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'cpfs fsck finds nothing wrong')
  })

  t.test('a version-3 store (test/fixtures/store-v3): its interrupted plan finishes, every turn shows and rewinds, and it becomes version 7', async t => {
    const { expected, w, store } = fromFixture(t, 'store-v3')
    // The one change to the store as version 3 wrote it: the workspace it belongs to is here now.
    const db = new ClassicLevel<string, Buffer>(join(store, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
    await db.open()
    const meta = packr.unpack(await db.get('m'))
    t.equal(meta.version, 3, 'the fixture is a version-3 store')
    await db.put('m', packr.pack({ ...meta, workspace: w.ws }))
    await db.close()
    const before = await records(store)
    t.ok(before.has('j') && before.get('e0000000001#13').o === '/pair2' && before.get('e0000000003/many/new1').x, 'with a pending journal, an inode record with o, xattrs as x')

    t.same(JSON.parse(w.ok('log', w.ws, '--json')).map((l: any) => l.changes.length > 0), [true, true, true], 'the old history reads: three turns with changes')
    const r = w.cpfs('unmount', w.ws)
    t.equal(r.code, 0, `the plan version 3 journaled is finished: ${r.stderr.trim()}`)
    t.match(r.stderr, /finished a plan that was interrupted/, 'and says so')
    // The journal holds the plan as version 3 made it, and its planner dropped the xattr-only
    // change of the real tagged.txt (red → blue in turn 1; fixed since in plans/expect.ts,
    // test/plans.test.ts). Finishing a journal runs what it holds, so that one xattr stays red.
    const applied = view(w.ws)
    t.same(applied.tree['tagged.txt'].xattrs, ['user.color="red"'], 'the journal finished as version 3 planned it')
    applied.tree['tagged.txt'].xattrs = expected.head.tree['tagged.txt'].xattrs
    t.same(applied, expected.head, 'the real directory holds the head turn: content, modes, xattrs (set after the crash from the old journal), hard links')
    t.equal((await records(store)).get('m').version, 7, 'the store is version 7 after its first write (an older cpfs refuses it)')

    w.ok('mount', w.ws)
    t.same(view(w.ws), expected.head, 'the mount shows the same tree')
    for (const turn of [3, 2, 1]) {
      w.ok('rewind', String(turn), w.ws)
      t.same(view(w.ws), expected.turns[turn], `rewound to the start of turn ${turn}`)
    }
    w.run('echo after > after.txt && setfattr -n user.k -v v after.txt && ln after.txt after2 && echo more >> pair2 && rm -r olddir')
    w.ok('turn', w.ws)
    w.ok('unmount', w.ws)
    const after = view(w.ws)
    t.equal(after.tree['after.txt'].sha, createHash('sha256').update('after\n').digest('hex'), 'a write after the upgrade is applied')
    t.same(after.tree['after.txt'].xattrs, ['user.k="v"'])
    t.same(after.links, ['after.txt after2', 'pair1 pair2'], 'hard links: the real ones and one made after the upgrade')
    t.equal(after.tree.pair1.sha, createHash('sha256').update('pair\nmore\n').digest('hex'), 'a write through one real name shows through the other')
    t.notOk('olddir' in after.tree, 'a directory removed')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'cpfs fsck finds nothing wrong')

    // On disk: what was written since the upgrade has the readable names only.
    const now = await records(store)
    t.equal(now.get('m').version, 7)
    const legacy = ['t', 'n', 'x', 'o', 'd']
    const written = [...now].filter(([k]) => k[0] === 'e' && Number(k.slice(1, 11)) > 3)
    t.ok(written.length >= 5, 'the layers made after the upgrade')
    t.same(written.filter(([, v]) => typeof v.kind !== 'string' || legacy.some(f => f in v)).map(([k]) => k), [], 'their entries are all of the new shape')
    const rec = written.find(([k, v]) => k.includes('#') && v.xattrs?.['user.k'])?.[1]
    t.ok(rec && rec.kind === 'f' && Array.isArray(rec.chunkRefs) && rec.links === 2, 'an inode record with xattrs and chunkRefs')
    t.same(Object.keys(now.get('o/after.txt')).sort(), ['at', 'ctime', 'ctimeNs', 'ino', 'mode', 'mtime', 'mtimeNs', 'size', 'type'], 'a fingerprint written since: readable names')
    t.notOk(now.has('j'), 'the old journal is retired')
  })
}

t.test('a version-3 store whose last batches are in the write-ahead log: replayed, read, and version 7 with the next batch', async t => {
  const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-compat-wal-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const now = Date.now()
  const meta = { mode: 0o644, uid: 0, gid: 0, atime: now, mtime: now, ctime: now, ino: 2 ** 52 + 1 }
  const hash = createHash('sha256').update('abc').digest()
  const db = new ClassicLevel<string, Buffer>(join(dir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
  await db.open()
  await db.batch([
    { type: 'put', key: 'm', value: packr.pack({ version: 3, workspace: '/nowhere', stack: [1], redo: [], applied: [], nextLayer: 2, nextIno: 2 ** 52 + 3, createdAt: now }) },
    { type: 'put', key: 't0000000001', value: packr.pack({ layer: 1, openedAt: now }) }
  ], { sync: true })
  await db.close()
  // What a version-3 daemon killed right after answering leaves: records in the log only.
  const wal = Wal.open(dir)
  wal.append([
    { type: 'put', key: 'e0000000001/a', value: packr.pack({ t: 'f', ...meta, size: 3, n: 1, x: { 'user.k': Buffer.from('v') }, d: [0, hash] }) },
    { type: 'put', key: 'e0000000001/b', value: packr.pack({ t: 'h', ino: 2 ** 52 + 2, n: 1 }) },
    { type: 'put', key: 'o/a', value: packr.pack({ t: null, ino: 0, size: 0, mode: 0, m: 0, mn: 0, c: 0, cn: 0, at: now }) },
    { type: 'put', key: 'o/c', value: packr.pack({ t: 'f', ino: 7, size: 3, mode: 0o100644, m: now, mn: 1, c: now, cn: 2, at: now }) }
  ])
  wal.close()
  const s = await Store.open(dir, { workspace: '/nowhere', create: false })
  const layer = await s.loadLayer(1)
  const a: any = layer.get('/a')
  t.same({ kind: a.kind, newInTurn: a.newInTurn, xattrs: a.xattrs['user.k'].toString(), chunks: [...a.chunks].map(([i, h]) => [i, h.toString('hex')]) }, { kind: 'f', newInTurn: 1, xattrs: 'v', chunks: [[0, hash.toString('hex')]] }, 'an entry read from the replayed log, with the new names')
  t.notOk('t' in a || 'n' in a || 'x' in a || 'd' in a, 'and none of the old')
  t.same(layer.get('/b'), { kind: 'h', ino: 2 ** 52 + 2, newInTurn: 1 })
  // An absent path's fingerprint reads as the one shared ABSENT (its time is never read).
  const prints = await s.loadFingerprints()
  t.same(prints.get('/a'), { type: null, ino: 0, size: 0, mode: 0, mtime: 0, mtimeNs: 0, ctime: 0, ctimeNs: 0, at: 0 }, 'a fingerprint too')
  t.same(prints.get('/c'), { type: 'f', ino: 7, size: 3, mode: 0o100644, mtime: now, mtimeNs: 1, ctime: now, ctimeNs: 2, at: now }, 'and a real file\'s, with the new names and its time')
  t.equal(s.meta.version, 7, 'version 7 in memory')
  await s.batch([{ type: 'put', key: 't0000000001', value: packr.pack({ layer: 1, openedAt: now, message: 'x' }) }])
  await s.close()
  const check = new ClassicLevel<string, Buffer>(join(dir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'buffer' })
  await check.open()
  const m = packr.unpack(await check.get('m'))
  await check.close()
  t.same({ version: m.version, stack: m.stack, nextIno: m.nextIno }, { version: 7, stack: [1], nextIno: 2 ** 52 + 3 }, 'a batch without the metadata saved it as version 7, otherwise as it was')
})
