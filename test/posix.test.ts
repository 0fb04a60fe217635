// POSIX semantics of the overlay that tools rely on, each driven with real tools in a mount and
// then rewound and applied: hard links that are one file (ln, cp -al, git clone --local),
// directory link counts, parent directory times, and name limits.
import t from 'tap'
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { fuseAvailable, manifest, sleep, workspace } from './helpers.js'

/** st_ino, st_nlink of a path, as stat(1) prints them. */
function inoLinks (w: { run: (s: string) => string }, path: string): [number, number] {
  const [ino, links] = w.run(`stat -c '%i %h' ${path}`).trim().split(' ').map(Number)
  return [ino, links]
}

/** mtime and ctime in nanoseconds (BigInt), lstat'ed. */
function times (path: string): { m: bigint, c: bigint } {
  const st = fs.lstatSync(path, { bigint: true })
  return { m: st.mtimeNs, c: st.ctimeNs }
}

if (fuseAvailable(t)) {
  t.test('ln: one file with two names — content, mode, owner, nlink, unlink, rename over it; rewound and applied as a real hard link', async t => {
    const w = workspace(t, 'echo one > a && mkdir d')
    w.ok('mount', w.ws)
    w.ok('turn', w.ws) // turn 2 begins: a exists, not linked
    w.run('ln a d/b')
    const [ia, na] = inoLinks(w, 'a')
    const [ib, nb] = inoLinks(w, 'd/b')
    t.equal(ib, ia, 'ln gives the same inode number')
    t.same([na, nb], [2, 2], 'nlink 2 on both names')
    w.run('echo two >> a && chmod 600 d/b && chown 65534:65534 a')
    t.equal(w.run('cat d/b'), 'one\ntwo\n', 'a write through one name shows through the other')
    t.equal(w.run('stat -c %a:%u:%g a'), '600:65534:65534\n', 'chmod through one name, chown through the other: one inode')
    w.run('ln d/b c && rm a')
    t.same(inoLinks(w, 'c'), [ia, 2], 'a third name, then one removed: nlink 2')
    t.equal(w.run('cat c'), 'one\ntwo\n', 'unlink of one name keeps the data for the others')
    w.ok('turn', w.ws) // turn 3 begins: d/b and c, one file
    // Open, then unlink every name but one, then the last: the open file counts down to 0.
    const counts = w.run(`exec 3<c; stat -L -c %h /proc/self/fd/3; rm d/b; stat -L -c %h /proc/self/fd/3; rm c; stat -L -c %h /proc/self/fd/3; cat <&3`)
    t.equal(counts, '2\n1\n0\none\ntwo\n', 'nlink right while the file is open and unlinked, still readable')
    t.equal(w.run('ls -A'), 'd\n')
    w.run('echo x > x && ln x y && echo z > z && mv z y')
    t.same(inoLinks(w, 'x')[1], 1, 'rename over a link drops that link')
    t.equal(w.run('cat x y'), 'x\nz\n')
    w.run(`ln x y2 && perl -e 'rename "x", "y2" or die "$!"'`) // two names of one inode: rename(2) does nothing
    t.equal(w.run('ls -A'), 'd\nx\ny\ny2\n', 'rename between two names of one inode leaves both')
    w.ok('rewind', '2', w.ws)
    t.equal(w.run('ls -A . d'), '.:\na\nd\n\nd:\n', 'a rewind to before ln leaves one name')
    t.same(inoLinks(w, 'a')[1], 1, 'with nlink 1')
    t.equal(w.run('cat a'), 'one\n', 'and its old content')
    w.ok('redo', w.ws)
    t.equal(w.run('ls -A'), 'd\nx\ny\ny2\n', 'redo brings back the later state')
    w.ok('rewind', '3', w.ws)
    w.run('echo more >> d/b && ln d/b e')
    const inMount = manifest(w.ws)
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws), inMount, 'unmount applies the linked names byte-exact')
    const real = ['a', 'd/b', 'c', 'e'].filter(p => fs.existsSync(join(w.ws, p)))
    t.same(real, ['d/b', 'c', 'e'], 'the names of turn 3 and the new one')
    const st = real.map(p => fs.statSync(join(w.ws, p)))
    t.ok(st.every(s => s.ino === st[0].ino), 'one real inode for every name')
    t.equal(st[0].nlink, 3, 'nlink 3 on the real disk')
    t.equal(fs.readFileSync(join(w.ws, 'e'), 'utf8'), 'one\ntwo\nmore\n')
    t.equal(st[0].mode & 0o777, 0o600, 'mode applied')
    t.same([st[0].uid, st[0].gid], [65534, 65534], 'owner applied')
    t.equal(JSON.parse(w.ok('status', w.ws, '--json')).pending, 0, 'nothing pending')
    w.ok('mount', w.ws)
    t.same(inoLinks(w, 'c'), [st[0].ino, 3], 'the next mount sees the real links')
    w.run('echo again >> c')
    t.equal(w.run('cat e'), 'one\ntwo\nmore\nagain\n', 'and keeps them one file')
    w.ok('unmount', w.ws)
    t.equal(fs.readFileSync(join(w.ws, 'd/b'), 'utf8'), 'one\ntwo\nmore\nagain\n')
    t.equal(fs.statSync(join(w.ws, 'd/b')).ino, st[0].ino, 'the same real inode, rewritten in place')
  })

  t.test('ln of a real file: the copy-up is linked; the real file keeps its inode on apply', async t => {
    const w = workspace(t, 'echo real > r && echo other > o && ln o o2')
    const realIno = fs.statSync(join(w.ws, 'r')).ino
    w.ok('mount', w.ws)
    w.ok('turn', w.ws)
    w.run('ln r r2')
    t.same(inoLinks(w, 'r2'), [realIno, 2], 'the link shows the real inode number, nlink 2')
    w.run('echo edit >> r2')
    t.equal(w.run('cat r'), 'real\nedit\n', 'the edit shows through the real name')
    t.same(inoLinks(w, 'o'), [fs.statSync(join(w.ws, 'o')).ino, 2], 'a real file with two names: nlink 2 in the mount')
    w.run('ln o o3 && echo x >> o3')
    t.equal(w.run('cat o o2 o3'), 'other\nx\n'.repeat(3), 'a link of a real multi-link file: all three names one file')
    t.same(inoLinks(w, 'o2')[1], 3, 'nlink 3')
    w.ok('unmount', w.ws)
    t.equal(fs.statSync(join(w.ws, 'r2')).ino, realIno, 'r2 is a real hard link of r')
    t.equal(fs.readFileSync(join(w.ws, 'r'), 'utf8'), 'real\nedit\n')
    const o = ['o', 'o2', 'o3'].map(p => fs.statSync(join(w.ws, p)))
    t.ok(o.every(s => s.ino === o[0].ino) && o[0].nlink === 3, 'o, o2, o3: one real inode, nlink 3')
    t.equal(fs.readFileSync(join(w.ws, 'o3'), 'utf8'), 'other\nx\n')
    // Offline rewind to before the links: a verified plan on the real directory.
    w.ok('rewind', '2', w.ws)
    t.notOk(fs.existsSync(join(w.ws, 'r2')) || fs.existsSync(join(w.ws, 'o3')), 'the links are gone again')
    t.equal(fs.statSync(join(w.ws, 'r')).nlink, 1, 'r has one name')
    t.equal(fs.readFileSync(join(w.ws, 'r'), 'utf8'), 'real\n', 'and its old content')
    t.equal(fs.statSync(join(w.ws, 'o')).nlink, 2, 'o and o2 are still linked')
    t.equal(fs.statSync(join(w.ws, 'o2')).ino, fs.statSync(join(w.ws, 'o')).ino)
  })

  t.test('cp -al and git clone --local inside the mount: hard-linked trees, applied with their links', async t => {
    const w = workspace(t, 'mkdir -p src/lib && echo a > src/lib/a.c && echo m > src/main.c')
    w.ok('mount', w.ws)
    w.run('cp -al src backup')
    t.same(inoLinks(w, 'backup/lib/a.c'), [inoLinks(w, 'src/lib/a.c')[0], 2], 'cp -al: same inode, nlink 2')
    w.run(`git init -q repo && cd repo && git config user.email t@t && git config user.name t &&
      for i in 1 2 3; do echo $i > f$i; done && git add . && git commit -qm one && cd .. &&
      git clone -q --local repo clone`)
    const objects = w.run('cd repo/.git/objects && find . -type f -path "./??/*" | sort').trim().split('\n')
    t.ok(objects.length >= 4, `the repository has loose objects (${objects.length})`)
    const linked = objects.filter(o => inoLinks(w, `repo/.git/objects/${o}`)[0] === inoLinks(w, `clone/.git/objects/${o}`)[0])
    t.equal(linked.length, objects.length, 'git clone --local hard-linked every object')
    t.equal(w.sh('cd clone && git fsck --strict').code, 0, 'the clone is sound (git fsck)')
    w.run('cd clone && echo 4 > f4 && git add f4 && git commit -qm two')
    t.equal(w.sh('cd repo && git fsck --strict').code, 0, 'and so is the lower after a commit in the clone')
    const inMount = manifest(w.ws)
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws), inMount, 'applied byte-exact')
    const ino = (p: string) => fs.statSync(join(w.ws, p)).ino
    t.equal(ino('backup/main.c'), ino('src/main.c'), 'the backup is linked on the real disk')
    t.ok(objects.every(o => ino(`repo/.git/objects/${o}`) === ino(`clone/.git/objects/${o}`)), 'every git object is one real inode in both repositories')
    t.equal(spawnSync('git', ['fsck', '--strict'], { cwd: join(w.ws, 'clone') }).status, 0, 'the applied clone is sound')
  })

  t.test('fork and restore of linked files: a fork gets real hard links; a restored name becomes a file of its own', async t => {
    const w = workspace(t, 'echo real > r')
    w.ok('mount', w.ws)
    w.run('echo one > a && ln a b && ln r r2 && mkdir d && ln a d/c')
    w.ok('turn', w.ws) // turn 2 begins with the links
    w.run('echo two >> a')
    const dest = join(w.ws, '..', 'forked')
    w.ok('fork', '2', dest, w.ws)
    const ino = (p: string) => fs.statSync(join(dest, p)).ino
    t.ok(ino('a') === ino('b') && ino('b') === ino('d/c'), 'the fork holds a, b and d/c as one real inode')
    t.equal(fs.statSync(join(dest, 'a')).nlink, 3, 'nlink 3')
    t.equal(ino('r'), ino('r2'), 'and the link of the real file')
    t.equal(fs.readFileSync(join(dest, 'b'), 'utf8'), 'one\n', 'with turn 2\'s content')
    w.ok('restore', '2', join(w.ws, 'b'), w.ws)
    t.equal(w.run('cat a b'), 'one\ntwo\none\n', 'restore of one name gives it turn 2\'s content')
    t.same([inoLinks(w, 'a')[1], inoLinks(w, 'b')[1]], [2, 1], 'as a file of its own: the others keep their link')
    t.not(inoLinks(w, 'b')[0], inoLinks(w, 'a')[0], 'with its own inode number')
    const inMount = manifest(w.ws)
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws), inMount, 'applied byte-exact')
    t.equal(fs.statSync(join(w.ws, 'a')).ino, fs.statSync(join(w.ws, 'd/c')).ino, 'a and d/c are still one real file')
    t.not(fs.statSync(join(w.ws, 'a')).ino, fs.statSync(join(w.ws, 'b')).ino, 'b is not')
  })

  t.test('an open file keeps its content after its name is removed or renamed over (written in this turn, store batches in between)', async t => {
    const w = workspace(t, 'echo lower > lower.txt')
    w.ok('mount', w.ws)
    // Each case: open, make the name go away, let the daemon write its batch (fsync: every
    // pending change, in a synced batch), drop this file's pages from the kernel's page cache
    // (so the read reaches the daemon; only this file's, not the host's whole cache) and count
    // what is left of them (mincore: 0), then read through the open descriptor.
    const out = w.run(`python3 - <<'PY'
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
def cached(fd):
    size = os.fstat(fd).st_size
    if size == 0: return 0
    p = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if p in (None, ctypes.c_void_p(-1).value): raise OSError(ctypes.get_errno(), 'mmap')
    vec = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
    r = libc.mincore(p, size, vec)
    libc.munmap(p, size)
    if r != 0: raise OSError(ctypes.get_errno(), 'mincore')
    return sum(b & 1 for b in vec)
def drop(fd):
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return cached(fd)
def case(name, setup):
    fd = setup()
    left = drop(fd)
    os.lseek(fd, 0, 0)
    data = os.read(fd, 100)
    os.close(fd)
    print(name, data.decode().split()[0] if data else 'EMPTY', 'pages-cached', left)
def unlinked():
    open('b', 'w').write('data-b\\n'); fd = os.open('b', os.O_RDONLY); os.unlink('b'); return fd
def renamed_over():
    open('a1', 'w').write('one\\n'); open('a2', 'w').write('two\\n'); fd = os.open('a2', os.O_RDONLY); os.rename('a1', 'a2'); return fd
def temp_file():
    fd = os.open('t', os.O_RDWR | os.O_CREAT, 0o600); os.write(fd, b'tmp\\n'); os.fsync(fd); os.unlink('t'); return fd
def truncated():
    open('c', 'w').write('big\\n' * 30000); fd = os.open('c', os.O_RDONLY); r = os.open('c', os.O_RDWR); os.unlink('c'); os.close(r); return fd
case('unlinked', unlinked)
case('renamed-over', renamed_over)
case('temp-file', temp_file)
case('big-unlinked', truncated)
PY`)
    t.equal(out, 'unlinked data-b pages-cached 0\nrenamed-over two pages-cached 0\ntemp-file tmp pages-cached 0\nbig-unlinked big pages-cached 0\n', 'every reader gets the content it opened, read from the daemon (none of it cached by the kernel)')
    t.equal(w.run('cat a2'), 'one\n', 'and the new name has the new content')
    t.equal(w.sh('ls b t c').code, 2, 'the removed names are gone')
    w.ok('unmount', w.ws)
    t.same(fs.readdirSync(w.ws).sort(), ['a2', 'lower.txt'])
  })

  t.test('renameat2 RENAME_EXCHANGE swaps two names atomically (files, directories, real files); RENAME_NOREPLACE refuses an existing target', async t => {
    const w = workspace(t, 'echo real-a > ra && echo real-b > rb && mkdir rd && echo in-rd > rd/x')
    w.ok('mount', w.ws)
    const out = w.run(`python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def rn2(a, b, flags):
    r = libc.renameat2(-100, a.encode(), -100, b.encode(), flags)
    return 'ok' if r == 0 else os.strerror(ctypes.get_errno())
open('a', 'w').write('A\\n'); open('b', 'w').write('B\\n'); os.mkdir('d'); open('d/y', 'w').write('Y\\n')
print(rn2('a', 'b', 2), open('a').read().strip(), open('b').read().strip())
print(rn2('ra', 'rb', 2), open('ra').read().strip(), open('rb').read().strip())
print(rn2('d', 'rd', 2), sorted(os.listdir('d')), sorted(os.listdir('rd')))
print(rn2('a', 'rd', 2), open('rd').read().strip(), sorted(os.listdir('a')))
print(rn2('a', 'b', 1))
print(rn2('a', 'missing', 2))
PY`)
    t.equal(out, [
      'ok B A',
      'ok real-b real-a',
      "ok ['x'] ['y']",
      "ok B ['y']",
      'File exists',
      'No such file or directory'
    ].join('\n') + '\n', 'as on ext4')
    const before = w.run('ls -R; cat ra rb rd a/y b')
    w.ok('turn', w.ws)
    w.ok('rewind', '1', w.ws)
    t.equal(w.run('cat ra rb rd/x'), 'real-a\nreal-b\nin-rd\n', 'a rewind undoes the exchanges')
    w.ok('redo', w.ws)
    w.ok('unmount', w.ws)
    t.equal(w.run('ls -R; cat ra rb rd a/y b'), before, 'and the applied tree is what the mount showed')
  })

  t.test('names that are not UTF-8: refused in the mount (EILSEQ), real ones left alone, never renamed', async t => {
    const w = workspace(t, `mkdir d && python3 -c "open(b'd/caf\\xe8', 'w').write('E8')" && echo ok > d/ok`)
    w.ok('mount', w.ws)
    const out = w.run(`python3 - <<'PY'
import os
for what, f in [('create', lambda: open(b'caf\\xe9', 'w')), ('mkdir', lambda: os.mkdir(b'dir\\xff')), ('symlink', lambda: os.symlink(b'tgt\\xe9', 'l')), ('rename', lambda: os.rename('d/ok', b'd/ok\\xe9'))]:
    try:
        f(); print(what, 'ok')
    except OSError as e:
        print(what, e.strerror)
print(sorted(os.listdir('d')))
PY`)
    t.equal(out, [
      'create Invalid or incomplete multibyte or wide character',
      'mkdir Invalid or incomplete multibyte or wide character',
      'symlink Invalid or incomplete multibyte or wide character',
      'rename Invalid or incomplete multibyte or wide character',
      "['ok']"
    ].join('\n') + '\n', 'refused with EILSEQ, and the real one is not listed')
    t.not(w.sh('rm -rf d').code, 0, 'rm -rf of its directory cannot remove it')
    w.run('echo more > d/more')
    w.ok('unmount', w.ws)
    t.equal(w.run(`python3 -c "print(open(b'd/caf\\xe8').read())"`), 'E8\n', 'the real file with that name is intact after the session')
    t.equal(w.run('cat d/more'), 'more\n')
  })

  t.test('O_RDONLY|O_TRUNC truncates and an unknown xattr namespace is refused, as on ext4', async t => {
    const w = workspace(t, 'echo 1234567 > f')
    w.ok('mount', w.ws)
    t.equal(w.run(`python3 -c "import os; os.close(os.open('f', os.O_RDONLY | os.O_TRUNC)); print(os.stat('f').st_size)"`), '0\n')
    t.match(w.sh('setfattr -n foo.bar -v 1 f').stderr, /Operation not supported/)
    w.ok('unmount', w.ws)
    t.equal(fs.statSync(join(w.ws, 'f')).size, 0, 'the truncation is applied')
  })

  t.test('directory nlink = 2 + subdirectories, across mkdir, rmdir, rename, whiteouts and rewinds', async t => {
    const w = workspace(t, 'mkdir -p low/s1 low/s2 low/s3 && echo f > low/file')
    w.ok('mount', w.ws)
    const nl = (p: string) => Number(w.run(`stat -c %h ${p}`))
    t.equal(nl('low'), 5, 'a real directory with three subdirectories')
    w.ok('turn', w.ws)
    w.run('mkdir d d/a d/b && touch d/f')
    t.equal(nl('d'), 4, 'a new directory with two subdirectories (and a file)')
    w.run('rmdir d/a')
    t.equal(nl('d'), 3, 'rmdir')
    w.run('mkdir e && mv d/b e/')
    t.same([nl('d'), nl('e')], [2, 3], 'rename of a directory moves one link')
    w.run('rm -rf low/s1 && mv low/s2 e/ && mkdir low/s4')
    t.same([nl('low'), nl('e')], [4, 4], 'whiteouts of real subdirectories, one moved out, one made')
    w.run('rm -rf low/s3 && echo x > low/s3')
    t.equal(nl('low'), 3, 'a real subdirectory replaced by a file')
    t.equal(nl('.'), 2 + Number(w.run('find . -mindepth 1 -maxdepth 1 -type d | wc -l')), 'the root counts its subdirectories too')
    t.equal(w.sh('find . -type d | wc -l').stdout, w.sh('find . -noleaf -type d | wc -l').stdout, 'find without -noleaf sees every directory')
    w.ok('rewind', '2', w.ws)
    t.equal(nl('low'), 5, 'rewound: the real count again')
    t.equal(w.sh('test -e d').code, 1)
    w.ok('redo', w.ws)
    t.same([nl('low'), nl('e'), nl('d')], [3, 4, 2], 'redo: the counts of the later state')
    w.ok('unmount', w.ws)
    t.same([fs.statSync(join(w.ws, 'low')).nlink, fs.statSync(join(w.ws, 'e')).nlink], [3, 4], 'the real directories agree after apply')
  })

  t.test('parent times: every entry added or removed moves the directory\'s mtime and ctime; metadata changes move the file\'s ctime', async t => {
    const w = workspace(t, 'mkdir p q && echo f > p/f && echo g > p/g && mkdir p/sub')
    w.ok('mount', w.ws)
    const P = join(w.ws, 'p')
    const Q = join(w.ws, 'q')
    const ops: Array<[string, string, string[]]> = [
      ['create', 'echo n > p/new', [P]],
      ['mkdir', 'mkdir p/dir', [P]],
      ['rmdir', 'rmdir p/dir', [P]],
      ['symlink', 'ln -s f p/sym', [P]],
      ['link', 'ln p/f p/hard', [P]],
      ['unlink', 'rm p/hard', [P]],
      ['mknod (mkfifo)', 'mkfifo p/fifo', [P]],
      ['rename within', 'mv p/g p/g2', [P]],
      ['rename across', 'mv p/g2 q/g', [P, Q]],
      ['rename of a real directory', 'mv p/sub q/sub', [P, Q]]
    ]
    for (const [name, cmd, dirs] of ops) {
      w.run(dirs.map(d => `touch -d @1000000000 ${d}`).join(' && '))
      const before = dirs.map(times)
      await sleep(5)
      w.run(cmd)
      dirs.forEach((d, i) => {
        const after = times(d)
        t.ok(after.m > before[i].m && after.c > before[i].c, `${name}: ${d === P ? 'p' : 'q'}'s mtime and ctime move`)
      })
    }
    for (const [name, cmd] of [['chmod', 'chmod 600 p/f'], ['chown', 'chown 65534 p/f'], ['truncate', 'truncate -s 1 p/f'], ['link', 'ln p/f p/f2']]) {
      const before = times(join(P, 'f'))
      await sleep(5)
      w.run(cmd)
      t.ok(times(join(P, 'f')).c > before.c, `${name}: the file's ctime moves`)
    }
    const pm = times(P).m
    w.ok('unmount', w.ws)
    t.equal(times(P).m, pm, 'the directory\'s mtime is applied to the real directory')
  })

  t.test('name limits: ENAMETOOLONG for a component over 255 bytes on every operation that takes a name', async t => {
    const w = workspace(t, 'echo f > f && mkdir d')
    w.ok('mount', w.ws)
    const max = 'n'.repeat(255)
    const long = 'n'.repeat(256)
    const utf8 = 'é'.repeat(128) // 256 bytes in 128 characters: the limit is in bytes
    for (const [name, cmd] of [
      ['create', `: > ${long}`], ['create (UTF-8)', `: > ${utf8}`], ['mkdir', `mkdir ${long}`], ['mkfifo', `mkfifo ${long}`],
      ['link', `ln f ${long}`], ['symlink', `ln -s f ${long}`], ['rename', `mv f ${long}`], ['rename into a directory', `mv f d/${long}`],
      ['lookup', `stat ${long}`], ['rmdir', `rmdir ${long}`], ['unlink', `rm ${long}`]
    ]) {
      const r = w.sh(cmd)
      t.not(r.code, 0, `${name}: refused`)
      t.match(r.stderr, /File name too long/, `${name}: ENAMETOOLONG`)
    }
    t.equal(w.run('ls -A'), 'd\nf\n', 'nothing was created')
    const deep = Array.from({ length: 20 }, () => 'x'.repeat(250)).join('/')
    const r = w.sh(`touch ${deep}/f`)
    t.match(r.stderr, /File name too long/, 'a path over PATH_MAX: ENAMETOOLONG')
    w.run(`: > ${max} && mkdir d/${max} && ln f d/${max}/l && ln -s f s${max.slice(1)}`)
    t.equal(w.run(`cat d/${max}/l`), 'f\n', 'names of exactly 255 bytes work')
    // Below a deep directory the path grows past PATH_MAX: legal, reached by cd (as on ext4).
    const Y = 'y'.repeat(250)
    w.run(`for i in $(seq 20); do mkdir ${Y} && cd ${Y}; done && echo deep > file`)
    const shallow = { skip: (rel: string) => rel.startsWith(Y) }
    const inMount = manifest(w.ws, shallow)
    w.ok('unmount', w.ws)
    t.same(manifest(w.ws, shallow), inMount, 'applied to the real directory byte-exact')
    t.equal(w.run(`for i in $(seq 20); do cd ${Y}; done && cat file`), 'deep\n', 'the file 5,000 bytes deep too')
  })
}
