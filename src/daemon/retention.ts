// The daemon's automatic retention (session/retention.ts): after an unmount has answered, when
// the interval since the last run has passed. The store is still this process's, so the daemon
// keeps its pid file (and a marker saying why) while it runs: a cpfs command that needs the
// store meanwhile stops it (daemons.ts stopStaleDaemon), which is safe at any point (a prune is
// one batch; garbage collection leaves only garbage when stopped), and it runs again next time.
import * as fs from 'node:fs'
import { join } from 'node:path'
import { retain, retentionDueAt, retentionSettings, type RetentionSettings } from '../session/retention.js'
import type { Session } from '../session/session.js'
import { dirBytes, type Location } from '../store/locate.js'

/** The settings to apply now, or null when automatic retention is off or not due. */
export function dueRetention (session: Session): RetentionSettings | null {
  let s: RetentionSettings
  try {
    s = retentionSettings()
  } catch (err: any) {
    process.stderr.write(`cpfs daemon: no automatic retention: ${err.message}\n`)
    return null
  }
  return s.auto !== false && Date.now() >= retentionDueAt(session, s) ? s : null
}

/** The file that says the daemon holding the store is applying retention, not serving a mount. */
export function retainingMarker (loc: Location): string {
  return join(loc.dir, 'retaining')
}

/** Apply retention, release the store and exit. */
export async function retainAndExit (session: Session, loc: Location, pidFile: string, s: RetentionSettings): Promise<never> {
  let code = 0
  try {
    fs.writeFileSync(pidFile, String(process.pid) + '\n', { mode: 0o600 })
    fs.writeFileSync(retainingMarker(loc), String(process.pid) + '\n', { mode: 0o600 })
    const r = await retain(session, s, () => dirBytes(loc.store))
    process.stderr.write(`cpfs daemon: retention: dropped ${r.branchesDropped} branches, merged ${r.squashed} turns, freed ${r.bytesFreed} bytes\n`)
  } catch (err: any) {
    process.stderr.write(`cpfs daemon: retention stopped: ${err.message}\n`)
    code = 1
  } finally {
    await session.close().catch(() => {})
    for (const f of [retainingMarker(loc), pidFile]) try { fs.unlinkSync(f) } catch {}
  }
  process.exit(code)
}
