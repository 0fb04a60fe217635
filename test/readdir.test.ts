// Directory listings without OPENDIR (FUSE_NO_OPENDIR_SUPPORT, src/fuse/dirs.ts): READDIR
// carries no per-open state, and offsets are hash cookies (src/fuse/cookies.ts). Driven with
// real readers: a Node reader that another process changes the directory under between reads
// (every name neither added nor removed comes exactly once), perl's telldir/seekdir/rewinddir,
// and ls, find, git and tar against the same tree on the real disk. With caching off
// (CPFS_CACHE_TIMEOUT=0) every open is still asked for, with its own listing.
import t from 'tap'
import * as fs from 'node:fs'
import { dirname, join } from 'node:path'
import { fuseAvailable, workspace } from './helpers.js'

// Reads dir one entry at a time; every 40 names another process removes 10 names and makes 10
// (old ones: f0..f2999 on the real disk, m0..m999 made in the mount). Prints what came and
// what was touched, as JSON.
const READER = `
const fs = require('node:fs'), { spawnSync } = require('node:child_process')
const dir = process.argv[2]
let seed = 7
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n }
const seen = {}, touched = new Set()
const d = fs.opendirSync(dir, { bufferSize: 1 })
let n = 0, made = 0
for (let e; (e = d.readSync()) !== null;) {
  seen[e.name] = (seen[e.name] || 0) + 1
  if (++n % 40 !== 0) continue
  const rm = [], mk = []
  for (let k = 0; k < 10; k++) {
    const v = rand(2) ? 'f' + rand(3000) : 'm' + rand(1000)
    if (!touched.has(v)) { touched.add(v); rm.push(v) }
    const nn = 'new-' + made++
    touched.add(nn); mk.push(nn)
  }
  const r = spawnSync('bash', ['-c', 'cd "$0" && rm -f -- "$@"', dir, ...rm])
  const r2 = spawnSync('bash', ['-c', 'cd "$0" && touch -- "$@"', dir, ...mk])
  if (r.status || r2.status) throw new Error('change failed')
}
d.closeSync()
console.log(JSON.stringify({ seen, touched: [...touched] }))
`

// telldir before each readdir, then seekdir to each position must give the same name again;
// rewinddir after a name is made must list it. Prints "ok" lines or dies.
const PERL = `
use strict; use warnings;
my $dir = shift;
opendir(my $d, $dir) or die "opendir: $!";
my @at;
while (1) { my $p = telldir($d); my $e = readdir($d); last unless defined $e; push @at, [$p, $e]; }
die "negative offset" if grep { $_->[0] < 0 } @at;
my $max = 0; for (@at) { $max = $_->[0] if $_->[0] > $max }
print "names ", scalar(@at), " max-offset-above-2^32 ", ($max > 4294967296 ? 1 : 0), "\\n";
my $bad = 0;
for my $i (0, 1, 2, 3, int(@at / 3), int(@at / 2), $#at, map { int(rand(@at)) } 1 .. 200) {
  seekdir($d, $at[$i][0]); my $e = readdir($d);
  $bad++ unless defined $e && $e eq $at[$i][1];
  if ($i < $#at) { my $e2 = readdir($d); $bad++ unless defined $e2 && $e2 eq $at[$i + 1][1]; }
}
print "seekdir-mismatches $bad\\n";
system("touch", "$dir/after-rewind") == 0 or die;
rewinddir($d);
my %again = map { $_ => 1 } readdir($d);
print "rewinddir-sees-new ", ($again{"after-rewind"} ? 1 : 0), " count ", scalar(keys %again), "\\n";
`

function counts (w: ReturnType<typeof workspace>): Record<string, number> {
  return JSON.parse(w.ok('status', w.ws, '--json', '--stats')).ops.counts
}

if (fuseAvailable(t)) {
  for (const cache of ['on', 'off']) {
    t.test(`caching ${cache}: a big directory read while another process removes and makes names: every untouched name exactly once`, async t => {
      const w = workspace(t, 'mkdir big && cd big && for i in $(seq 0 2999); do echo -n > f$i; done', { env: cache === 'off' ? { CPFS_CACHE_TIMEOUT: '0' } : {} })
      const script = join(dirname(w.ws), 'reader.cjs')
      fs.writeFileSync(script, READER)
      w.ok('mount', w.ws)
      w.run('cd big && for i in $(seq 0 999); do echo -n > m$i; done && rm f1 f2 f3')
      const before = w.run('ls -A big').split('\n').filter(Boolean)
      t.equal(before.length, 3997, 'real names and names made in the mount')
      const out = JSON.parse(w.run(`node ${script} ${join(w.ws, 'big')}`)) as { seen: Record<string, number>, touched: string[] }
      const touched = new Set(out.touched)
      const untouched = before.filter(n => !touched.has(n))
      t.ok(untouched.length > 1000 && touched.size > 500, `${untouched.length} names untouched, ${touched.size} removed or made during the listing`)
      t.same(untouched.filter(n => out.seen[n] === undefined), [], 'none missing')
      t.same(untouched.filter(n => out.seen[n] > 1), [], 'none twice')
      t.same(Object.keys(out.seen).filter(n => out.seen[n] > 1), [], 'no name at all twice')
      t.same(Object.keys(out.seen).filter(n => !before.includes(n) && !touched.has(n)), [], 'nothing that never existed')
      const after = w.run('ls -A big').split('\n').filter(Boolean).sort()
      const expected = [...new Set([...before.filter(n => !touched.has(n)), ...out.touched.filter(n => n.startsWith('new-'))])].sort()
      t.same(after, expected, 'a listing afterwards is the directory')
      w.ok('unmount', w.ws)
    })
  }

  t.test('telldir/seekdir round trip on positive 63-bit offsets, rewinddir sees new names, and no OPENDIR is asked for', async t => {
    const w = workspace(t, 'mkdir d && cd d && for i in $(seq 1 2500); do echo -n > "file-with-a-longer-name-$i"; done')
    const script = join(dirname(w.ws), 'seek.pl')
    fs.writeFileSync(script, PERL)
    w.ok('mount', w.ws)
    for (const pass of ['cold', 'cached']) {
      const out = w.run(`perl ${script} d`)
      t.match(out, /^names 2502 max-offset-above-2\^32 1$/m, `${pass}: '.', '..' and every name, at hash offsets`)
      t.match(out, /^seekdir-mismatches 0$/m, `${pass}: seekdir to a telldir offset gives that name and the next`)
      t.match(out, /^rewinddir-sees-new 1 count 2503$/m, `${pass}: rewinddir lists a name made meanwhile`)
      w.run('rm d/after-rewind')
    }
    w.run('ls -R >/dev/null && find . >/dev/null')
    w.ok('status', w.ws, '--reset-stats')
    w.run('ls -R >/dev/null && find . >/dev/null && ls -la d >/dev/null')
    const c = counts(w)
    t.notOk(c.opendir || c.releasedir || c.readdir || c.readdirplus, `warm listings send no OPENDIR, RELEASEDIR or READDIR (${JSON.stringify(c)})`)
    w.ok('unmount', w.ws)
  })

  t.test('caching off: every listing opens its directory (OPENDIR), as before', async t => {
    const w = workspace(t, 'mkdir -p a/b && touch a/x a/b/y', { env: { CPFS_CACHE_TIMEOUT: '0' } })
    w.ok('mount', w.ws)
    w.ok('status', w.ws, '--reset-stats')
    t.equal(w.run('ls -A a; ls -A a'), 'b\nx\nb\nx\n')
    const c = counts(w)
    t.equal(c.opendir, 2, 'one OPENDIR per listing')
    t.equal(c.releasedir, 2, 'and its RELEASEDIR')
    w.ok('unmount', w.ws)
  })

  t.test('ls, find, git status and tar see the tree the real disk has; READDIRPLUS lookups survive the kernel forgetting', async t => {
    const setup = 'mkdir -p src/a/b src/c docs && for d in src src/a src/a/b src/c docs; do for i in $(seq 1 150); do echo "$d $i" > $d/f$i.txt; done; done && ' +
      'ln -s f1.txt src/link && git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm tree && echo changed >> src/a/f3.txt && touch docs/new'
    const w = workspace(t, setup)
    const look = (): Record<string, string> => ({
      ls: w.run('ls -lAR src docs | grep -v "^total" | awk \'{print $1, $NF}\''),
      find: w.run('find . -path ./.git -prune -o -print | sort'),
      status: w.run('git status --porcelain'),
      tar: w.run('tar --exclude=.git -cf - . | tar -tvf - | sort')
    })
    const real = look()
    w.ok('mount', w.ws)
    t.same(look(), real, 'cold: the same as on the real disk')
    t.same(look(), real, 'warm: the same again')
    w.run('sync && echo 2 > /proc/sys/vm/drop_caches') // the kernel forgets dentries: FORGET for each lookup
    t.same(look(), real, 'after the kernel forgot its entries: the same (lookup counts were right)')
    w.run('cat $(find src -type f) >/dev/null')
    w.ok('unmount', w.ws)
  })
}
