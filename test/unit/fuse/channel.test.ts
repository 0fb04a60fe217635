// The request dispatcher: whatever a request holds, it gets exactly one well-formed reply (or,
// for FORGET, none), and nothing a handler throws escapes to the daemon.
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Channel } from '../../../src/fuse/channel.js'
import { Request } from '../../../src/fuse/wire.js'
import { fsError } from '../../../src/errors.js'

function request (opcode: number, unique: number, body: Buffer = Buffer.alloc(0)): Request {
  const b = Buffer.alloc(40 + body.length)
  b.writeUInt32LE(b.length, 0)
  b.writeUInt32LE(opcode, 4)
  b.writeBigUInt64LE(BigInt(unique), 8)
  b.writeBigUInt64LE(1n, 16)
  body.copy(b, 40)
  return new Request(b, 0)
}

/** A channel whose replies go to a file, and the replies read back as [unique, error, length]. */
function setup () {
  const file = join(fs.mkdtempSync(join(tmpdir(), 'cpfs-channel-')), 'replies')
  const fd = fs.openSync(file, 'w+')
  const ch = new Channel(fd)
  const errors: unknown[] = []
  ch.onError = (err) => { errors.push(err) }
  const replies = () => {
    const b = fs.readFileSync(file)
    const out: Array<[number, number, number]> = []
    for (let at = 0; at + 16 <= b.length; at += b.readUInt32LE(at)) out.push([Number(b.readBigUInt64LE(at + 8)), b.readInt32LE(at + 4), b.readUInt32LE(at)])
    return out
  }
  return { ch, replies, errors }
}

t.test('unknown opcodes get ENOSYS; FORGET, BATCH_FORGET and INTERRUPT get no reply', async t => {
  const { ch, replies } = setup()
  ch.dispatch(request(4096, 2))
  ch.dispatch(request(2, 4))
  ch.dispatch(request(42, 6))
  ch.dispatch(request(36, 8))
  t.same(replies(), [[2, -38, 16]])
})

t.test('a handler that throws: its errno, or EIO and one log line for anything unexpected', async t => {
  const { ch, replies, errors } = setup()
  ch.on(3, (r) => { if (r.unique === 2n) throw fsError('ENOENT', '/x'); throw new TypeError('a bug') })
  ch.on(1, (r) => { r.need(100) }) // a body shorter than its layout: malformed
  ch.on(5, () => { throw Object.assign(new Error('EACCES: from a syscall'), { code: 'EACCES' }) })
  ch.dispatch(request(3, 2))
  ch.dispatch(request(3, 4))
  ch.dispatch(request(1, 6, Buffer.from('short')))
  ch.dispatch(request(5, 8))
  t.same(replies(), [[2, -2, 16], [4, -5, 16], [6, -5, 16], [8, -13, 16]], 'ENOENT, EIO, EIO, EACCES')
  t.equal(errors.length, 2, 'the bug and the malformed request are logged, the expected errors are not')
  t.ok(errors[0] instanceof TypeError)
})

t.test('a name without its terminating NUL is malformed, not a crash', async t => {
  const { ch, replies } = setup()
  ch.on(1, (r) => { r.cstring(r.body) })
  ch.dispatch(request(1, 2, Buffer.from('no-nul')))
  t.same(replies(), [[2, -5, 16]])
})

t.test('a reply to a wait cut short by INTERRUPT is sent once, as EINTR', async t => {
  const { ch, replies } = setup()
  let finish!: () => void
  ch.on(20, (r, c) => c.later(r, new Promise<void>(resolve => { finish = resolve }), 'fsync'))
  ch.on(36, (r, c) => c.interrupt(r.buf.readBigUInt64LE(r.body)))
  ch.dispatch(request(20, 10))
  const intr = Buffer.alloc(8)
  intr.writeBigUInt64LE(10n)
  ch.dispatch(request(36, 11, intr))
  finish()
  await new Promise(resolve => setImmediate(resolve))
  t.same(replies(), [[10, -4, 16]], 'EINTR once; the late completion sends nothing')
})
