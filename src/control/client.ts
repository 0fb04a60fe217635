import { connect } from 'node:net'
import { CpfsError, isCpfsError } from '../errors.js'
import { progressSink } from '../progress.js'
import type { CommandName, Reply, Request, ResultOf } from './protocol.js'

/**
 * How long a ping, or the acknowledgement of any request, may take: a live daemon answers at
 * once, even mid-rewind. Every call is timed (by default its acknowledgement): a stopped daemon
 * accepts connections and never answers, and a command must never wait on it for good.
 */
export const PING_TIMEOUT_MS = 5000

export interface CallOptions {
  /**
   * Give up after this many milliseconds (a stopped daemon still accepts connections but never
   * answers). Without it, a call waits as long as the command takes (an unmount that applies a
   * large tree). The command may still complete in the daemon after the caller gave up.
   */
  timeoutMs?: number
  /**
   * Give up when the daemon has not acknowledged the request within this many milliseconds,
   * then wait as long as the command takes: a live daemon acknowledges at once, even mid-rewind.
   */
  ackTimeoutMs?: number
}

/**
 * Send one request to the daemon; throws NOT_RUNNING when nobody listens, DAEMON_TIMEOUT when
 * nobody answers in time. When the caller listens for progress (withProgress), the daemon's
 * progress lines go to that listener.
 */
export function call<C extends CommandName> (socketPath: string, req: Request<C>, opts: CallOptions = { ackTimeoutMs: PING_TIMEOUT_MS }): Promise<ResultOf<C>> {
  const sink = progressSink()
  if (sink) req = { ...req, progress: true }
  if (opts.ackTimeoutMs !== undefined) req = { ...req, ack: true }
  return new Promise((resolve, reject) => {
    const conn = connect(socketPath)
    let reply: string | undefined
    let done = false
    const limit = opts.timeoutMs ?? opts.ackTimeoutMs
    const timer = limit === undefined
      ? null
      : setTimeout(() => {
        if (done) return
        done = true
        conn.destroy()
        reject(new CpfsError('DAEMON_TIMEOUT', `the cpfs daemon did not answer "${req.cmd}" within ${(limit / 1000).toFixed(1)} s`, 'is it stopped or overloaded? see cpfs status and the daemon log'))
      }, limit)
    const finish = (): boolean => {
      if (done) return false
      done = true
      if (timer) clearTimeout(timer)
      return true
    }
    conn.setEncoding('utf8')
    conn.on('connect', () => conn.write(JSON.stringify(req) + '\n'))
    // Whole lines: an acknowledgement, progress lines, then the reply. Any line shows that
    // the daemon is alive (an older daemon sends no acknowledgement).
    const lines = new LineReader((line) => {
      if (timer && opts.timeoutMs === undefined) clearTimeout(timer)
      let msg: any
      try {
        msg = JSON.parse(line)
      } catch {
        reply = line // reported as a broken reply at the end
        return
      }
      if (msg && typeof msg === 'object' && 'ack' in msg) return
      if (msg && typeof msg === 'object' && 'progress' in msg) {
        sink?.(msg.progress)
        return
      }
      reply = line
    })
    conn.on('data', (d: string) => lines.add(d))
    conn.on('error', (err: any) => {
      if (!finish()) return
      if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') reject(new CpfsError('NOT_RUNNING', 'no cpfs daemon answers for this workspace'))
      else reject(new CpfsError('CONTROL', `control socket error: ${err.message}`, 'check the daemon log in the workspace\'s cpfs directory'))
    })
    conn.on('end', () => {
      if (!finish()) return
      let r: Reply
      try {
        r = JSON.parse(reply ?? lines.rest())
      } catch {
        reject(new CpfsError('DAEMON_DIED', 'the cpfs daemon closed the connection without answering', 'see the daemon log; cpfs mount recovers a crashed session'))
        return
      }
      if (r.ok) resolve(r.result as ResultOf<C>)
      else reject(new CpfsError(r.code, r.message, r.hint))
    })
  })
}

/**
 * Splits a stream into lines. A long line (a reply of 100 MB: the log of a tree 10,000 levels
 * deep) arrives in many pieces: they are kept apart until its end, and only new data is
 * searched for it (searching the whole of the buffer again for every piece took minutes).
 */
class LineReader {
  private readonly parts: string[] = []

  constructor (private readonly onLine: (line: string) => void) {}

  add (d: string): void {
    let nl = d.indexOf('\n')
    this.parts.push(d)
    if (nl < 0) return
    let buf = this.parts.join('')
    this.parts.length = 0
    nl += buf.length - d.length
    for (; nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      this.onLine(line)
    }
    if (buf) this.parts.push(buf)
  }

  /** What came after the last whole line. */
  rest (): string {
    return this.parts.join('')
  }
}

/**
 * Is a daemon listening and answering? False when nobody listens; a daemon that accepts the
 * connection but does not answer (stopped with SIGSTOP, wedged) is an error, not "not running".
 */
export async function ping (socketPath: string, opts: CallOptions = { timeoutMs: PING_TIMEOUT_MS }): Promise<boolean> {
  try {
    await call(socketPath, { cmd: 'ping' }, opts)
    return true
  } catch (err) {
    if (isCpfsError(err) && err.code === 'DAEMON_TIMEOUT') throw err
    return false
  }
}
