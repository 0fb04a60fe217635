import * as net from 'node:net'
import { CpfsError } from '../errors.js'
import { progressSink } from '../progress.js'
import type { Reply, Request } from './protocol.js'

/**
 * Send one request to the daemon; throws NOT_RUNNING when nobody listens. When the caller
 * listens for progress (withProgress), the daemon's progress lines go to that listener.
 */
export function call (socketPath: string, req: Request): Promise<unknown> {
  const sink = progressSink()
  if (sink) req = { ...req, progress: true }
  return new Promise((resolve, reject) => {
    const conn = net.connect(socketPath)
    let buf = ''
    let done = false
    conn.setEncoding('utf8')
    conn.on('connect', () => conn.write(JSON.stringify(req) + '\n'))
    conn.on('data', (d) => {
      buf += d
      if (!sink) return
      // Every complete line but the reply is a progress line.
      let nl
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl)
        let msg: any
        try {
          msg = JSON.parse(line)
        } catch {
          return // not a whole JSON line: the reply, parsed at the end
        }
        if (!msg || typeof msg !== 'object' || !('progress' in msg)) return
        buf = buf.slice(nl + 1)
        sink(msg.progress)
      }
    })
    conn.on('error', (err: any) => {
      if (done) return
      done = true
      if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') reject(new CpfsError('NOT_RUNNING', 'no cpfs daemon answers for this workspace'))
      else reject(new CpfsError('CONTROL', `control socket error: ${err.message}`, 'check the daemon log in the workspace\'s cpfs directory'))
    })
    conn.on('end', () => {
      if (done) return
      done = true
      let r: Reply
      try {
        r = JSON.parse(buf)
      } catch {
        reject(new CpfsError('DAEMON_DIED', 'the cpfs daemon closed the connection without answering', 'see the daemon log; cpfs mount recovers a crashed session'))
        return
      }
      if (r.ok) resolve(r.result)
      else reject(new CpfsError(r.code, r.message, r.hint))
    })
  })
}

export async function ping (socketPath: string): Promise<boolean> {
  try {
    await call(socketPath, { cmd: 'ping' })
    return true
  } catch {
    return false
  }
}
