// Fingerprints (src/store/fingerprints.ts): what cpfs last knew of a real path, and the words
// for how the real path has drifted from it since. A plan refuses on any of them.
import t from 'tap'
import { ABSENT, fingerprintDrift, fingerprintOf, storedFingerprint, type RealStat } from '../../../src/store/fingerprints.js'

const file: RealStat = { type: 'f', ino: 11, size: 100, mode: 0o100644, mtime: 1000, mtimeNs: 5, ctime: 2000, ctimeNs: 7 }
const dir: RealStat = { ...file, type: 'd', ino: 12, size: 4096, mode: 0o40755 }
const missing: RealStat = { type: null, ino: 0, size: 0, mode: 0, mtime: 0, mtimeNs: 0, ctime: 0, ctimeNs: 0 }

t.test('an unchanged path has not drifted', async t => {
  for (const st of [file, dir, missing]) t.equal(fingerprintDrift(fingerprintOf(st), { ...st }), null)
  t.equal(fingerprintOf(file, 42).at, 42, 'the time it was taken')
})

t.test('each change to a file is named', async t => {
  const f = fingerprintOf(file)
  t.equal(fingerprintDrift(f, missing), 'was removed')
  t.equal(fingerprintDrift(f, { ...file, type: 'd' }), 'was replaced by a directory')
  t.equal(fingerprintDrift(f, { ...file, type: 'l' }), 'was replaced by a symlink')
  t.equal(fingerprintDrift(f, { ...file, ino: 99 }), 'was replaced', 'another inode: a new file under the name')
  t.equal(fingerprintDrift(f, { ...file, size: 101 }), 'content changed')
  t.equal(fingerprintDrift(f, { ...file, mtimeNs: 6 }), 'content changed', 'a nanosecond of mtime')
  t.equal(fingerprintDrift(f, { ...file, mode: 0o100755 }), 'mode changed to 100755')
  t.equal(fingerprintDrift(f, { ...file, ctimeNs: 8 }), 'metadata changed', 'only ctime: chown, link, xattr')
})

t.test('a path that did not exist, and one that now cannot be reached', async t => {
  t.equal(fingerprintDrift(fingerprintOf(missing), file), 'was created (file)')
  t.equal(fingerprintDrift(fingerprintOf(missing), { ...file, type: 'n' }), 'was created (special file)')
  t.equal(fingerprintOf({ ...file, blockedBy: '/a' }).type, null, 'a path behind a symlink is recorded as absent')
  t.equal(fingerprintDrift(fingerprintOf(file), { ...file, blockedBy: '/a' }), 'was removed', 'and counts as removed')
})

t.test('a directory: its own mode counts, its times do not', async t => {
  const d = fingerprintOf(dir)
  t.equal(fingerprintDrift(d, { ...dir, mtime: 9999, ctime: 9999, size: 8192 }), null, 'entries added or removed in it')
  t.equal(fingerprintDrift(d, { ...dir, mode: 0o40700 }), 'mode changed to 40700')
})

t.test('every absent path shares one fingerprint, also when read back from the store', async t => {
  // A session that creates 12,000 files records one per new path: one object each was ~250
  // bytes of the daemon's heap.
  t.equal(fingerprintOf(missing), ABSENT, 'a path that did not exist')
  t.equal(fingerprintOf({ ...file, blockedBy: '/a' }), ABSENT, 'a path behind a symlink')
  t.ok(Object.isFrozen(ABSENT), 'shared, so nobody may change it')
  t.equal(storedFingerprint({ ...ABSENT, at: 1234 }), ABSENT, 'a stored absent fingerprint (any time)')
  t.equal(storedFingerprint({ t: null, ino: 0, size: 0, mode: 0, m: 0, mn: 0, c: 0, cn: 0, at: 5 }), ABSENT, 'and one in the field names of store versions 1 to 3')
  const stored = storedFingerprint({ ...fingerprintOf(file, 7) })
  t.not(stored, ABSENT, 'a file is its own')
  t.equal(stored.at, 7, 'with its time')
})
