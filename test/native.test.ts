// The cpfs native addon (src/native/cpfs.c), exercised with real system calls on real files
// and real FUSE mounts (as root). Errors are asserted by code, never by message text.
//
// What the kernel does when a FUSE connection ends (measured on Linux 6.18, protocol 7.45):
// - umount2(dir, 0) or umount2(dir, MNT_DETACH) with nothing open in the mount: the connection
//   ends at once. read(2) on /dev/fuse fails with ENODEV (readBatch returns -19) and poll
//   reports POLLERR, which libuv turns into one callback with UV_EBADF (-9), after which it
//   stops the handle. Unanswered requests, even INIT, do not hold the unmount up.
// - While any process still has a file (or only an O_PATH fd, or a cwd) in the mount, a plain
//   unmount fails with EBUSY, and a lazy one (MNT_DETACH, `umount -l`) succeeds and removes the
//   mount from /proc/self/mountinfo but NOT the connection: reads keep returning EAGAIN
//   (readBatch 0), no POLLERR, and requests from the holder keep coming. When the last file
//   closes the connection ends as above; the RELEASEDIR queued by that close is not delivered.
// - umount(8) without -l stats and statfs's the mount point first (GETATTR and STATFS reach the
//   daemon), so the daemon must keep answering while it runs; `umount -l` sends nothing.
// - An abort through /sys/fs/fuse/connections/N/abort also gives ENODEV and POLLERR, except
//   when the daemon's INIT reply set FUSE_ABORT_ERROR: then read(2) fails with ECONNABORTED,
//   which readBatch throws (code 'ECONNABORTED'), like any errno other than ENODEV.
// - Before the fd is mounted, read(2) fails with EPERM; a read offered less than
//   max(8192, 80 + max_write) bytes fails with EINVAL.
import t from 'tap'
import * as fs from 'node:fs'
import * as os from 'node:os'
import { join } from 'node:path'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { createHook, executionAsyncId } from 'node:async_hooks'
import * as N from '../dist/native/index.js'
import { HANG_GUARD_MS } from './helpers.js'

const { native } = N
const DIST = new URL('../dist/native/index.js', import.meta.url).href

const canMount = fs.existsSync('/dev/fuse') && process.getuid?.() === 0
if (!canMount) {
  const why = 'these tests need root and /dev/fuse'
  if (process.env.CI) t.fail(`native addon tests cannot run: ${why}`)
  else process.stderr.write(`\n!!! SKIPPING NATIVE ADDON TESTS: ${why}\n\n`)
}

function tmp (t: any): string {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'cpfs-native-'))
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }))
  return d
}

function openFds (): number {
  return fs.readdirSync('/proc/self/fd').length
}

/** The octal flags of an fd, from /proc/self/fdinfo. */
function fdFlags (fd: number): number {
  const m = /flags:\s+([0-7]+)/.exec(fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))
  return parseInt(m![1], 8)
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

if (canMount) {
  t.test('constants are the C headers\' values', async t => {
    const c = native.constants as unknown as Record<string, number>
    const exported = N as unknown as Record<string, number>
    for (const [k, v] of Object.entries(c)) t.equal(exported[k], v, k)
    t.match(c, {
      SEEK_DATA: 3, SEEK_HOLE: 4, RENAME_NOREPLACE: 1, RENAME_EXCHANGE: 2, AT_SYMLINK_NOFOLLOW: 0x100,
      AT_FDCWD: -100, MNT_DETACH: 2, MNT_FORCE: 1, XATTR_CREATE: 1, XATTR_REPLACE: 2, MS_NOSUID: 2, MS_NODEV: 4
    })
  })

  t.test('error convention', async t => {
    t.throws(() => native.openDirBeneath(N.AT_FDCWD, 'no-such-dir/x'),
      { code: 'ENOENT', errno: -2, syscall: 'openat', path: 'no-such-dir', message: 'ENOENT: openat failed: no-such-dir' })
    t.throws(() => native.syncfs(1 << 30), { code: 'EBADF', errno: -9, syscall: 'syncfs', message: 'EBADF: syncfs failed' })
    const call = native as unknown as Record<string, (...a: unknown[]) => unknown>
    t.throws(() => call.lseek('0', 0, 0), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' })
    t.throws(() => call.lseek(0, 1.5, 0), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    t.throws(() => call.lseek(0, 2 ** 53, 0), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    t.throws(() => call.lseek(-1, 0, 0), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    t.throws(() => call.lseek(0, NaN, 0), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    t.throws(() => call.lseek(0), { name: 'TypeError', code: 'ERR_MISSING_ARGS' })
    t.throws(() => call.lgetxattr('/tmp\0/x', 'user.a'), { name: 'TypeError' })
    t.throws(() => call.lsetxattr('/tmp', 'user.a', 'not a buffer', 0), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' })
    t.throws(() => call.mknodat(-5, 'x', 0, 0), { name: 'RangeError' }, 'a negative dirFd other than AT_FDCWD')
    t.throws(() => call.setNonBlocking(0, 1), { name: 'TypeError' })
    t.throws(() => call.pollStart(0, 'not a function'), { name: 'TypeError' })
  })

  t.test('setNonBlocking', async t => {
    const d = tmp(t)
    const fd = fs.openSync(join(d, 'f'), 'w')
    t.teardown(() => fs.closeSync(fd))
    t.equal(fdFlags(fd) & N.O_NONBLOCK, 0)
    native.setNonBlocking(fd, true)
    t.equal(fdFlags(fd) & N.O_NONBLOCK, N.O_NONBLOCK)
    native.setNonBlocking(fd, false)
    t.equal(fdFlags(fd) & N.O_NONBLOCK, 0)
    t.throws(() => native.setNonBlocking(1 << 30, true), { code: 'EBADF', syscall: 'fcntl' })
  })

  t.test('openDirBeneath walks without following symlinks', async t => {
    const d = tmp(t)
    fs.mkdirSync(join(d, 'a/b/c'), { recursive: true })
    fs.writeFileSync(join(d, 'a/f'), 'x')
    fs.symlinkSync('b', join(d, 'a/link'))
    fs.symlinkSync('/', join(d, 'a/root'))
    const root = fs.openSync(d, 'r')
    t.teardown(() => fs.closeSync(root))
    const before = openFds()

    const fd = native.openDirBeneath(root, 'a/b/c')
    t.equal(fs.fstatSync(fd).ino, fs.statSync(join(d, 'a/b/c')).ino, 'the right directory')
    t.equal(fdFlags(fd) & N.O_PATH, N.O_PATH, 'an O_PATH fd')
    t.equal(fdFlags(fd) & N.O_CLOEXEC, N.O_CLOEXEC, 'close-on-exec')
    t.equal(fs.readdirSync(`/proc/self/fd/${fd}`).length, 0, 'usable through /proc/self/fd')
    const inner = native.openDirBeneath(fd, '')
    t.not(inner, fd, "'' is a new fd")
    t.equal(fs.fstatSync(inner).ino, fs.fstatSync(fd).ino, "'' is rootFd itself (an O_PATH root works)")
    const dot = native.openDirBeneath(root, '.')
    t.equal(fs.fstatSync(dot).ino, fs.statSync(d).ino, "'.' is rootFd itself")
    const dotted = native.openDirBeneath(root, 'a/./b')
    t.equal(fs.fstatSync(dotted).ino, fs.statSync(join(d, 'a/b')).ino, "'.' components are harmless")
    for (const x of [fd, inner, dot, dotted]) fs.closeSync(x)

    const fails: Array<[string, string, string]> = [
      ['a/link', 'ENOTDIR', 'a/link'], ['a/link/c', 'ENOTDIR', 'a/link'], ['a/root', 'ENOTDIR', 'a/root'],
      ['a/f', 'ENOTDIR', 'a/f'], ['a/f/x', 'ENOTDIR', 'a/f'], ['a/missing/x', 'ENOENT', 'a/missing'],
      ['..', 'EINVAL', '..'], ['a/../a', 'EINVAL', 'a/..'], ['a//b', 'EINVAL', 'a/'], ['/a', 'EINVAL', '.'],
      ['a/', 'EINVAL', 'a/']
    ]
    for (const [rel, code, path] of fails) {
      t.throws(() => native.openDirBeneath(root, rel), { code, syscall: 'openat', path }, `${rel}: ${code}`)
    }
    t.equal(openFds(), before, 'no fd left open by successes or failures')

    const cwd = native.openDirBeneath(N.AT_FDCWD, '.')
    t.equal(fs.fstatSync(cwd).ino, fs.statSync('.').ino, 'AT_FDCWD')
    fs.closeSync(cwd)
  })

  t.test('openDirBeneath has no PATH_MAX', async t => {
    const d = tmp(t)
    const name = 'd'.repeat(200)
    let cur = fs.openSync(d, 'r')
    for (let i = 0; i < 30; i++) { // 30 * 201 bytes: longer than PATH_MAX (4096)
      fs.mkdirSync(`/proc/self/fd/${cur}/${name}`)
      const next = native.openDirBeneath(cur, name)
      fs.closeSync(cur)
      cur = next
    }
    const deepIno = fs.fstatSync(cur).ino
    fs.closeSync(cur)
    const rel = Array(30).fill(name).join('/')
    t.throws(() => fs.statSync(join(d, rel)), { code: 'ENAMETOOLONG' }, 'a plain path is too long')
    const root = fs.openSync(d, 'r')
    const fd = native.openDirBeneath(root, rel)
    t.equal(fs.fstatSync(fd).ino, deepIno)
    fs.closeSync(fd)
    fs.closeSync(root)
    // Node's rmSync cannot remove it either; rm(1) walks with *at calls as we do.
    t.equal(spawnSync('rm', ['-rf', join(d, name)]).status, 0)
  })

  t.test('xattrs by path (l*) and by fd (f*)', async t => {
    const d = tmp(t)
    const f = join(d, 'f')
    const link = join(d, 'link')
    fs.writeFileSync(f, 'x')
    fs.symlinkSync('f', link)

    t.same(native.llistxattr(f), [], 'no attributes yet')
    t.equal(native.lgetxattr(f, 'user.a'), null, 'missing: null')
    native.lsetxattr(f, 'user.a', Buffer.from('hello'), 0)
    t.same(native.lgetxattr(f, 'user.a'), Buffer.from('hello'))
    native.lsetxattr(f, 'user.empty', Buffer.alloc(0), 0)
    const empty = native.lgetxattr(f, 'user.empty')
    t.ok(Buffer.isBuffer(empty) && empty.length === 0, 'an empty value is an empty Buffer, not null')
    const big = Buffer.alloc(3000, 7)
    native.lsetxattr(f, 'user.big', big, N.XATTR_CREATE)
    t.same(native.lgetxattr(f, 'user.big'), big)
    t.same(native.llistxattr(f).sort(), ['user.a', 'user.big', 'user.empty'])
    t.throws(() => native.lsetxattr(f, 'user.a', Buffer.from('x'), N.XATTR_CREATE), { code: 'EEXIST', syscall: 'lsetxattr', path: f })
    t.throws(() => native.lsetxattr(f, 'user.nope', Buffer.from('x'), N.XATTR_REPLACE), { code: 'ENODATA' })
    native.lsetxattr(f, 'user.a', Buffer.from('bye'), N.XATTR_REPLACE)
    t.same(native.lgetxattr(f, 'user.a'), Buffer.from('bye'))
    native.lremovexattr(f, 'user.empty')
    t.equal(native.lgetxattr(f, 'user.empty'), null)
    t.throws(() => native.lremovexattr(f, 'user.empty'), { code: 'ENODATA', syscall: 'lremovexattr' })
    t.throws(() => native.lsetxattr(f, 'bogus.ns', Buffer.from('x'), 0), { code: 'EOPNOTSUPP' })
    t.throws(() => native.lgetxattr(join(d, 'missing'), 'user.a'), { code: 'ENOENT', syscall: 'lgetxattr' })
    t.throws(() => native.llistxattr(join(d, 'missing')), { code: 'ENOENT', syscall: 'llistxattr' })

    // l* never follows the final symlink: the link's own attributes, not f's.
    t.equal(native.lgetxattr(link, 'user.a'), null, 'user.a of the link itself does not exist')
    t.throws(() => native.lsetxattr(link, 'user.a', Buffer.from('x'), 0), { code: 'EPERM' }, 'no user.* on symlinks')
    native.lsetxattr(link, 'trusted.cpfs', Buffer.from('on the link'), 0)
    t.same(native.lgetxattr(link, 'trusted.cpfs'), Buffer.from('on the link'))
    t.equal(native.lgetxattr(f, 'trusted.cpfs'), null, 'f is untouched')
    t.ok(native.llistxattr(link).includes('trusted.cpfs'))

    // Through an O_PATH directory fd and /proc/self/fd, as cpfs does.
    const root = fs.openSync('/', 'r')
    const pathFd = native.openDirBeneath(root, d.slice(1))
    fs.closeSync(root)
    t.same(native.lgetxattr(`/proc/self/fd/${pathFd}/f`, 'user.a'), Buffer.from('bye'), 'via /proc/self/fd/N/name')
    t.throws(() => native.fgetxattr(pathFd, 'user.a'), { code: 'EBADF', syscall: 'fgetxattr' }, 'O_PATH fds have no f*xattr')
    fs.closeSync(pathFd)

    const fd = fs.openSync(f, 'r+')
    t.teardown(() => fs.closeSync(fd))
    t.same(native.fgetxattr(fd, 'user.a'), Buffer.from('bye'))
    native.fsetxattr(fd, 'user.b', Buffer.from('fd'), N.XATTR_CREATE)
    t.same(native.flistxattr(fd).sort(), ['user.a', 'user.b', 'user.big'])
    native.fremovexattr(fd, 'user.b')
    t.equal(native.fgetxattr(fd, 'user.b'), null)
    t.throws(() => native.fremovexattr(fd, 'user.b'), { code: 'ENODATA', syscall: 'fremovexattr' })
    t.throws(() => native.fsetxattr(fd, 'user.a', Buffer.from('x'), N.XATTR_CREATE), { code: 'EEXIST', syscall: 'fsetxattr' })
  })

  t.test('mknodat', async t => {
    const nul = fs.statSync('/dev/null').rdev
    const d = tmp(t)
    const dirFd = fs.openSync(d, 'r')
    t.teardown(() => fs.closeSync(dirFd))
    native.mknodat(dirFd, 'fifo', N.S_IFIFO | 0o640, 0)
    const st = fs.lstatSync(join(d, 'fifo'))
    t.ok(st.isFIFO())
    t.equal(st.mode & 0o777, 0o640 & ~process.umask())
    native.mknodat(N.AT_FDCWD, join(d, 'null2'), N.S_IFCHR | 0o600, nul)
    const cst = fs.lstatSync(join(d, 'null2'))
    t.ok(cst.isCharacterDevice())
    t.equal(cst.rdev, nul, 'the device number of /dev/null')
    const pathFd = native.openDirBeneath(dirFd, '')
    native.mknodat(pathFd, 'reg', N.S_IFREG | 0o644, 0)
    fs.closeSync(pathFd)
    t.ok(fs.lstatSync(join(d, 'reg')).isFile(), 'an O_PATH dirFd works')
    t.throws(() => native.mknodat(dirFd, 'fifo', N.S_IFIFO | 0o600, 0), { code: 'EEXIST', syscall: 'mknodat', path: 'fifo' })
    t.throws(() => native.mknodat(dirFd, 'no/fifo', N.S_IFIFO | 0o600, 0), { code: 'ENOENT' })
  })

  t.test('utimensat and futimens: nanoseconds, negative seconds, NOW and OMIT', async t => {
    const d = tmp(t)
    const f = join(d, 'f')
    const link = join(d, 'link')
    fs.writeFileSync(f, 'x')
    fs.symlinkSync('f', link)
    const ns = (p: string) => { const s = fs.lstatSync(p, { bigint: true }); return [s.atimeNs, s.mtimeNs] }

    native.utimensat(N.AT_FDCWD, f, 1000, 123456789, -86400 * 365, 987654321, 0)
    t.same(ns(f), [1000_123456789n, -31536000n * 1000000000n + 987654321n])
    native.utimensat(N.AT_FDCWD, f, 5, N.UTIME_OMIT, 2000, 1, 0)
    t.same(ns(f), [1000_123456789n, 2000_000000001n], 'UTIME_OMIT keeps atime')
    const before = BigInt(Date.now() - 5000) * 1000000n
    native.utimensat(N.AT_FDCWD, f, 0, N.UTIME_OMIT, 0, N.UTIME_NOW, 0)
    t.ok(ns(f)[1] > before, 'UTIME_NOW sets the current time')

    const targetBefore = ns(f)
    native.utimensat(N.AT_FDCWD, link, 42, 0, 43, 0, N.AT_SYMLINK_NOFOLLOW)
    t.same(ns(link), [42_000000000n, 43_000000000n], 'the link itself')
    t.same(ns(f), targetBefore, 'not its target')

    const dirFd = fs.openSync(d, 'r')
    native.utimensat(dirFd, 'f', 7, 7, 8, 8, 0)
    fs.closeSync(dirFd)
    t.same(ns(f), [7_000000007n, 8_000000008n], 'relative to a dirFd')
    const fd = fs.openSync(f, 'r+')
    native.futimens(fd, 11, 12, -13, 14)
    fs.closeSync(fd)
    t.same(ns(f), [11_000000012n, -13_000000000n + 14n])

    t.throws(() => native.utimensat(N.AT_FDCWD, f, 0, 1e9, 0, 0, 0), { name: 'RangeError' })
    t.throws(() => native.utimensat(N.AT_FDCWD, f, 0.5, 0, 0, 0, 0), { name: 'RangeError' })
    t.throws(() => native.utimensat(N.AT_FDCWD, join(d, 'missing'), 0, 0, 0, 0, 0), { code: 'ENOENT', syscall: 'utimensat' })
    t.throws(() => native.futimens(1 << 30, 0, 0, 0, 0), { code: 'EBADF', syscall: 'futimens' })
  })

  t.test('lseek: SEEK_DATA, SEEK_HOLE, large offsets, ENXIO as -1', async t => {
    const d = tmp(t)
    const fd = fs.openSync(join(d, 'sparse'), 'w+')
    t.teardown(() => fs.closeSync(fd))
    fs.writeSync(fd, 'x', 1 << 20)
    t.equal(native.lseek(fd, 0, N.SEEK_DATA), 1 << 20, 'data starts after the hole')
    t.equal(native.lseek(fd, 0, N.SEEK_HOLE), 0)
    t.equal(native.lseek(fd, 1 << 20, N.SEEK_HOLE), (1 << 20) + 1, 'the implicit hole at EOF')
    t.equal(native.lseek(fd, (1 << 20) + 1, N.SEEK_DATA), -1, 'no data past EOF: -1 (ENXIO)')
    t.equal(native.lseek(fd, 2 ** 40, N.SEEK_SET), 2 ** 40)
    t.equal(native.lseek(fd, -(2 ** 40 - 5), N.SEEK_CUR), 5)
    t.equal(native.lseek(fd, 0, N.SEEK_END), (1 << 20) + 1)
    t.throws(() => native.lseek(fd, -10, N.SEEK_SET), { code: 'EINVAL', syscall: 'lseek' })
    t.throws(() => native.lseek(fd, 0, 99), { code: 'EINVAL' })
    t.throws(() => native.lseek(1 << 30, 0, N.SEEK_SET), { code: 'EBADF' })
  })

  t.test('fallocate', async t => {
    const d = tmp(t)
    const fd = fs.openSync(join(d, 'f'), 'w+')
    t.teardown(() => fs.closeSync(fd))
    native.fallocate(fd, 0, 0, 65536)
    t.equal(fs.fstatSync(fd).size, 65536)
    native.fallocate(fd, N.FALLOC_FL_KEEP_SIZE, 65536, 65536)
    t.equal(fs.fstatSync(fd).size, 65536, 'KEEP_SIZE')
    fs.writeSync(fd, Buffer.alloc(65536, 0x61), 0, 65536, 0)
    native.fallocate(fd, N.FALLOC_FL_PUNCH_HOLE | N.FALLOC_FL_KEEP_SIZE, 4096, 4096)
    t.equal(native.lseek(fd, 0, N.SEEK_HOLE), 4096, 'the punched hole')
    const b = Buffer.alloc(4096)
    fs.readSync(fd, b, 0, 4096, 4096)
    t.ok(b.every(x => x === 0), 'reads as zeros')
    t.throws(() => native.fallocate(fd, N.FALLOC_FL_PUNCH_HOLE, 0, 4096), { code: 'EOPNOTSUPP', syscall: 'fallocate' }, 'PUNCH_HOLE needs KEEP_SIZE')
    t.throws(() => native.fallocate(fd, 0, 0, 0), { code: 'EINVAL' })
    t.throws(() => native.fallocate(1 << 30, 0, 0, 1), { code: 'EBADF' })
  })

  t.test('syncfs', async t => {
    const d = tmp(t)
    const fd = fs.openSync(join(d, 'f'), 'w')
    fs.writeSync(fd, 'data')
    native.syncfs(fd)
    fs.closeSync(fd)
    const pathFd = native.openDirBeneath(N.AT_FDCWD, '.')
    t.throws(() => native.syncfs(pathFd), { code: 'EBADF', syscall: 'syncfs' }, 'not on an O_PATH fd')
    fs.closeSync(pathFd)
  })

  t.test('pollStart runs its callback in a callback scope', async t => {
    const d = tmp(t)
    native.mknodat(N.AT_FDCWD, join(d, 'fifo'), N.S_IFIFO | 0o600, 0)
    const fd = fs.openSync(join(d, 'fifo'), fs.constants.O_RDWR | fs.constants.O_NONBLOCK)
    t.teardown(() => fs.closeSync(fd))
    const order: string[] = []
    let asyncId = 0
    let status = -1
    const types = new Map<number, string>()
    const hook = createHook({ init (id, type) { types.set(id, type) } }).enable()
    t.teardown(() => { hook.disable() })
    const h = native.pollStart(fd, (s) => {
      status = s
      asyncId = executionAsyncId()
      fs.readSync(fd, Buffer.alloc(1))
      native.pollStop(h)
      order.push('callback')
      setImmediate(() => order.push('immediate'))
      Promise.resolve().then(() => order.push('promise'))
      process.nextTick(() => order.push('nextTick'))
    })
    await sleep(20)
    t.same(order, [], 'nothing to read yet')
    fs.writeSync(fd, 'x')
    await until('poll callback and the immediate it queued', () => order.includes('immediate'))
    t.equal(status, 0)
    t.same(order, ['callback', 'nextTick', 'promise', 'immediate'], 'ticks and microtasks run right after the callback')
    t.equal(types.get(asyncId), 'cpfs:fusePoll', 'inside the poll handle\'s own async context')
    native.pollStop(h)
    t.pass('pollStop twice is harmless')
    t.throws(() => native.pollStop({}), { name: 'TypeError' })
    t.throws(() => native.pollStart(1 << 30, () => {}), { code: 'EBADF', syscall: 'uv_poll_init' })
  })

  t.test('an exception in the poll callback reaches uncaughtException', async t => {
    const d = tmp(t)
    const script = (handled: boolean) => `
      import * as fs from 'node:fs'
      import { native, S_IFIFO, AT_FDCWD } from ${JSON.stringify(DIST)}
      native.mknodat(AT_FDCWD, ${JSON.stringify(join(d, handled ? 'f1' : 'f2'))}, S_IFIFO | 0o600, 0)
      const fd = fs.openSync(${JSON.stringify(join(d, handled ? 'f1' : 'f2'))}, fs.constants.O_RDWR | fs.constants.O_NONBLOCK)
      fs.writeSync(fd, 'x')
      const h = native.pollStart(fd, () => { throw new Error('boom') })
      ${handled ? "process.on('uncaughtException', e => { console.log('caught ' + e.message); native.pollStop(h) })" : ''}
    `
    const caught = spawnSync(process.execPath, ['--input-type=module', '-e', script(true)], { encoding: 'utf8', timeout: 20000 })
    t.equal(caught.stdout.trim(), 'caught boom', 'the handler got it')
    t.equal(caught.status, 0, 'and the process went on')
    const died = spawnSync(process.execPath, ['--input-type=module', '-e', script(false)], { encoding: 'utf8', timeout: 20000 })
    t.equal(died.status, 1, 'unhandled: the process exits 1, as for any uncaught exception')
    t.match(died.stderr, /Error: boom/)
  })

  t.test('a worker that exits with a poll still open tears down cleanly', async t => {
    const d = tmp(t)
    native.mknodat(N.AT_FDCWD, join(d, 'fifo'), N.S_IFIFO | 0o600, 0)
    const script = `
      import { Worker } from 'node:worker_threads'
      // The worker inherits --input-type=module: its code is ESM too.
      const w = new Worker(\`
        import * as fs from 'node:fs'
        import { parentPort } from 'node:worker_threads'
        import { native } from ${JSON.stringify(DIST)}
        const fd = fs.openSync(${JSON.stringify(join(d, 'fifo'))}, fs.constants.O_RDWR | fs.constants.O_NONBLOCK)
        native.pollStart(fd, () => {})
        parentPort.postMessage('polling')\`, { eval: true })
      w.once('message', async () => { console.log('exit', await w.terminate()) })
    `
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20000 })
    t.equal(r.stdout.trim(), 'exit 1', 'terminated')
    t.equal(r.status, 0, `no abort at loop close (${r.stderr.slice(0, 300)})`)
  })

  // --- FUSE device --------------------------------------------------------------------------

  const OP_LOOKUP = 1
  const OP_INIT = 26
  const OP_OPENDIR = 27
  const FUSE_INIT_EXT = 1 << 30
  const FUSE_PARALLEL_DIROPS = 1 << 18
  const MAX_WRITE = 131072
  // The kernel refuses reads smaller than max(8192, in_header + write_in + max_write).
  const MIN_READ = 40 + 40 + MAX_WRITE

  interface Header { len: number, opcode: number, unique: bigint, nodeid: bigint, uid: number, gid: number, pid: number }
  function header (buf: Buffer, off: number): Header {
    return {
      len: buf.readUInt32LE(off),
      opcode: buf.readUInt32LE(off + 4),
      unique: buf.readBigUInt64LE(off + 8),
      nodeid: buf.readBigUInt64LE(off + 16),
      uid: buf.readUInt32LE(off + 24),
      gid: buf.readUInt32LE(off + 28),
      pid: buf.readUInt32LE(off + 32)
    }
  }

  /** Offsets of the n requests readBatch put in buf. */
  function offsets (buf: Buffer, n: number): number[] {
    const out: number[] = []
    for (let i = 0, off = 0; i < n; i++, off = (off + buf.readUInt32LE(off) + 7) & ~7) out.push(off)
    return out
  }

  function reply (fd: number, unique: bigint, error: number, body: Buffer = Buffer.alloc(0)): void {
    const h = Buffer.alloc(16)
    h.writeUInt32LE(16 + body.length, 0)
    h.writeInt32LE(error, 4)
    h.writeBigUInt64LE(unique, 8)
    fs.writeSync(fd, Buffer.concat([h, body]))
  }

  /** The smallest INIT reply that lets the tests go further (struct fuse_init_out). */
  function replyInit (fd: number, unique: bigint, minor: number, flags: number, flags2: number): void {
    const o = Buffer.alloc(64)
    o.writeUInt32LE(7, 0)
    o.writeUInt32LE(Math.min(minor, 45), 4)
    o.writeUInt32LE(131072, 8) // max_readahead
    o.writeUInt32LE(flags | FUSE_INIT_EXT, 12)
    o.writeUInt16LE(16, 16) // max_background
    o.writeUInt16LE(12, 18) // congestion_threshold
    o.writeUInt32LE(MAX_WRITE, 20)
    o.writeUInt32LE(1, 24) // time_gran
    o.writeUInt16LE(MAX_WRITE / 4096, 28) // max_pages
    o.writeUInt32LE(flags2, 32)
    o.writeUInt32LE(1, 36) // max_stack_depth (passthrough needs >= 1)
    reply(fd, unique, 0, o)
  }

  function mountLine (dir: string): string | undefined {
    return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find(l => l.split(' ')[4] === dir)
  }

  /** A fresh mount of /dev/fuse on a temp dir; torn down (lazily unmounted, closed) after the test. */
  function mount (t: any): { fd: number, dir: string, buf: Buffer } {
    const dir = tmp(t)
    const fd = fs.openSync('/dev/fuse', 'r+')
    native.setNonBlocking(fd, true)
    t.teardown(() => {
      if (mountLine(dir)) native.umount2(dir, N.MNT_DETACH)
      fs.closeSync(fd)
    })
    native.fuseMount(fd, dir, 'cpfs', 'fuse.cpfs', N.MS_NOSUID | N.MS_NODEV, `fd=${fd},rootmode=40000,user_id=0,group_id=0`)
    return { fd, dir, buf: Buffer.alloc(4 * MIN_READ) }
  }

  /** Waits for a state, however long it takes; only a hang (HANG_GUARD_MS) fails, loudly. */
  async function until (what: string, ok: () => boolean): Promise<void> {
    for (const end = Date.now() + HANG_GUARD_MS; !ok();) {
      if (Date.now() > end) throw new Error(`hung: no ${what} after ${HANG_GUARD_MS / 1000} s`)
      await sleep(5)
    }
  }

  /** Waits for requests and returns how many readBatch read. */
  async function readSome (fd: number, buf: Buffer): Promise<number> {
    let n = 0
    await until('a request', () => (n = native.readBatch(fd, buf, MIN_READ, 16)) !== 0)
    return n
  }

  t.test('mount, read INIT, lazy unmount: readBatch reports -19', async t => {
    const dir = tmp(t)
    const fd = fs.openSync('/dev/fuse', 'r+')
    t.teardown(() => fs.closeSync(fd))
    native.setNonBlocking(fd, true)
    const buf = Buffer.alloc(MIN_READ)
    t.throws(() => native.readBatch(fd, buf, 8192, 4), { code: 'EPERM', syscall: 'read' }, 'not mounted yet: EPERM')
    t.throws(() => native.fuseMount(fd, dir, 'cpfs', 'fuse.cpfs', 0, 'rootmode=40000,user_id=0,group_id=0'),
      { name: 'TypeError' }, 'data must name the fd')
    t.throws(() => native.fuseMount(fd, join(dir, 'missing'), 'cpfs', 'fuse.cpfs', 0, `fd=${fd},rootmode=40000,user_id=0,group_id=0`),
      { code: 'ENOENT', syscall: 'mount' })

    native.fuseMount(fd, dir, 'cpfs', 'fuse.cpfs', N.MS_NOSUID | N.MS_NODEV, `fd=${fd},rootmode=40000,user_id=0,group_id=0`)
    t.teardown(() => { if (mountLine(dir)) native.umount2(dir, N.MNT_DETACH) })
    const line = mountLine(dir)
    t.ok(line, 'in /proc/self/mountinfo')
    const [, after] = line!.split(' - ')
    t.same(after.split(' ').slice(0, 2), ['fuse.cpfs', 'cpfs'], 'type fuse.cpfs, source cpfs')
    t.match(line!.split(' ')[5], /nosuid/)
    t.match(line!.split(' ')[5], /nodev/)

    t.equal(native.readBatch(fd, buf, 8192, 4), 1, 'one request: INIT')
    const h = header(buf, 0)
    t.match(h, { len: 40 + 64, opcode: OP_INIT, nodeid: 0n, uid: 0, gid: 0, pid: 0 }, 'fuse_in_header of INIT')
    t.ok(h.unique > 0n, 'a unique id')
    t.equal(buf.readUInt32LE(40), 7, 'fuse_init_in.major')
    t.ok(buf.readUInt32LE(44) >= 36, `fuse_init_in.minor ${buf.readUInt32LE(44)} >= 36`)
    t.ok(buf.readUInt32LE(52) & FUSE_INIT_EXT, 'the kernel offers FUSE_INIT_EXT')
    t.equal(native.readBatch(fd, buf, 8192, 4), 0, 'nothing more until INIT is answered')
    t.equal(native.readBatch(fd, buf, 8192, 4, 200), 0, 'also after spinning 200 µs for one')
    t.throws(() => native.readBatch(fd, buf, 8192, 4, -1), RangeError, 'spinUs must not be negative')

    native.umount2(dir, N.MNT_DETACH)
    t.notOk(mountLine(dir), 'unmounted')
    t.equal(native.readBatch(fd, buf, 8192, 4), -19, 'ENODEV: the connection has ended')
    t.equal(native.readBatch(fd, buf, 8192, 4), -19, 'and stays ended')
    t.throws(() => native.umount2(dir, 0), { code: 'EINVAL', syscall: 'umount2', path: dir }, 'not a mount any more')
  })

  t.test('poll: readable for a request, one UV_EBADF after a plain unmount', async t => {
    const { fd, dir, buf } = mount(t)
    const statuses: number[] = []
    const reads: number[] = []
    const h = native.pollStart(fd, (status) => {
      statuses.push(status)
      if (status === 0) reads.push(native.readBatch(fd, buf, MIN_READ, 16))
    })
    t.teardown(() => native.pollStop(h))
    await until('INIT', () => reads.length > 0)
    t.same(reads, [1], 'called once for INIT, which the callback read')
    t.equal(header(buf, 0).opcode, OP_INIT)
    native.umount2(dir, 0)
    await until('POLLERR', () => statuses.includes(N.UV_EBADF))
    await sleep(50)
    t.same(statuses, [0, N.UV_EBADF], 'POLLERR arrives once as UV_EBADF; libuv then stops the handle')
    t.equal(native.readBatch(fd, buf, MIN_READ, 16), -19)
  })

  t.test('readBatch: several requests, 8-byte aligned, bounded by maxCount and minFree', async t => {
    const { fd, dir, buf } = mount(t)
    t.equal(await readSome(fd, buf), 1)
    const init = header(buf, 0)
    replyInit(fd, init.unique, buf.readUInt32LE(44), FUSE_PARALLEL_DIROPS, 0)
    t.throws(() => native.readBatch(fd, Buffer.alloc(MIN_READ - 8), 8192, 4), { code: 'EINVAL' },
      'a read smaller than 80 + max_write is refused by the kernel')

    // Four processes each look a name up; PARALLEL_DIROPS lets their LOOKUPs queue together.
    const kids: ChildProcess[] = ['n1', 'n22', 'n333', 'n4444'].map(n => spawn('stat', [join(dir, n)], { stdio: 'ignore' }))
    const exited = kids.map(k => new Promise(resolve => k.once('exit', resolve)))
    t.teardown(() => { for (const k of kids) k.kill('SIGKILL') })
    const waiting = (k: ChildProcess) => { try { return fs.readFileSync(`/proc/${k.pid}/wchan`, 'utf8') === 'request_wait_answer' } catch { return false } }
    await until('four blocked lookups', () => kids.every(waiting))

    const seen: Header[] = []
    const names: string[] = []
    const take = (b: Buffer, n: number) => {
      for (const off of offsets(b, n)) {
        t.equal(off % 8, 0, 'aligned')
        const h = header(b, off)
        seen.push(h)
        names.push(b.toString('utf8', off + 40, off + h.len - 1))
      }
    }
    const small = Buffer.alloc(MIN_READ + 100)
    t.equal(native.readBatch(fd, small, MIN_READ + 60, 16), 1, 'minFree: after one request too little space is left')
    take(small, 1)
    t.equal(native.readBatch(fd, buf, MIN_READ, 2), 2, 'maxCount')
    take(buf, 2)
    t.equal(offsets(buf, 2)[1], (header(buf, 0).len + 7) & ~7, 'the second request starts at the next multiple of 8')
    t.equal(native.readBatch(fd, buf, MIN_READ, 16), 1, 'the last one')
    take(buf, 1)
    t.equal(native.readBatch(fd, buf, MIN_READ, 16), 0, 'then none (EAGAIN)')
    t.same(names.sort(), ['n1', 'n22', 'n333', 'n4444'])
    for (const h of seen) {
      t.match(h, { opcode: OP_LOOKUP, nodeid: 1n, uid: 0, gid: 0 })
      t.ok(kids.some(k => k.pid === h.pid), 'the header names the calling process')
      reply(fd, h.unique, -2) // ENOENT
    }
    await Promise.all(exited)
  })

  t.test('a lazy unmount waits for the last open file; a plain one is refused', async t => {
    const { fd, dir, buf } = mount(t)
    t.equal(await readSome(fd, buf), 1)
    replyInit(fd, header(buf, 0).unique, buf.readUInt32LE(44), 0, 0)

    // Another process opens the mount's root directory and keeps it open.
    const holder = spawn('bash', ['-c', 'exec 3<"$0" && echo open && read', dir], { stdio: ['pipe', 'pipe', 'ignore'] })
    t.teardown(() => holder.kill('SIGKILL'))
    const opened = new Promise(resolve => holder.stdout!.once('data', resolve))
    t.equal(await readSome(fd, buf), 1)
    const open = header(buf, 0)
    t.equal(open.opcode, OP_OPENDIR)
    const out = Buffer.alloc(16) // struct fuse_open_out: fh, open_flags, backing_id
    out.writeBigUInt64LE(1n, 0)
    reply(fd, open.unique, 0, out)
    await opened

    const statuses: number[] = []
    const h = native.pollStart(fd, (s) => { statuses.push(s); if (s === 0) native.readBatch(fd, buf, MIN_READ, 16) })
    t.teardown(() => native.pollStop(h))
    t.throws(() => native.umount2(dir, 0), { code: 'EBUSY' }, 'plain unmount of a busy mount: EBUSY')
    native.umount2(dir, N.MNT_DETACH)
    t.notOk(mountLine(dir), 'gone from mountinfo')
    await sleep(100)
    t.equal(native.readBatch(fd, buf, MIN_READ, 16), 0, 'but the connection lives on: EAGAIN, not ENODEV')
    t.same(statuses, [], 'and no POLLERR')

    holder.stdin!.end() // the holder exits, closing the last file in the mount
    await until('POLLERR', () => statuses.includes(N.UV_EBADF))
    // (A read racing with the end of the connection may see ECONNABORTED instead of ENODEV.)
    t.ok([-19, -103].includes(native.readBatch(fd, buf, MIN_READ, 16)), 'now the connection has ended')
  })

  // --- fusermountOpen -----------------------------------------------------------------------

  function python (): string | null {
    const r = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' })
    return r.status === 0 ? r.stdout.trim() : null
  }

  // A stand-in for fusermount: records how it was run, then (FAKE_MODE) sends FAKE_SEND's fd
  // over _FUSE_COMMFD as the real one sends /dev/fuse's, exits 3, or exits 0 sending nothing.
  const FAKE = (py: string) => `#!${py}
import json, os, socket, sys
with open(os.environ['FAKE_RECORD'], 'w') as f:
    json.dump({'argv': sys.argv[1:], 'commfd': os.environ.get('_FUSE_COMMFD'), 'name': os.path.basename(sys.argv[0])}, f)
mode = os.environ['FAKE_MODE']
if mode == 'fail':
    sys.exit(3)
if mode == 'send':
    s = socket.socket(fileno=int(os.environ['_FUSE_COMMFD']))
    socket.send_fds(s, [b'\\0'], [os.open(os.environ['FAKE_SEND'], os.O_RDONLY)])
`

  const py = python()
  // CI installs python3 (.ci/run): there a missing python3 is a failure, not a skip.
  if (!py) {
    if (process.env.CI) t.fail('python3 is missing: CI must install it (.ci/run)')
    else process.stderr.write('\n!!! SKIPPING the stand-in fusermount tests: python3 is not installed\n\n')
  }
  t.test('fusermountOpen with stand-in fusermount programs', { skip: !py && 'SKIPPED LOUDLY: python3 is needed for the stand-in fusermount' }, async t => {
    if (!py) return
    const d = tmp(t)
    const saved = { ...process.env }
    t.teardown(() => {
      for (const k of ['PATH', 'FAKE_MODE', 'FAKE_RECORD', 'FAKE_SEND', '_FUSE_COMMFD']) {
        if (saved[k] === undefined) delete process.env[k]
        else process.env[k] = saved[k]
      }
    })
    for (const sub of ['both', 'old', 'none']) fs.mkdirSync(join(d, sub))
    for (const p of ['both/fusermount3', 'both/fusermount', 'old/fusermount']) fs.writeFileSync(join(d, p), FAKE(py), { mode: 0o755 })
    fs.writeFileSync(join(d, 'sent'), 'the fd that was sent')
    const record = join(d, 'record.json')
    Object.assign(process.env, { FAKE_RECORD: record, FAKE_SEND: join(d, 'sent'), _FUSE_COMMFD: '12345' })
    const fds = openFds()

    process.env.PATH = join(d, 'both')
    process.env.FAKE_MODE = 'send'
    const fd = native.fusermountOpen('/some/target', 'fsname=cpfs,subtype=cpfs')
    t.equal(fs.readlinkSync(`/proc/self/fd/${fd}`), join(d, 'sent'), 'we got the fd it sent')
    t.equal(fdFlags(fd) & N.O_CLOEXEC, N.O_CLOEXEC, 'close-on-exec')
    fs.closeSync(fd)
    const rec = JSON.parse(fs.readFileSync(record, 'utf8'))
    t.same(rec.argv, ['-o', 'fsname=cpfs,subtype=cpfs', '--', '/some/target'])
    t.equal(rec.name, 'fusermount3', 'fusermount3 first')
    t.not(rec.commfd, '12345', 'an inherited _FUSE_COMMFD is replaced')

    fs.closeSync(native.fusermountOpen('/t', ''))
    t.same(JSON.parse(fs.readFileSync(record, 'utf8')).argv, ['--', '/t'], 'no -o without options')

    process.env.PATH = join(d, 'old')
    fs.closeSync(native.fusermountOpen('/t', 'ro'))
    t.equal(JSON.parse(fs.readFileSync(record, 'utf8')).name, 'fusermount', 'falls back to fusermount')

    process.env.FAKE_MODE = 'fail'
    t.throws(() => native.fusermountOpen('/t', 'ro'), { code: 'EFUSERMOUNT', message: /exit status 3/ })
    process.env.FAKE_MODE = 'silent'
    t.throws(() => native.fusermountOpen('/t', 'ro'), { code: 'EFUSERMOUNT', message: /no file descriptor/ })
    process.env.PATH = join(d, 'none')
    t.throws(() => native.fusermountOpen('/t', 'ro'), { code: 'ENOENT', syscall: 'posix_spawnp' }, 'no fusermount at all')
    t.equal(openFds(), fds, 'no fd leaked (socket pairs, received fds on failure)')
  })

  const real = ['/usr/bin', '/bin', '/usr/local/bin'].flatMap(p => [join(p, 'fusermount3'), join(p, 'fusermount')]).find(p => fs.existsSync(p))
  // CI installs fuse3 (.ci/run): there a missing fusermount3 is a failure, not a skip.
  if (!real && process.env.CI) t.fail('fusermount3 is missing: CI must install Debian\'s fuse3 (.ci/run)')
  t.test('fusermountOpen with the real fusermount3', { skip: !real && 'SKIPPED LOUDLY: no fusermount3 installed (Debian package fuse3)' }, async t => {
    const dir = tmp(t)
    const fd = native.fusermountOpen(dir, 'fsname=cpfs,subtype=cpfs,nosuid,nodev')
    t.teardown(() => {
      if (mountLine(dir)) native.umount2(dir, N.MNT_DETACH)
      fs.closeSync(fd)
    })
    t.equal(fs.readlinkSync(`/proc/self/fd/${fd}`), '/dev/fuse')
    t.same(mountLine(dir)?.split(' - ')[1].split(' ').slice(0, 2), ['fuse.cpfs', 'cpfs'])
    native.setNonBlocking(fd, true)
    const buf = Buffer.alloc(MIN_READ)
    t.equal(await readSome(fd, buf), 1)
    t.equal(header(buf, 0).opcode, OP_INIT)
    native.umount2(dir, N.MNT_DETACH)
    t.equal(native.readBatch(fd, buf, MIN_READ, 16), -19)
    t.throws(() => native.fusermountOpen(dir, 'no_such_option_xyz'), { code: 'EFUSERMOUNT', message: /exit status 1/ })
  })
}
