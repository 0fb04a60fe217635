// Metadata like ext4: modes after chmod, and exact times after touch -m / -a / -d, tar -x and
// cp -p, and set-ID bits and file capabilities after writes, truncates and chowns, compared
// with the same commands run on a plain directory. Times are compared at millisecond
// precision (the nanosecond round trip has its own test). cpfs never changes atime on
// a read (reads must not write to the store: noatime semantics), so atimes are compared where
// a tool sets them explicitly.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, workspace } from './helpers.js'

const SETUP = `
mkdir -p src/a && echo one > src/one.txt && echo two > src/a/two.txt && ln -s one.txt src/link
find . -exec touch -h -d '2005-05-05 05:05:05.555' {} +
`

// Run in the mount and in a plain directory; then modes and mtimes must agree everywhere.
const MTIME_SCRIPT = `
touch -m -d '2010-05-06 07:08:09.123' src/one.txt
chmod 640 src/one.txt && chmod 2750 src/a && chmod u+x src/a/two.txt
mkdir -p t && tar -C src -cf ../archive.tar . && tar -C t -xpf ../archive.tar
cp -p src/one.txt copy-p.txt
cp -a src copy-a
touch -h -d '2003-03-03 03:03:03' copy-a/link
touch -d '@1234567890' src/a copy-a/a t/a
`

// Explicit atime changes, with no reads after them.
const ATIME_SCRIPT = `
touch -a -d '2011-01-01 00:00:00.5' src/a/two.txt
touch -d '2012-02-02 02:02:02.222' copy-p.txt
touch -a -t 200001010000.30 t/one.txt
`

const STAT = (field: 'mtime' | 'atime', only?: string[]) => `python3 - ${field} ${(only ?? []).join(' ')} <<'EOF'
import os, json, sys
field, only = sys.argv[1], sys.argv[2:]
out = {}
for root, dirs, files in os.walk('.'):
    for n in sorted(dirs + files):
        p = os.path.join(root, n)
        if only and p not in only: continue
        st = os.lstat(p)
        ns = st.st_mtime_ns if field == 'mtime' else st.st_atime_ns
        # Directory times move with every entry added; keep only those set explicitly.
        keep = not os.path.isdir(p) or p in ('./src/a', './copy-a/a', './t/a')
        out[p] = [oct(st.st_mode), ns // 1000000 if keep else None]
print(json.dumps(out, sort_keys=True))
EOF`

if (fuseAvailable(t)) {
  t.test('modes and times match a plain directory', async t => {
    const w = workspace(t, SETUP)
    const plain = join(w.home, '..', 'plain')
    fs.mkdirSync(plain)
    w.run(SETUP, plain)
    w.ok('mount', w.ws)
    w.run(MTIME_SCRIPT)
    w.run(MTIME_SCRIPT, plain)
    const onDisk = JSON.parse(w.run(STAT('mtime'), plain))
    t.same(JSON.parse(w.run(STAT('mtime'))), onDisk, 'modes and mtimes after chmod, touch -m/-d/-h, tar -xp, cp -p, cp -a')
    t.equal(fs.statSync(join(w.ws, 'src/one.txt')).mtime.getTime(), new Date(2010, 4, 6, 7, 8, 9, 123).getTime(), 'touch -m set the exact mtime, milliseconds included')
    w.run(ATIME_SCRIPT)
    w.run(ATIME_SCRIPT, plain)
    const files = ['./src/a/two.txt', './copy-p.txt', './t/one.txt']
    t.same(JSON.parse(w.run(STAT('atime', files))), JSON.parse(w.run(STAT('atime', files), plain)), 'atimes after touch -a, touch -d and touch -a -t')
    t.same(JSON.parse(w.run(STAT('mtime', files))), JSON.parse(w.run(STAT('mtime', files), plain)), 'touch -a left the mtime alone')
    w.ok('unmount', w.ws)
    t.same(JSON.parse(w.run(STAT('mtime'))), JSON.parse(w.run(STAT('mtime'), plain)), 'after unmount the real files keep modes and modification times')
  })
}

// cpfs negotiates HANDLE_KILLPRIV_V2 (the kernel then stops asking for security.capability on
// every write), so clearing privileges is the overlay's job: a write or truncate by a user
// without CAP_FSETID clears set-user-ID (and set-group-ID when group-executable), root's keeps
// them, chown clears them, and any write drops file capabilities. As ext4 does, seen at once
// through the kernel's cached attributes, and applied so.
const PRIV_SETUP = `
for f in cap-w cap-t cap-chown; do echo bin > $f; setcap cap_net_raw+ep $f; done
for f in u-w g-w gx-w u-t; do echo x > $f; chown nobody $f; done
chmod 4755 u-w u-t; chmod 2745 g-w; chmod 2755 gx-w
echo x > root-w; chmod 6755 root-w
echo x > chowned; chmod 6755 chowned
`
const PRIV_SCRIPT = `
echo more >> cap-w; truncate -s 1 cap-t; chown nobody cap-chown
su nobody -s /bin/sh -c 'echo y >> u-w; echo y >> g-w; echo y >> gx-w; truncate -s 0 u-t'
echo y >> root-w; chown nobody chowned
`
const PRIV_STAT = `for f in cap-w cap-t cap-chown u-w g-w gx-w u-t root-w chowned; do echo "$f $(stat -c '%A %U' $f) [$(getcap $f | cut -d' ' -f2)]"; done`

if (fuseAvailable(t)) {
  t.test('set-ID bits and capabilities after write, truncate and chown match a plain directory', async t => {
    const w = workspace(t, PRIV_SETUP)
    const plain = join(w.home, '..', 'plain')
    fs.mkdirSync(plain)
    w.run(PRIV_SETUP, plain)
    // nobody must reach both directories.
    fs.chmodSync(join(w.home, '..'), 0o755)
    fs.chmodSync(w.ws, 0o755)
    w.ok('mount', w.ws, '--allow-other')
    w.run(PRIV_SCRIPT)
    w.run(PRIV_SCRIPT, plain)
    const expected = w.run(PRIV_STAT, plain)
    t.match(expected, /u-w -rwxr-xr-x nobody/, 'the plain directory shows the kernel\'s rules (set-user-ID cleared)')
    t.equal(w.run(PRIV_STAT), expected, 'the mount shows the same modes and capabilities at once')
    w.ok('unmount', w.ws)
    t.equal(w.run(PRIV_STAT), expected, 'and the real files have them after unmount')
  })
}
