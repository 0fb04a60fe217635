// A store that detects its own damage (issue 18, items 7 and 3). Real mounts, the daemon in its
// own process, real files: flipped bytes in a pack file, a LevelDB table or log, in cpfs's write-ahead log,
// or a LevelDB log cut short. Reading gives EIO (never wrong bytes), commands fail with one
// line naming `cpfs fsck`, nothing in the real directory changes, and `cpfs fsck` says what
// is damaged; a table block one changed byte explains, it puts right by the block's CRC.
import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { HANG_GUARD_MS, daemonPid, exited, fuseAvailable, manifest, stopDaemon, workspace, type Env } from './helpers.js'
import type { Test } from 'tap'

const MARK = 'CPFS-INTEGRITY-MARK-7f3a9c'

/** A text file of ~48 KiB that compresses badly (so LevelDB stores its bytes as they are), starting with MARK. */
function payload (seed: string): string {
  const lines = [MARK]
  for (let i = 0; i < 700; i++) lines.push(createHash('sha512').update(seed + i).digest('base64'))
  return lines.join('\n') + '\n'
}

/** The store directory of a test's workspace (one under CPFS_HOME). */
function storeDir (w: Env): string {
  const st = JSON.parse(w.ok('status', w.ws, '--json'))
  return st.store
}

/** Flip bytes a little after MARK in the first file of `dir` that holds it and matches `ext`; returns the file. */
function flipAfterMark (dir: string, ext: RegExp, offsets = [2000]): string {
  for (const name of fs.readdirSync(dir).filter(n => ext.test(n))) {
    const file = join(dir, name)
    const buf = fs.readFileSync(file)
    const at = buf.indexOf(MARK)
    if (at < 0) continue
    for (const o of offsets) buf[at + o] ^= 0x20
    fs.writeFileSync(file, buf)
    return file
  }
  throw new Error(`no file in ${dir} holds the payload`)
}

/** Flip bits of the bytes at `offsets` into `text` in the table file of `dir` that holds it; returns the file's name. */
function flipInTable (dir: string, text: string, offsets: number[]): string {
  for (const name of fs.readdirSync(dir).filter(n => n.endsWith('.ldb'))) {
    const buf = fs.readFileSync(join(dir, name))
    const at = buf.indexOf(text)
    if (at < 0) continue
    for (const o of offsets) buf[at + o] ^= 0x01
    fs.writeFileSync(join(dir, name), buf)
    return name
  }
  throw new Error(`no table in ${dir} holds ${text}`)
}

/** Offsets of the records of cpfs's write-ahead log ([u32 length][u32 CRC][payload]). */
function walRecords (file: string): number[] {
  const buf = fs.readFileSync(file)
  const out: number[] = []
  for (let at = 0; at + 8 <= buf.length; at += 8 + buf.readUInt32LE(at)) out.push(at)
  return out
}

/** kill -9 of the daemon, then away with its dead mount (as an admin would, umount -l). */
async function crash (w: Env): Promise<void> {
  const pid = daemonPid(w.home)
  process.kill(pid, 'SIGKILL')
  if (!await exited(pid)) throw new Error(`the daemon ${pid} is still there ${HANG_GUARD_MS / 1000} s after SIGKILL`)
  spawnSync('umount', ['-l', w.ws])
}

// The daemon keeps logged batches out of LevelDB for 10 minutes: what the test writes is then
// only in cpfs's write-ahead log when the daemon is killed.
const WAL_ONLY = { env: { CPFS_WAL_SUBMIT_MS: '600000' } }

if (fuseAvailable(t)) {
  // Two flipped bytes in the bytes of a chunk, in the pack file that holds them (chunk bytes
  // live in pack files, not in LevelDB: store/packs.ts). Nothing can put them back but the real
  // directory, which here does not hold the file: the chunk stays damaged and reading it keeps failing.
  t.test('two flipped bytes in a chunk in a pack file: EIO on read, diff and apply fail with one line, fsck names the file and the pack', async t => {
    const w = workspace(t, 'echo keep > keep.txt')
    w.ok('mount', w.ws)
    fs.writeFileSync(join(w.ws, 'big.txt'), payload('a'))
    w.ok('turn', w.ws, '-m', 'wrote big.txt')
    const store = storeDir(w)
    await stopDaemon(w.home, w.ws)
    const pack = flipAfterMark(join(store, 'packs'), /\.pack$/, [2000, 2600])
    const real = manifest(w.ws)

    const diff = w.cpfs('diff', '1', w.ws)
    t.not(diff.code, 0, 'diff fails')
    t.match(diff.stderr, /^cpfs: chunk [0-9a-f]{64} in store .* is damaged .*\(run cpfs fsck .*\)\n$/, 'with one line naming cpfs fsck')
    t.notMatch(diff.stdout, /big\.txt/, 'and no patch')

    const fsck = w.cpfs('fsck', w.ws)
    t.comment(diff.stderr + fsck.stdout)
    t.not(fsck.code, 0, 'fsck finds the damage')
    t.match(fsck.stdout + fsck.stderr, /big\.txt/, 'and names the file that is lost')
    t.match(fsck.stdout + fsck.stderr, /turn 1/, 'and the turn')
    t.ok((fsck.stdout + fsck.stderr).includes(`pack ${pack.split('/').pop()} at byte`), 'and where the bytes are')

    const ap = w.cpfs('unmount', w.ws)
    t.not(ap.code, 0, 'applying the pending turn fails')
    t.match(ap.stderr, /STORE_CORRUPT|damaged|missing/, 'because of the damage')
    t.same(manifest(w.ws), real, 'and the real directory is unchanged')

    t.equal(w.ok('mount', w.ws), '2')
    const cat = w.sh('cat big.txt')
    t.not(cat.code, 0, 'reading the damaged file fails')
    t.match(cat.stderr, /Input\/output error/, 'with EIO')
    t.notMatch(cat.stdout, /./, 'and no wrong bytes')
    t.equal(w.run('cat keep.txt'), 'keep\n', 'other files read fine')
    const log = fs.readFileSync(w.run('find "$CPFS_HOME" -name daemon.log').trim(), 'utf8')
    t.comment(log.split('\n').filter(l => /damaged/.test(l))[0])
    t.match(log, /chunk [0-9a-f]{64} in store .* is damaged/, 'the daemon log says why')
    w.ok('unmount', w.ws, '--discard')
  })

  t.test('a flipped byte in the middle of the write-ahead log: opening refuses with one line, fsck saves what is before it', async t => {
    const w = workspace(t, 'echo keep > keep.txt', WAL_ONLY)
    w.ok('mount', w.ws)
    const store = storeDir(w)
    for (const n of ['one', 'two', 'three', 'four']) w.run(`echo ${n} > ${n}.txt`)
    await crash(w)
    const wal = join(store, 'wal')
    const recs = walRecords(wal)
    t.ok(recs.length >= 4, 'the writes are in the log')
    // Damage the payload of a record in the middle (the one that created two.txt or near it).
    const buf = fs.readFileSync(wal)
    const mid = recs[Math.floor(recs.length / 2)]
    buf[mid + 12] ^= 0x01
    fs.writeFileSync(wal, buf)

    const m = w.cpfs('mount', w.ws)
    t.not(m.code, 0, 'mount refuses')
    t.match(m.stderr, /^cpfs: the write-ahead log of store .* is damaged at byte \d+ .*\(run cpfs fsck.*\)\n$/, 'with one line naming cpfs fsck')
    t.equal(w.cpfs('log', w.ws).code, 1, 'so does every command that opens the store')
    t.same(fs.readdirSync(w.ws).sort(), ['keep.txt'], 'the real directory is untouched')

    const f = w.cpfs('fsck', w.ws)
    t.comment(m.stderr + f.stdout)
    t.equal(f.code, 1, 'fsck reports damage')
    t.match(f.stdout, /damaged: the write-ahead log/, 'names the log')
    t.match(f.stdout, /repaired: applied the \d+ intact record/, 'applies what comes before the damage')
    t.match(f.stdout, /lost: \/four\.txt in turn 1/, 'and lists the paths of the records after it')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'a second fsck finds the store clean')
    t.equal(w.ok('mount', w.ws), '1', 'the store opens again')
    t.equal(w.run('cat one.txt'), 'one\n', 'what came before the damage is there')
    w.ok('unmount', w.ws, '--discard')
  })

  t.test('a torn last record of the write-ahead log is a quiet recovery', async t => {
    const w = workspace(t, '', WAL_ONLY)
    w.ok('mount', w.ws)
    const store = storeDir(w)
    for (const n of ['one', 'two', 'three']) w.run(`echo ${n} > ${n}.txt`)
    await crash(w)
    const wal = join(store, 'wal')
    fs.truncateSync(wal, fs.statSync(wal).size - 3)
    const m = w.cpfs('mount', w.ws)
    t.equal(m.code, 0, 'mount works')
    t.equal(m.stderr, '', 'quietly')
    t.equal(w.run('cat one.txt two.txt'), 'one\ntwo\n', 'everything before the torn record is back')
    t.equal(w.cpfs('fsck', w.ws).code, 1, 'fsck refuses while mounted')
    w.ok('unmount', w.ws, '--discard')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'and finds the store clean after')
  })

  t.test('a flipped byte in LevelDB\'s log: the dropped records are reported, not lost silently', async t => {
    const w = workspace(t, 'echo keep > keep.txt')
    w.ok('mount', w.ws)
    fs.writeFileSync(join(w.ws, 'big.txt'), payload('b'))
    // The chunk's bytes are in a pack file: the byte flipped is in the sealing batch's turn record.
    w.ok('turn', w.ws, '-m', MARK + ' wrote big.txt, a message long enough to flip a byte in')
    const store = storeDir(w)
    await stopDaemon(w.home, w.ws)
    flipAfterMark(join(store, 'db'), /\.log$/, [40])
    const r = w.cpfs('log', w.ws)
    t.equal(r.code, 1, 'opening the store refuses')
    t.match(r.stderr, /^cpfs: store .* lost .*\(run cpfs fsck .*\)\n$/, 'with one line naming cpfs fsck')
    t.equal(w.cpfs('log', w.ws).code, 1, 'also the next time (LevelDB has rewritten the store by now)')
    const f = w.cpfs('fsck', w.ws)
    t.comment(r.stderr + f.stdout)
    t.equal(f.code, 1, 'fsck reports the loss')
    t.match(f.stdout, /damaged: store .* lost/)
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'and accepts it: the next fsck finds the store clean')
    t.equal(w.cpfs('log', w.ws).code, 0, 'the store opens again')
  })

  t.test('a LevelDB log cut short loses a turn: detected at open, fsck names the turn', async t => {
    const w = workspace(t, 'echo keep > keep.txt')
    w.ok('mount', w.ws)
    w.run('echo 1 > one.txt')
    w.ok('turn', w.ws, '-m', 'first')
    w.run('echo 2 > two.txt')
    w.ok('turn', w.ws, '-m', 'MSG-SECOND-TURN-5d1e')
    const store = storeDir(w)
    await stopDaemon(w.home, w.ws)
    const db = join(store, 'db')
    const logFile = fs.readdirSync(db).filter(n => n.endsWith('.log')).map(n => join(db, n)).find(f => fs.readFileSync(f).includes('MSG-SECOND-TURN-5d1e'))
    t.ok(logFile, 'the second turn is in LevelDB\'s log')
    // Cut it in the middle of the batch that sealed the second turn: LevelDB takes that for a
    // torn end and says nothing.
    fs.truncateSync(logFile!, fs.readFileSync(logFile!).indexOf('MSG-SECOND-TURN-5d1e'))
    const r = w.cpfs('log', w.ws)
    t.equal(r.code, 1, 'opening the store refuses')
    t.match(r.stderr, /^cpfs: store .* lost its last \d+ synced change\(s\) \(turn 3 missing, .*\(run cpfs fsck .*\)\n$/, 'naming the missing turn and cpfs fsck')
    const f = w.cpfs('fsck', w.ws)
    t.comment(r.stderr + f.stdout)
    t.equal(f.code, 1)
    t.match(f.stdout, /lost: \/ in turn 3/, 'fsck lists the lost turn')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'and accepts the shorter history')
    t.equal(JSON.parse(w.ok('log', w.ws, '--json')).length, 2, 'which then opens')
  })

  t.test('fsck reads a damaged chunk again from the real directory when the file there still holds it', async t => {
    const w = workspace(t, '')
    w.ok('mount', w.ws)
    const text = payload('c')
    fs.writeFileSync(join(w.ws, 'big.txt'), text)
    w.ok('turn', w.ws, '-m', 'wrote big.txt')
    const store = storeDir(w)
    w.ok('unmount', w.ws) // the real directory now holds big.txt too
    flipAfterMark(join(store, 'packs'), /\.pack$/, [2000, 2600])
    const diff = w.cpfs('diff', '1', w.ws)
    t.not(diff.code, 0, 'the damage is found')
    const f = w.cpfs('fsck', w.ws)
    t.comment(f.stdout)
    t.match(f.stdout, /repaired: chunk [0-9a-f]{64} was damaged \(its bytes in pack \d{10}-[0-9a-f]{64}\.pack at byte \d+ do not match their SHA-256\): read its bytes again from big\.txt in the real directory/, 'fsck reads it again')
    t.equal(f.code, 0, 'nothing is lost: the chunk is whole again (a new copy in the open pack)')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'and the store is clean after')
    t.equal(w.cpfs('diff', '1', w.ws).code, 0, 'diff works again')
    w.ok('mount', w.ws)
    w.ok('rewind', '1', w.ws)
    w.ok('redo', w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'big.txt'), 'utf8'), text, 'and the file reads right from the store')
    w.ok('unmount', w.ws, '--discard')
  })
  // A symlink's entry: a record of a few dozen bytes among others in a block (not a chunk: no
  // SHA-256 guards it). Its target is random base64, so that Snappy keeps it as a literal and
  // the test finds it in the table file.
  async function linkInTable (t: Test): Promise<{ w: Env, target: string, db: string }> {
    const w = workspace(t, 'echo keep > keep.txt')
    w.ok('mount', w.ws)
    const target = 'LINK-' + randomBytes(60).toString('base64url')
    fs.symlinkSync(target, join(w.ws, 'link'))
    w.ok('turn', w.ws, '-m', 'made link')
    const db = join(storeDir(w), 'db')
    await stopDaemon(w.home, w.ws)
    w.ok('log', w.ws) // LevelDB's log becomes a table
    return { w, target, db }
  }

  t.test('a flipped byte in an entry record of a LevelDB table: fsck names table and record and puts the byte back; mount and unmount serve the link as it was made', async t => {
    const { w, target, db } = await linkInTable(t)
    const table = flipInTable(db, target, [40])
    const f = w.cpfs('fsck', w.ws)
    t.comment(f.stdout)
    t.equal(f.code, 1, 'fsck reports damage')
    t.match(f.stdout, new RegExp(`^damaged: table ${table}: data block at \\d+ \\(\\d+ bytes\\) fails its checksum: one byte, at \\d+, differs from what the checksum proves, in record "e\\d{10}/link"$`, 'm'), 'in one line naming the table and the record')
    t.match(f.stdout, new RegExp(`^repaired: put back byte \\d+ of table ${table}`, 'm'), 'and puts the byte back')
    t.notMatch(f.stdout, /^lost:/m, 'nothing is lost')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'a second fsck finds the store clean')
    w.ok('mount', w.ws)
    t.equal(fs.readlinkSync(join(w.ws, 'link')), target, 'the mount serves the link as it was made')
    w.ok('unmount', w.ws)
    t.equal(fs.readlinkSync(join(w.ws, 'link')), target, 'and unmount puts it into the real directory as it was made')
  })

  t.test('a damaged block of a LevelDB table that one byte does not explain: fsck drops it and lists what is lost; the mount does not show the link', async t => {
    const { w, target, db } = await linkInTable(t)
    const table = flipInTable(db, target, [30, 50])
    const f = w.cpfs('fsck', w.ws)
    t.comment(f.stdout)
    t.equal(f.code, 1, 'fsck reports damage')
    t.match(f.stdout, new RegExp(`^damaged: table ${table}: data block at \\d+ \\(\\d+ bytes\\) fails its checksum: no single changed byte explains it, so the block goes .*"e\\d{10}/link"`, 'm'), 'naming the table and its records')
    t.match(f.stdout, /^lost: \/link in turn 1$/m, 'the link is listed as lost')
    t.equal(w.cpfs('fsck', w.ws).code, 0, 'a second fsck finds the store clean')
    t.equal(w.ok('mount', w.ws), '2', 'the store opens')
    t.equal(w.run('cat keep.txt'), 'keep\n', 'what was not in the damaged block is there')
    t.notOk(fs.existsSync(join(w.ws, 'link')) || fs.lstatSync(join(w.ws, 'link'), { throwIfNoEntry: false }), 'the lost link is not there (no wrong target in its place)')
    w.ok('unmount', w.ws, '--discard')
  })
}
