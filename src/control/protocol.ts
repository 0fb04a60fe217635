// The control socket: a Unix socket in the workspace's cpfs directory (mode 0600, in a 0700
// directory), one JSON request per connection, one JSON reply. The daemon answers with the
// result or with a CpfsError's code, message and hint, so the CLI prints the same one-line
// error whichever process found it. A request with `progress: true` (the CLI on a terminal)
// gets progress lines, {"progress": ProgressEvent}, before its reply; an older daemon ignores
// the flag and sends the reply alone. A request with `ack: true` gets {"ack": true} as soon as
// the daemon has read it, so that a caller can time out a stopped daemon without timing out
// a long command (and without a ping on a second connection first).
import type { ProgressEvent } from '../progress.js'

export interface Request {
  cmd: string
  args?: Record<string, unknown>
  progress?: boolean
  ack?: boolean
}

export interface ProgressLine {
  progress: ProgressEvent
}

export type Reply =
  | { ok: true, result: unknown }
  | { ok: false, code: string, message: string, hint?: string }
