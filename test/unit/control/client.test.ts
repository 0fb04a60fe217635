// The control socket's liveness rule: a caller times out a daemon that does not acknowledge
// its request (stopped, wedged), but never a command that takes long once acknowledged; an
// older daemon that sends no acknowledgement still works. Real Unix sockets, no mount.
import t from 'tap'
import * as fs from 'node:fs'
import * as net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { call } from '../../../src/control/client.js'
import { serve } from '../../../src/control/server.js'
import { CpfsError, isCpfsError } from '../../../src/errors.js'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-control-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))
/**
 * The acknowledgement timeout of the live-daemon cases: a server in this process acknowledges
 * at once, so only a hang comes near it (1 s: the timeout's own test below uses 150 ms).
 */
const ACK_MS = 1000

/** A raw server: what it does with each connection is up to the test. */
async function rawServer (name: string, onConn: (c: net.Socket) => void): Promise<string> {
  const path = join(dir, name)
  const server = net.createServer(onConn)
  await new Promise<void>(resolve => server.listen(path, resolve))
  t.teardown(() => server.close())
  return path
}

t.test('a command that outlasts the acknowledgement timeout is waited for', async t => {
  const path = join(dir, 'slow.sock')
  // The command ends when the test lets it, once the caller's acknowledgement timeout has
  // passed: the test's timer, set after the caller's and for longer, has fired, and the call is
  // still waiting. Timers fire in the order they are due (with the caller's rejection, had it
  // come, handled in between), so this holds however slow the machine; no duration is measured.
  let release!: () => void
  const released = new Promise<void>(resolve => { release = resolve })
  const server = await serve(path, async (req) => { await released; return { cmd: req.cmd, ack: req.ack } })
  t.teardown(() => server.close())
  let settled = false
  const reply = call(path, { cmd: 'rewind' }, { ackTimeoutMs: ACK_MS })
  reply.then(() => { settled = true }, () => { settled = true })
  await sleep(2 * ACK_MS)
  t.notOk(settled, 'past the acknowledgement timeout, the call still waits for the command')
  release()
  t.same(await reply, { cmd: 'rewind', ack: true }, 'and gets its reply, because the daemon acknowledged at once')
})

t.test('a daemon that accepts the connection and never answers times out', async t => {
  const path = await rawServer('silent.sock', () => {})
  const err = await call(path, { cmd: 'turn' }, { ackTimeoutMs: 150 }).catch(e => e)
  t.ok(isCpfsError(err), 'a CpfsError')
  t.equal(err.code, 'DAEMON_TIMEOUT')
  t.match(err.message, /did not answer "turn" within 0\.1 s|did not answer "turn" within 0\.2 s/)
})

t.test('an older daemon, which replies without an acknowledgement, still works', async t => {
  const path = await rawServer('old.sock', (c) => {
    c.once('data', () => setTimeout(() => c.end(JSON.stringify({ ok: true, result: { head: 7 } }) + '\n'), 50))
  })
  t.same(await call(path, { cmd: 'turn' }, { ackTimeoutMs: 1000 }), { head: 7 })
})

t.test('errors keep their code; nobody listening is NOT_RUNNING', async t => {
  const path = join(dir, 'err.sock')
  const server = await serve(path, async () => { throw new CpfsError('UNKNOWN_TURN', 'turn 9 does not exist', 'see cpfs log') })
  t.teardown(() => server.close())
  const err = await call(path, { cmd: 'rewind' }, { ackTimeoutMs: 1000 }).catch(e => e)
  t.match(err, { code: 'UNKNOWN_TURN', message: 'turn 9 does not exist', hint: 'see cpfs log' })
  const none = await call(join(dir, 'nobody.sock'), { cmd: 'turn' }, { ackTimeoutMs: 1000 }).catch(e => e)
  t.equal(none.code, 'NOT_RUNNING')
})

t.test('a broken reply is DAEMON_DIED, not a crash of the caller', async t => {
  const path = await rawServer('broken.sock', (c) => { c.once('data', () => c.end('{"ack":true}\n{"ok":tr')) })
  const err = await call(path, { cmd: 'turn' }, { ackTimeoutMs: 1000 }).catch(e => e)
  t.equal(err.code, 'DAEMON_DIED')
})

t.test('an error of another copy of the errors module is still a CpfsError', async t => {
  // The cpfs command is a bundle with its own copy of src/errors.ts (scripts/bundle-cli.mjs).
  const copy = join(dir, 'errors-copy.mjs')
  fs.copyFileSync(new URL('../../../dist/errors.js', import.meta.url), copy)
  const other = await import(copy)
  const e = new other.CpfsError('STORE_LOCKED', 'locked', 'wait')
  t.notOk(e instanceof CpfsError, 'another class')
  t.ok(isCpfsError(e), 'and still recognised')
  t.notOk(isCpfsError(new Error('x')), 'a plain Error is not')
  t.notOk(isCpfsError({ code: 'X' }), 'nor a look-alike object')
})
