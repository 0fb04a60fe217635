// Entry point of the daemon process (started by `cpfs mount`). Options arrive as one JSON
// argument; readiness or the startup error goes back as one JSON line on file descriptor 3.
import * as fs from 'node:fs'
import { CpfsError, isCpfsError } from '../errors.js'
import { runDaemon, type DaemonOptions } from './daemon.js'
import { faultsFromEnv } from '../plans/faults.js'

function report (line: object): void {
  try {
    fs.writeSync(3, JSON.stringify(line) + '\n')
    fs.closeSync(3)
  } catch {}
}

const opts = JSON.parse(process.argv[2]) as DaemonOptions
// Everything the daemon creates for itself (LevelDB's tables and logs, the pid file) is
// private to its owner, whatever umask the user has. Plans to the real directory get the
// user's own back (runDaemon), so that what they create is what the CLI would create.
opts.umask = process.umask(0o077)
// Nothing a process does inside the mount may take it down: an error no handler caught is
// logged, and the daemon goes on serving.
process.on('uncaughtException', (err) => {
  process.stderr.write(`cpfs daemon: ${new Date().toISOString()} uncaught: ${err.stack ?? err}\n`)
})
process.on('unhandledRejection', (err: any) => {
  process.stderr.write(`cpfs daemon: ${new Date().toISOString()} unhandled rejection: ${err?.stack ?? err}\n`)
})
// The tests drive a real daemon process: the environment is how they reach the faults they
// inject into its plans (plans/faults.ts), and this is the one place the daemon reads them.
runDaemon(opts, (info) => report({ ready: info }), faultsFromEnv(process.env)).catch((err) => {
  const e = isCpfsError(err) ? err : new CpfsError('INTERNAL', String(err?.stack ?? err))
  process.stderr.write(`cpfs daemon: ${e.line()}\n`)
  report({ error: { code: e.code, message: e.message, hint: e.hint } })
  process.exit(1)
})
