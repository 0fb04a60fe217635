// Capture and rewind with real tools: every write by any process lands in the head turn,
// and a live rewind gives back exactly the view at the start of a turn.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CLI, fuseAvailable, manifest, workspace } from './helpers.js'

const TREE = `
mkdir -p src/lib docs empty
printf 'line one\\nline two\\n' > src/main.c
printf 'alpha\\n' > src/lib/a.txt
printf 'beta\\n' > src/lib/b.txt
printf '# readme\\n' > README.md
chmod 755 src/main.c
ln -s src/main.c link-to-main
printf 'doc\\n' > docs/guide.md
`

if (fuseAvailable(t)) {
  t.test('shell writes land in the head turn and rewind drops them', async t => {
    const w = workspace(t, TREE)
    const before = manifest(w.ws)
    t.equal(w.ok('mount', w.ws), '1', 'a fresh mount starts at turn 1')
    w.run(`sed -i 's/one/ONE/' src/main.c && echo appended >> README.md && printf new > src/new.txt`)
    t.equal(w.run('cat src/main.c'), 'line ONE\nline two\n', 'sed -i is visible in the mount')
    t.equal(w.run('cat README.md'), '# readme\nappended\n', 'echo >> appends')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.same(log[0].changes.map((c: any) => c.path).sort(), ['/README.md', '/src/main.c', '/src/new.txt'], 'the turn records exactly the changed paths')
    t.equal(w.ok('turn', w.ws, '-m', 'second'), '2')
    w.run('rm README.md && chmod 600 src/lib/a.txt')
    w.ok('rewind', '2', w.ws)
    t.equal(w.run('cat README.md'), '# readme\nappended\n', 'rewind to 2 restores the deleted file')
    t.equal(fs.statSync(join(w.ws, 'src/lib/a.txt')).mode & 0o777, 0o644, 'and the mode')
    w.ok('rewind', '1', w.ws)
    t.same(manifest(w.ws), before, 'rewind to turn 1 equals the mount-time tree byte for byte')
    t.equal(w.run('cat src/main.c'), 'line one\nline two\n', 'cat right after the rewind shows rewound content')
    w.ok('redo', w.ws)
    t.equal(w.run('cat README.md'), '# readme\nappended\n', 'redo brings back turn 1 work')
    w.ok('redo', w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'README.md')), 'a second redo brings back the deletion of turn 2')
    const r = w.cpfs('redo', w.ws)
    t.equal(r.code, 1, 'nothing left to redo')
    t.match(r.stderr, /^cpfs: nothing to redo \(/)
    w.ok('unmount', w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'README.md')), 'unmount applied the head view')
    t.equal(fs.readFileSync(join(w.ws, 'src/main.c'), 'utf8'), 'line ONE\nline two\n')
  })

  t.test('the real directory is untouched while mounted', async t => {
    const w = workspace(t, TREE)
    const before = manifest(w.ws)
    w.ok('mount', w.ws)
    w.run('echo changed > README.md && rm -rf src && mkdir newdir && touch newdir/f')
    // The daemon's lower handle is the only way to the real files; unmount --discard shows them.
    w.ok('unmount', w.ws, '--discard')
    t.same(manifest(w.ws), before, 'discard leaves the real directory exactly as it was')
    const st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(st.pending, 0, 'nothing discarded is pending')
    t.equal(st.redo, 1, 'the discarded work can be brought back')
  })

  t.test('rm -rf of a lower directory, then recreating it, hides the old children (opaque)', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('rm -rf src && mkdir -p src/lib && echo fresh > src/lib/a.txt')
    t.equal(w.run('find src | sort'), 'src\nsrc/lib\nsrc/lib/a.txt\n', 'only the new children are visible')
    w.ok('turn', w.ws)
    t.equal(w.run('find src | sort'), 'src\nsrc/lib\nsrc/lib/a.txt\n', 'still after the turn')
    w.ok('rewind', '1', w.ws)
    t.equal(w.run('find src | sort'), 'src\nsrc/lib\nsrc/lib/a.txt\nsrc/lib/b.txt\nsrc/main.c\n', 'rewind restores the lower children')
    w.ok('redo', w.ws)
    w.ok('unmount', w.ws)
    t.equal(w.run('find src | sort'), 'src\nsrc/lib\nsrc/lib/a.txt\n', 'and unmount applies the opaque directory')
    t.equal(w.run('cat src/lib/a.txt'), 'fresh\n')
  })

  t.test('mv of a lower directory with 1,000 files is O(1) and rewinds', async t => {
    const w = workspace(t, 'mkdir big && for i in $(seq 1 1000); do echo "file $i" > big/f$i; done')
    const before = manifest(w.ws)
    w.ok('mount', w.ws)
    w.run('mv big moved')
    t.equal(w.run('ls moved | wc -l').trim(), '1000', 'all 1,000 files are visible at the new name')
    t.equal(w.run('cat moved/f512'), 'file 512\n')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.ok(log[0].files <= 2, `the rename records the directory, not its contents (${log[0].files} entries)`)
    w.run('echo changed > moved/f7 && rm moved/f8')
    w.ok('turn', w.ws)
    w.run('mv moved again')
    t.equal(w.run('cat again/f7'), 'changed\n', 'a second rename keeps upper changes below it')
    t.notOk(fs.existsSync(join(w.ws, 'again/f8')), 'and whiteouts below it')
    w.ok('rewind', '2', w.ws)
    t.equal(w.run('cat moved/f7'), 'changed\n', 'rewind across the second rename')
    w.ok('rewind', '1', w.ws)
    t.same(manifest(w.ws), before, 'rewind to 1 gives back the original directory')
    w.ok('redo', w.ws)
    w.ok('redo', w.ws)
    w.ok('unmount', w.ws)
    t.equal(w.run('ls again | wc -l').trim(), '999', 'unmount applies the moved tree')
    t.equal(w.run('cat again/f7 again/f1'), 'changed\nfile 1\n')
    t.notOk(fs.existsSync(join(w.ws, 'big')), 'the old name is gone')
  })

  t.test('rename over an existing target, files and directories', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('mv src/lib/a.txt src/lib/b.txt')
    t.equal(w.run('cat src/lib/b.txt'), 'alpha\n', 'file renamed over a file')
    t.equal(w.run('ls src/lib'), 'b.txt\n')
    w.run('mkdir target && mv empty target/ && rmdir target/empty')
    t.equal(w.run('mkdir x && mv docs x 2>&1 || true; ls x'), 'docs\n')
    const r = w.sh('mkdir full && touch full/f && mv -T src full')
    t.not(r.code, 0, 'rename of a directory over a non-empty one fails')
    t.match(r.stderr, /not empty|exists/i)
    w.ok('rewind', '1', w.ws)
    t.equal(w.run('cat src/lib/a.txt src/lib/b.txt'), 'alpha\nbeta\n')
  })

  t.test('editors: write a temporary file, then rename it over the original', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run(`python3 - <<'EOF'
import os
with open('src/.main.c.swp', 'w') as f:
    f.write('edited by an editor\\n')
    f.flush()
    os.fsync(f.fileno())
os.chmod('src/.main.c.swp', 0o755)
os.rename('src/.main.c.swp', 'src/main.c')
EOF`)
    t.equal(w.run('cat src/main.c'), 'edited by an editor\n')
    t.equal(fs.statSync(join(w.ws, 'src/main.c')).mode & 0o777, 0o755)
    t.equal(w.run('ls -a src'), '.\n..\nlib\nmain.c\n', 'no temporary file left')
    w.ok('undo', w.ws)
    t.equal(w.run('cat src/main.c'), 'line one\nline two\n', 'undo restores the original')
  })

  t.test('files: offsets, appends, sparse files, truncation, symlinks, hard links, chmod', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run(`
      printf 'abcdefghij' > f
      printf 'XY' | dd of=f bs=1 seek=3 conv=notrunc status=none
      truncate -s 5 f
      printf 'Z' >> f
      dd if=/dev/urandom of=sparse bs=4096 count=1 seek=300 status=none
      truncate -s 100000 shrink && printf 'end' >> shrink && truncate -s 10 shrink && truncate -s 20 shrink
      ln -s ../README.md docs/readme-link
      ln src/lib/a.txt hard
      echo more >> hard
      chmod 700 docs && chmod 4755 src/main.c
    `)
    t.equal(w.run('cat f'), 'abcXYZ', 'write at offset, truncate, append')
    t.equal(fs.statSync(join(w.ws, 'sparse')).size, 301 * 4096, 'sparse file size')
    t.equal(w.run('head -c 4096 sparse | tr -d "\\0" | wc -c').trim(), '0', 'the hole reads as zeros')
    t.equal(w.run('od -An -c shrink | tr -d " \\n"'), '\\0'.repeat(20), 'shrink then grow never shows old bytes')
    t.equal(fs.readlinkSync(join(w.ws, 'docs/readme-link')), '../README.md')
    t.equal(w.run('cat docs/readme-link'), '# readme\n', 'symlinks resolve inside the mount')
    t.equal(w.run('cat hard'), 'alpha\nmore\n', 'a write through a hard link')
    t.equal(w.run('cat src/lib/a.txt'), 'alpha\nmore\n', 'shows through the other name: one file')
    t.equal(fs.statSync(join(w.ws, 'docs')).mode & 0o7777, 0o700)
    t.equal(fs.statSync(join(w.ws, 'src/main.c')).mode & 0o7777, 0o4755)
    const rm = w.sh('rmdir src')
    t.not(rm.code, 0)
    t.match(rm.stderr, /not empty/i, 'rmdir of a non-empty directory: ENOTEMPTY')
    const inMount = manifest(w.ws)
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws), inMount, 'unmount applies every kind of change byte-exact')
  })

  t.test('an unlinked file stays readable and writable through its open handle', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const out = w.run(`exec 3<>README.md; rm README.md; echo extra >&3; cat /proc/self/fd/3 <&3 || true; exec 3<&-; ls`)
    t.notMatch(out, /README/, 'the name is gone')
    const r = w.run(`python3 -c "
import os
fd = os.open('src/lib/a.txt', os.O_RDWR)
os.unlink('src/lib/a.txt')
os.pwrite(fd, b'ALPHA', 0)
print(os.pread(fd, 100, 0).decode(), end='')
"`)
    t.equal(r, 'ALPHA\n', 'read back through the handle after unlink')
    t.notOk(fs.existsSync(join(w.ws, 'src/lib/a.txt')))
  })

  t.test('a reader holding a file open sees every write another process completed, as on ext4', async t => {
    // The kernel keeps its page cache across opens (no OPEN requests): this is what shows that
    // a cached page never hides a write made through another descriptor, path or process.
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('printf "written in the mount\\n" > made.txt && ln made.txt made-link.txt')
    const r = w.run(`python3 - <<'EOF'
import mmap, os, subprocess
out = []
for name, other in (('README.md', 'README.md'), ('made.txt', 'made-link.txt')):
    fd = os.open(name, os.O_RDONLY)
    before = os.pread(fd, 100, 0)
    m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    mapped = m[:]
    # another process: an in-place overwrite, then an append, each completed before we read
    subprocess.run(['sh', '-c', f'printf XY | dd of={other} bs=1 seek=2 conv=notrunc status=none && echo appended >> {other}'], check=True)
    after = os.pread(fd, 100, 0)
    out.append(f'{name}: {before!r} {mapped!r} -> {after!r} mmap {m[:4]!r} fstat {os.fstat(fd).st_size}')
    m.close()
    os.close(fd)
print('\\n'.join(out))
EOF`)
    t.equal(r, [
      "README.md: b'# readme\\n' b'# readme\\n' -> b'# XYadme\\nappended\\n' mmap b'# XY' fstat 18",
      "made.txt: b'written in the mount\\n' b'written in the mount\\n' -> b'wrXYten in the mount\\nappended\\n' mmap b'wrXY' fstat 30"
    ].join('\n') + '\n', 'pread and a shared mapping through the old descriptor both show the other process\'s bytes and size')
    t.equal(fs.readFileSync(join(w.ws, 'made.txt'), 'utf8'), 'wrXYten in the mount\nappended\n', 'a new open sees them too')
  })

  t.test('git init, add, commit, status, checkout inside the mount', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run(`git init -q && git add -A && git -c user.email=a@b -c user.name=n commit -qm one
      echo change >> README.md && git -c user.email=a@b -c user.name=n commit -qam two
      git checkout -q HEAD~1 -- README.md`)
    t.equal(w.run('git status --porcelain'), 'M  README.md\n', 'git sees the checkout of the old version')
    t.equal(w.run('cat README.md'), '# readme\n')
    t.equal(w.run('git log --oneline | wc -l').trim(), '2')
    w.run('git fsck --no-progress 2>&1')
    w.ok('turn', w.ws)
    w.run('git checkout -q -b feature && echo f > feature.txt && git add feature.txt && git -c user.email=a@b -c user.name=n commit -qm three')
    w.ok('rewind', '2', w.ws)
    t.equal(w.run('git log --oneline | wc -l').trim(), '2', 'rewind takes git back too')
    t.equal(w.run('git status --porcelain'), 'M  README.md\n')
    w.ok('unmount', w.ws)
    t.equal(w.run('git status --porcelain'), 'M  README.md\n', 'the applied repository is intact')
    w.run('git fsck --no-progress 2>&1')
  })

  t.test('tar -x, cp -a, rm -rf and a small-file storm', async t => {
    const w = workspace(t, TREE)
    const plain = join(w.home, '..', 'plain')
    fs.mkdirSync(plain)
    w.run(`tar -C ${w.ws} -cf ${plain}/../tree.tar . && mkdir -p ${plain}/x && tar -C ${plain}/x -xf ${plain}/../tree.tar`)
    w.ok('mount', w.ws)
    w.run(`mkdir x && tar -C x -xf ${plain}/../tree.tar`)
    t.same(manifest(join(w.ws, 'x')), manifest(join(plain, 'x')), 'tar -x in the mount equals tar -x on disk')
    w.run('cp -a x y')
    t.same(manifest(join(w.ws, 'y')), manifest(join(w.ws, 'x')), 'cp -a copies the tree')
    w.run('mkdir storm && cd storm && for i in $(seq 1 2000); do echo $i > f$i; done && rm f1* && ls | wc -l')
    t.equal(w.run('ls storm | wc -l').trim(), String(2000 - 1111), 'create 2,000 files, delete some')
    const full = manifest(w.ws)
    w.ok('turn', w.ws)
    w.run('rm -rf x y storm')
    t.equal(w.run('ls'), 'README.md\ndocs\nempty\nlink-to-main\nsrc\n', 'rm -rf removes the trees')
    w.ok('undo', w.ws)
    t.same(manifest(w.ws), full, 'undo brings the removed trees back')
    w.ok('undo', w.ws)
    t.same(manifest(w.ws), manifest(join(plain, 'x')), 'a second undo steps back to the original tree')
  })

  t.test('open handles across a live rewind become stale (ESTALE)', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo v1 > file')
    w.ok('turn', w.ws)
    const r = w.run(`python3 - ${JSON.stringify(CLI)} <<'EOF'
import os, subprocess, sys
fd = os.open('file', os.O_RDWR)
subprocess.run(['node', sys.argv[1], 'rewind', '1', '.'], check=True, stdout=subprocess.DEVNULL)
try:
    os.pwrite(fd, b'lost?', 0)
    print('write-ok')
except OSError as e:
    print('errno', e.errno)
EOF`)
    t.equal(r.trim(), 'errno 116', 'a write through a handle opened before the rewind fails with ESTALE')
    t.notOk(fs.existsSync(join(w.ws, 'file')), 'and the rewound view has no such file')
  })

  t.test('a handle on a file the rewind kept reads and writes the rewound file', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo v1 > kept')
    w.ok('turn', w.ws)
    w.run('echo version-2 > kept')
    const r = w.run(`python3 - ${JSON.stringify(CLI)} <<'EOF'
import os, subprocess, sys
fd = os.open('kept', os.O_RDWR)
before = os.pread(fd, 100, 0)
subprocess.run(['node', sys.argv[1], 'rewind', '2', '.'], check=True, stdout=subprocess.DEVNULL)
after = os.pread(fd, 100, 0)
os.pwrite(fd, b'V', 0)
os.close(fd)
print(before, after)
EOF`)
    t.equal(r.trim(), "b'version-2\\n' b'v1\\n'", 'the descriptor reads what the name holds after the rewind, as after another process rewrote it')
    t.equal(fs.readFileSync(join(w.ws, 'kept'), 'utf8'), 'V1\n', 'and a write through it lands in the rewound file')
    t.match(w.ok('diff', w.ws), /kept/, 'recorded in the history like any write')
  })

  t.test('reads are free; identical bytes are stored once; chown', async t => {
    const w = workspace(t, TREE + '\nhead -c 3000000 /dev/urandom > big.bin')
    w.ok('mount', w.ws)
    const size0 = JSON.parse(w.ok('status', w.ws, '--json')).storeBytes
    w.run('cat $(find . -type f) > /dev/null && python3 -c "import os; os.close(os.open(\'README.md\', os.O_RDWR))" && ls -lR > /dev/null && git status 2>/dev/null || true')
    const log0 = JSON.parse(w.ok('log', w.ws, '--json'))
    t.equal(log0[0].files, 0, 'reading, opening for write without writing, and listing record nothing')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).storeBytes - size0 < 8192, true, 'and do not grow the store')
    w.run('head -c 2000000 /dev/urandom > a.bin')
    w.ok('turn', w.ws)
    const size1 = JSON.parse(w.ok('status', w.ws, '--json')).storeBytes
    w.run('cp a.bin b.bin && cp a.bin c.bin')
    w.ok('turn', w.ws)
    const size2 = JSON.parse(w.ok('status', w.ws, '--json')).storeBytes
    t.ok(size1 - size0 >= 2000000, `new bytes are stored (${size1 - size0} B for 2 MB)`)
    t.ok(size2 - size1 < 100000, `two copies (4 MB) of bytes already stored grow the store by ${size2 - size1} B`)
    w.run('cp big.bin copy1.bin')
    w.ok('turn', w.ws)
    const size3 = JSON.parse(w.ok('status', w.ws, '--json')).storeBytes
    w.run('cp big.bin copy2.bin && cat big.bin > copy3.bin')
    w.ok('turn', w.ws)
    const size4 = JSON.parse(w.ok('status', w.ws, '--json')).storeBytes
    t.ok(size3 - size2 >= 3000000, `a copy of a lower file stores its bytes once (${size3 - size2} B for 3 MB)`)
    t.ok(size4 - size3 < 100000, `two more copies grow the store by ${size4 - size3} B`)
    w.run('printf X | dd of=big.bin bs=1 seek=1500000 conv=notrunc status=none')
    const log = JSON.parse(w.ok('log', w.ws, '--json'))
    t.equal(log[4].bytes, 65536, 'a 1-byte write into a 3 MB lower file stores one 64 KiB chunk')
    w.run('chown 1234:5678 README.md && chown -h 42:43 link-to-main')
    t.equal(w.run('stat -c %u:%g README.md'), '1234:5678\n', 'chown as root sets owner and group')
    t.equal(w.run('stat -c %u:%g link-to-main'), '42:43\n', 'chown -h changes the symlink itself')
    t.equal(w.run('stat -L -c %u:%g link-to-main'), '0:0\n', 'not its target')
    w.ok('unmount', w.ws)
    t.equal(w.run('stat -c %u:%g README.md'), '1234:5678\n', 'unmount applies owners (as root)')
    t.equal(w.run('stat -c %u:%g link-to-main'), '42:43\n', 'of symlinks too')
  })

  t.test('the kernel caches lookups, and a rewind never leaves a stale entry', async t => {
    const w = workspace(t, 'mkdir -p a/b/c && echo deep > a/b/c/f && echo file > x && mkdir d && chmod 755 .')
    w.ok('mount', w.ws)
    w.run('stat a/b/c/f x d >/dev/null')
    w.ok('status', w.ws, '--reset-stats')
    w.run('for i in 1 2 3 4 5; do stat a/b/c/f >/dev/null; done')
    const ops = JSON.parse(w.ok('status', w.ws, '--json', '--stats')).ops.counts
    t.notOk(ops.getattr, `repeated stats of a cached path reach the daemon ${ops.getattr ?? 0} times (the kernel caches entries and attributes)`)
    w.ok('turn', w.ws)
    w.run('rm -rf a && mkdir -p a/b && echo changed > a/b/new && rm x && mkdir x && rmdir d && echo now-a-file > d && chmod 700 .')
    w.run('stat a/b/new x d . >/dev/null')
    w.ok('rewind', '2', w.ws)
    // Right after the rewind, with every one of those names cached by the kernel:
    t.equal(w.run('cat a/b/c/f'), 'deep\n', 'a deep path removed in the dropped turn is back')
    t.equal(w.sh('test -e a/b/new').code, 1, 'a path created in the dropped turn is gone')
    t.equal(w.run('stat -c %F x d'), 'regular file\ndirectory\n', 'types changed back')
    t.equal(w.run('stat -c %a .'), '755\n', 'the root directory\'s mode changed back')
    w.ok('redo', w.ws)
    t.equal(w.run('stat -c %F x d && cat a/b/new && stat -c %a .'), 'directory\nregular file\nchanged\n700\n', 'and redo is visible at once')
  })
}
