import * as fs from 'node:fs'
import * as net from 'node:net'
import { CpfsError, isCpfsError } from '../errors.js'
import type { Handlers, ProgressLine, Reply, Request } from './protocol.js'
import { withProgress, type ProgressSink } from '../progress.js'

export type Handler = (req: Request) => Promise<unknown>

/**
 * The one dispatcher of control requests: the handler of `req.cmd` from the protocol's table,
 * with the request's arguments (an empty object when it sent none). `gate` may refuse a
 * command first (a daemon shutting down answers nothing but ping).
 */
export function dispatcher (handlers: Handlers, gate?: (req: Request) => void): Handler {
  return async (req) => {
    gate?.(req)
    if (typeof req.cmd !== 'string' || !Object.hasOwn(handlers, req.cmd)) {
      throw new CpfsError('BAD_REQUEST', `unknown command ${String(req.cmd)}`, 'upgrade the cpfs CLI to match the daemon')
    }
    const args = req.args !== null && typeof req.args === 'object' ? req.args : {}
    return await (handlers[req.cmd] as (a: unknown) => unknown)(args)
  }
}

export async function serve (socketPath: string, handler: Handler): Promise<net.Server> {
  try {
    fs.unlinkSync(socketPath)
  } catch {}
  const server = net.createServer((conn) => {
    let buf = ''
    conn.setEncoding('utf8')
    conn.on('data', (chunk) => {
      buf += chunk
      const nl = buf.indexOf('\n')
      if (nl < 0) return
      const line = buf.slice(0, nl)
      buf = ''
      let req: Request
      try {
        req = JSON.parse(line)
      } catch {
        conn.end(JSON.stringify({ ok: false, code: 'BAD_REQUEST', message: 'malformed request' }) + '\n')
        return
      }
      // A caller that gave up (it timed out on a stopped daemon, or was killed) must not have
      // its command run later, when the daemon resumes: a turn nobody saw would be sealed. A
      // caller never ends its side before the reply, so an end already read means it is gone.
      setImmediate(() => {
        if (conn.readableEnded || conn.destroyed) {
          conn.destroy()
          return
        }
        run(conn, req, handler)
      })
    })
    conn.on('error', () => {})
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => resolve())
  })
  fs.chmodSync(socketPath, 0o600)
  return server
}

/** Acknowledge, run the handler (with progress lines when asked), reply. */
function run (conn: net.Socket, req: Request, handler: Handler): void {
  if (req.ack && !conn.destroyed) conn.write('{"ack":true}\n')
  // Progress lines go out as the work runs (the work is mostly synchronous: the socket
  // write is tried at once, and the client reads them as they come).
  const sink: ProgressSink | undefined = req.progress
    ? (e) => { if (!conn.destroyed && conn.writable) conn.write(JSON.stringify({ progress: e } satisfies ProgressLine) + '\n') }
    : undefined
  withProgress(sink, () => handler(req)).then(
    (result) => reply(conn, { ok: true, result: result ?? null }),
    (err) => {
      if (!isCpfsError(err)) process.stderr.write(`cpfs daemon: internal error: ${err?.stack ?? err}\n`)
      const e = isCpfsError(err) ? err : new CpfsError('INTERNAL', `internal error: ${String(err?.message ?? err).split('\n')[0]}`, 'see the daemon log in the workspace\'s cpfs directory')
      reply(conn, { ok: false, code: e.code, message: e.message, hint: e.hint })
    }
  )
}

function reply (conn: net.Socket, r: Reply): void {
  if (!conn.destroyed) conn.end(JSON.stringify(r) + '\n')
}
