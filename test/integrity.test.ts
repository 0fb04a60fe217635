// A store that detects its own damage (issue 18, item 7). Real mounts, the daemon in its own
// process, real files: one flipped byte in a LevelDB table or log, in cpfs's write-ahead log,
// or a LevelDB log cut short. Reading gives EIO (never wrong bytes), commands fail with one
// line naming `cpfs fsck`, nothing in the real directory changes, and `cpfs fsck` says what
// is damaged.
import t from 'tap'
import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, isMountedAt, manifest, stopDaemon, workspace, type Env } from './helpers.js'

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

/** Flip one byte a little after MARK in the first file of `dir` that holds it and matches `ext`; returns the file. */
function flipAfterMark (dir: string, ext: RegExp, offset = 2000): string {
  for (const name of fs.readdirSync(dir).filter(n => ext.test(n))) {
    const file = join(dir, name)
    const buf = fs.readFileSync(file)
    const at = buf.indexOf(MARK)
    if (at < 0) continue
    buf[at + offset] ^= 0x20
    fs.writeFileSync(file, buf)
    return file
  }
  throw new Error(`no file in ${dir} holds the payload`)
}

if (fuseAvailable(t)) {
  t.test('a flipped byte in a LevelDB table: EIO on read, diff and apply fail with one line, fsck names the file', async t => {
    const w = workspace(t, 'echo keep > keep.txt')
    w.ok('mount', w.ws)
    fs.writeFileSync(join(w.ws, 'big.txt'), payload('a'))
    w.ok('turn', w.ws, '-m', 'wrote big.txt')
    const store = storeDir(w)
    await stopDaemon(w.home, w.ws)
    // Opening the store (log, not mounted) turns LevelDB's log into a table.
    w.ok('log', w.ws)
    flipAfterMark(join(store, 'db'), /\.ldb$/)
    const real = manifest(w.ws)

    const diff = w.cpfs('diff', '1', w.ws)
    t.not(diff.code, 0, 'diff fails')
    t.match(diff.stderr, /^cpfs: chunk [0-9a-f]{64} in store .* is damaged .*\(run cpfs fsck .*\)\n$/, 'with one line naming cpfs fsck')
    t.notMatch(diff.stdout, /big\.txt/, 'and no patch')

    const fsck = w.cpfs('fsck', w.ws)
    t.not(fsck.code, 0, 'fsck finds the damage')
    t.match(fsck.stdout + fsck.stderr, /big\.txt/, 'and names the file that is lost')
    t.match(fsck.stdout + fsck.stderr, /turn 1/, 'and the turn')

    const ap = w.cpfs('unmount', w.ws)
    t.not(ap.code, 0, 'applying the pending turn fails')
    t.match(ap.stderr, /STORE_CORRUPT|damaged/, 'because of the damage')
    t.same(manifest(w.ws), real, 'and the real directory is unchanged')

    t.equal(w.ok('mount', w.ws), '2')
    const cat = w.sh('cat big.txt')
    t.not(cat.code, 0, 'reading the damaged file fails')
    t.match(cat.stderr, /Input\/output error/, 'with EIO')
    t.notMatch(cat.stdout, /./, 'and no wrong bytes')
    t.equal(w.run('cat keep.txt'), 'keep\n', 'other files read fine')
    const log = fs.readFileSync(w.run('find "$CPFS_HOME" -name daemon.log').trim(), 'utf8')
    t.match(log, /damaged/, 'the daemon log says why')
    w.ok('unmount', w.ws, '--discard')
  })
}
