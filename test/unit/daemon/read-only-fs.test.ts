// The guard behind a view (src/daemon/read-only-fs.ts): every change refused with EROFS before
// it reaches the filesystem behind, every read passed through.
import t from 'tap'
import { ReadOnlyFilesystem } from '../../../src/daemon/read-only-fs.js'
import type { Filesystem } from '../../../src/fuse/contract.js'
import { toErrno } from '../../../src/fuse/errno.js'
import { constants } from 'node:os'

t.test('changes are refused (EROFS at the FUSE edge), reads pass through', async t => {
  const reached: string[] = []
  // A filesystem that records every call that reaches it.
  const inner = new Proxy({}, { get: (_o, name) => (...args: unknown[]) => { reached.push(String(name)); return name === 'readdir' ? ['a'] : name === 'open' ? 7 : undefined } }) as unknown as Filesystem
  const ro = new ReadOnlyFilesystem(inner)
  const caller = { uid: 0, gid: 0 }
  const changes: Array<[string, () => unknown]> = [
    ['setattr', () => ro.setattr('/a', null, { mode: 0o600 })],
    ['mkdir', () => ro.mkdir('/d', 0o755, caller)],
    ['mknod', () => ro.mknod('/p', 0o010000, 0o644, 0, caller)],
    ['symlink', () => ro.symlink('a', '/l', caller)],
    ['unlink', () => ro.unlink('/a')],
    ['rmdir', () => ro.rmdir('/d')],
    ['rename', () => ro.rename('/a', '/b', {})],
    ['link', () => ro.link('/a', '/b')],
    ['create', () => ro.create('/n', 0o644, caller)],
    ['write', () => ro.write(7, Buffer.from('x'), 1, 0, null)],
    ['fallocate', () => ro.fallocate(7, 0, 0, 10)],
    ['setxattr', () => ro.setxattr('/a', 'user.x', Buffer.from('1'), {})],
    ['removexattr', () => ro.removexattr('/a', 'user.x')],
    ['open with O_TRUNC', () => ro.open('/a', 0o1000)]
  ]
  for (const [name, call] of changes) {
    let err: unknown
    try { call() } catch (e) { err = e }
    t.equal(toErrno(err), constants.errno.EROFS, `${name}: EROFS`)
  }
  t.same(reached, [], 'none of them reached the filesystem behind')
  t.same(ro.readdir('/'), ['a'], 'readdir passes through')
  t.equal(ro.open('/a', 2), 7, 'an open for writing passes (the FUSE layer opens read-write handles itself; writes are refused)')
  ro.read(7, Buffer.alloc(1), 1, 0)
  ro.release(7)
  t.same(reached, ['readdir', 'open', 'read', 'release'])
})
