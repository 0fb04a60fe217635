// Mount options a user can see: other users are kept out unless --allow-other (and then the
// kernel checks permissions: default_permissions); statfs and access work like on disk.
import t from 'tap'
import * as fs from 'node:fs'
import { fuseAvailable, workspace } from './helpers.js'

const TREE = 'echo public > public.txt && echo secret > secret.txt && chmod 600 secret.txt && chmod 755 .'

if (fuseAvailable(t)) {
  t.test('other users are kept out without --allow-other', async t => {
    const w = workspace(t, TREE)
    w.run(`chmod 755 ${w.ws}/.. `)
    w.ok('mount', w.ws)
    const r = w.sh(`setpriv --reuid=65534 --regid=65534 --clear-groups cat ${w.ws}/public.txt`, '/')
    t.not(r.code, 0, 'nobody cannot read through the mount')
    t.match(r.stderr, /Permission denied/)
    t.equal(w.run('cat public.txt'), 'public\n', 'the mounting user can')
  })

  t.test('--allow-other lets other users in, with the kernel checking modes', async t => {
    const w = workspace(t, TREE)
    w.run(`chmod 755 ${w.ws}/..`)
    w.ok('mount', w.ws, '--allow-other')
    t.equal(w.run(`setpriv --reuid=65534 --regid=65534 --clear-groups cat ${w.ws}/public.txt`, '/'), 'public\n', 'nobody reads a world-readable file')
    const r = w.sh(`setpriv --reuid=65534 --regid=65534 --clear-groups cat ${w.ws}/secret.txt`, '/')
    t.not(r.code, 0, 'but not a 600 file of root')
    t.match(r.stderr, /Permission denied/)
    const wr = w.sh(`setpriv --reuid=65534 --regid=65534 --clear-groups touch ${w.ws}/new.txt`, '/')
    t.not(wr.code, 0, 'and cannot create files in a 755 directory of root')
  })

  t.test('statfs and access', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    const df = w.run(`df -P ${w.ws} | tail -1`)
    t.match(df, /^cpfs:\/\S+\s+\d+\s+\d+\s+\d+/, 'df reports the mount with sizes, its source naming the workspace\'s cpfs directory')
    t.equal(w.run('test -r public.txt && test -w public.txt && test ! -x public.txt && echo ok'), 'ok\n', 'access(2) answers like on disk')
    t.equal(w.sh('test -e missing').code, 1, 'access of a missing path fails')
  })

  t.test('the mount\'s readahead window is widened (CPFS_READAHEAD_KB, default 4096; 0 keeps the kernel\'s)', async t => {
    const window = (dir: string): string => {
      const dev = w.run(`mountpoint -d ${dir}`).trim()
      return fs.readFileSync(`/sys/class/bdi/${dev}/read_ahead_kb`, 'utf8').trim()
    }
    const w = workspace(t, 'head -c 3000000 /dev/urandom > big.bin')
    w.ok('mount', w.ws)
    t.equal(window(w.ws), '4096', 'the default window')
    const want = w.run(`sha256sum < ${w.ws}/big.bin`, '/')
    w.run('sync && echo 3 > /proc/sys/vm/drop_caches')
    t.equal(w.run('sha256sum < big.bin'), want, 'a cold sequential read through the wide window is byte-exact')
    w.ok('unmount', w.ws)
    const k = workspace(t, '', { env: { CPFS_READAHEAD_KB: '0' } })
    k.ok('mount', k.ws)
    t.equal(window(k.ws), '128', 'CPFS_READAHEAD_KB=0: the kernel\'s own (128 KiB, what it offers at INIT)')
  })
}
