// Mount options a user can see: other users are kept out unless --allow-other (and then the
// kernel checks permissions: default_permissions); statfs and access work like on disk.
import t from 'tap'
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
}
