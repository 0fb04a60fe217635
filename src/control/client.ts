import * as net from 'node:net'
import { CpfsError } from '../errors.js'
import type { Reply, Request } from './protocol.js'

/** Send one request to the daemon; throws NOT_RUNNING when nobody listens. */
export function call (socketPath: string, req: Request): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const conn = net.connect(socketPath)
    let buf = ''
    let done = false
    conn.setEncoding('utf8')
    conn.on('connect', () => conn.write(JSON.stringify(req) + '\n'))
    conn.on('data', (d) => { buf += d })
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
