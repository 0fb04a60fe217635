// Ending a mount, in order: what was written reaches the store, the kernel lets go of the
// mount, the watch underneath records its last changes, and only then does the plan run on
// the real directory (apply), or the pending turns are set aside (discard), or neither (keep:
// a signal, a lost connection). The process exits at the end, whatever happened.
import * as fs from 'node:fs'
import type { Server } from 'node:net'
import { CpfsError } from '../errors.js'
import type { UnmountResult } from '../control/protocol.js'
import type { Channel } from '../fuse/channel.js'
import type { Notifier } from '../fuse/invalidate.js'
import { unmountPath } from '../fuse/mount.js'
import { absorbOutsideChanges } from '../plans/absorb.js'
import { freezeLower } from '../plans/freeze.js'
import { applyStack } from '../plans/run.js'
import { noteUnseenChanges } from '../plans/drift.js'
import type { Faults } from '../plans/faults.js'
import type { PlanSummary } from '../plans/finish.js'
import { phase } from '../progress.js'
import type { Session } from '../session/session.js'
import { isMounted, type Location } from '../store/locate.js'
import type { WatchInfo } from '../store/underneath.js'
import { Underneath } from './underneath.js'
import { dueRetention, retainAndExit } from './retention.js'
import type { WatcherEvents } from './watchers.js'
import type { ViewMounts } from './view-mounts.js'

/** apply: run the plan to the real directory; discard: set the pending turns aside; keep: neither. */
export type EndMode = 'apply' | 'discard' | 'keep'

/** What a mount is made of, as the shutdown takes it apart. */
export interface MountParts {
  loc: Location
  session: Session
  /** The FUSE device's descriptor. */
  fd: number
  ch: Channel
  notifier: Notifier
  watch: WatcherEvents
  underneath: Underneath | WatchInfo
  pidFile: string
  /** The user's umask, for the plan's files (main.ts). */
  umask?: number
  /** What the tests make go wrong in the plan (plans/faults.ts). */
  faults: Faults
  /** Views of old turns, served by this daemon: they go with the mount. */
  viewMounts?: ViewMounts
}

export class Shutdown {
  /** Set once a shutdown started: the control socket then answers nothing but ping. */
  closing = false
  /** The control socket, closed with the mount. */
  server: Server | null = null
  /** Set once the mount is gone and retention runs (daemon/retention.ts). */
  retaining = false

  constructor (private readonly m: MountParts) {}

  /**
   * `lazy`: for signals and a lost connection — a busy mount is detached instead of refused,
   * because the daemon must end (its users then see ENOTCONN, as after a crash).
   */
  async run (mode: EndMode, force: boolean, lazy = false): Promise<UnmountResult> {
    if (this.closing) throw new CpfsError('BUSY', 'the daemon is already shutting down', 'wait a moment and check cpfs status')
    this.closing = true
    try {
      await this.unmount(lazy)
    } catch (err) {
      this.closing = false
      throw err
    }
    // Views go with the daemon that serves them: only once the workspace's unmount went through
    // (a refused unmount changes nothing), busy ones lazily (the daemon is about to end).
    await this.m.viewMounts?.closeAll().catch((err) => process.stderr.write(`cpfs daemon: cannot close the views: ${err.message}\n`))
    await this.release()
    return await this.finish(mode, force)
  }

  /** A signal (`sig`) or a lost connection: end now, keeping the history, never applying. */
  onEnd (why: string, sig?: string): void {
    if (this.retaining) {
      process.stderr.write(`cpfs daemon: retention stopped (${sig ?? why}); it runs again after the next unmount\n`)
      process.exit(0)
    }
    process.stderr.write(`cpfs daemon: ${why}\n`)
    this.run('keep', false, true).catch((err) => {
      const line = sig ? ` on ${sig}: ${err.message}; exiting anyway (the next cpfs mount recovers)` : `: ${err.message}`
      process.stderr.write(`cpfs daemon: cannot shut down cleanly${line}\n`)
      process.exit(1)
    })
  }

  /**
   * Writes still buffered reach the store and the kernel lets go of the mount: seconds when
   * much was written just before.
   */
  private async unmount (lazy: boolean): Promise<void> {
    const { loc, session, ch, watch, underneath } = this.m
    const unmounting = phase('unmounting', 'steps')
    try {
      if (underneath instanceof Underneath) await underneath.flush()
      await watch.drain()
      await session.persister.flushAll(true)
      // The mount may be gone already (umount -l, fusermount -u -z): nothing to unmount then.
      if (!isMounted(loc.workspace)) return
      try {
        await unmountPath(loc.workspace, ch.closed)
      } catch (err: any) {
        if (!lazy || err?.code !== 'MOUNT_BUSY') throw err
        process.stderr.write(`cpfs daemon: ${loc.workspace} is busy; detaching it (processes still inside get ENOTCONN)\n`)
        await unmountPath(loc.workspace, true)
      }
    } finally {
      unmounting.end()
    }
  }

  /**
   * Nothing reaches the real directory past the mount any more than through it now: what was
   * changed underneath until the unmount is recorded, and the plan runs on it.
   */
  private async release (): Promise<void> {
    const { session, ch, fd, notifier, watch, underneath, pidFile } = this.m
    if (underneath instanceof Underneath) await underneath.stop()
    ch.stop()
    await session.capture.quiesce() // no background capture while the plan runs
    session.lower.cacheReal(false) // plans see the real directory as it is now
    try { fs.closeSync(fd) } catch {}
    await notifier.close()
    await watch.close()
    this.server?.close()
    try { fs.unlinkSync(pidFile) } catch {}
  }

  private async finish (mode: EndMode, force: boolean): Promise<UnmountResult> {
    const { session } = this.m
    let summary: PlanSummary | null = null
    let discarded: number | undefined
    let ended = false
    try {
      if (mode === 'apply' && force) {
        await noteUnseenChanges(session)
        const kept = await absorbOutsideChanges(session, { force: true })
        if (kept) process.stderr.write(`cpfs daemon: kept ${kept.paths.length} paths changed outside cpfs as turn ${kept.turn} before replacing them\n`)
      }
      if (mode === 'apply') {
        if (this.m.umask !== undefined) process.umask(this.m.umask) // the real directory's files: the user's umask
        summary = await applyStack(session, { force, faults: this.m.faults })
      }
      if (mode === 'discard') discarded = await session.discard()
      ended = mode !== 'keep'
    } finally {
      // What the history still needs from the real directory is kept before anyone can edit it.
      await freezeLower(session).catch((err) => process.stderr.write(`cpfs daemon: cannot keep the lower files of unapplied turns: ${err.message}\n`))
      // Retention, when due, after the answer (never while anyone waits on the mount).
      const retention = ended ? dueRetention(session) : null
      if (retention) {
        this.retaining = true
        setTimeout(() => { void retainAndExit(session, this.m.loc, this.m.pidFile, retention) }, 50)
      } else {
        await session.close()
        setTimeout(() => process.exit(0), 50)
      }
    }
    return { applied: mode === 'apply', summary, discarded }
  }
}
