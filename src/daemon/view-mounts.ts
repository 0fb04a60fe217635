// Views: read-only mounts of the tree at some turn, served by the workspace's own daemon on a
// FUSE channel of their own. Nothing is copied: a view is a View over the same lower and
// chunk store as the mount, behind an overlay whose head layer stays empty, behind a guard
// that refuses every change (read-only-fs.ts), mounted MS_RDONLY.
//
// views.json in the workspace's cpfs directory lists the open views. It is written before a
// view is mounted, so that a daemon killed with views open leaves a record of them: the next
// daemon detaches them (lazily: a shell may still be inside) and removes the directories it
// made, before it mounts anything.
import * as fs from 'node:fs'
import { join, resolve } from 'node:path'
import { CpfsError, fsError } from '../errors.js'
import { Channel } from '../fuse/channel.js'
import type { Durability } from '../fuse/contract.js'
import { OP_NAMES } from '../fuse/kernel.js'
import { cacheTimeout, mountFuse, unmountPath } from '../fuse/mount.js'
import { FuseOps } from '../fuse/ops.js'
import { NAME_MAX, nameMax } from '../overlay/limits.js'
import { Overlay } from '../overlay/overlay.js'
import type { Session } from '../session/session.js'
import { turnState } from '../plans/turn-view.js'
import type { ViewInfo } from '../control/protocol.js'
import { VIEW_SOURCE, realPathOutside, type Location } from '../store/locate.js'
import { viewMountTable } from '../workspaces.js'
import { ReadOnlyFilesystem } from './read-only-fs.js'
import { checkViewPath, defaultViewPath } from './view-path.js'

/** An open view, as `cpfs view --list` shows it. */

/** What views.json keeps of each view: enough to take it down after a crash. */
interface ViewRecord extends ViewInfo {
  /** The daemon made the directory: it goes with the view. */
  created: boolean
}

interface OpenView {
  record: ViewRecord
  fd: number
  ch: Channel
  closing: boolean
}

/** A view writes nothing, so nothing ever waits for durability. */
const NOTHING_TO_PERSIST: Durability = {
  durable: () => null,
  flushAll: () => null,
  flushFile: () => null,
  noteWritten: () => {},
  backpressure: () => null
}


function viewsFile (loc: Location): string {
  return join(loc.dir, 'views.json')
}

function readRecords (loc: Location): ViewRecord[] {
  try {
    const list = JSON.parse(fs.readFileSync(viewsFile(loc), 'utf8'))
    return Array.isArray(list) ? list : []
  } catch {
    return []
  }
}

/** A view's mount source: what `mount` and df show, and how a leftover is told from another's view. */
function viewSource (v: { ref: string, at: 'start' | 'end' }): string {
  return VIEW_SOURCE + v.ref.replace(/[^A-Za-z0-9:._-]/g, '_') + (v.at === 'end' ? '+' : '')
}

export class ViewMounts {
  private readonly views = new Map<string, OpenView>()

  constructor (private readonly loc: Location, private readonly session: Session) {}

  /**
   * Views a killed daemon left: detached (lazily: a process may still be inside; it gets
   * ENOTCONN), their made directories removed, the record emptied. Only mounts that are views
   * are touched: something else mounted at a recorded path since is left alone.
   */
  static async clearLeftovers (loc: Location): Promise<number> {
    const records = readRecords(loc)
    let cleared = 0
    for (const r of records) {
      // Its own source too: another workspace's view may be at that path now.
      if (viewMountTable().some(m => m.point === r.path && m.source === viewSource(r))) {
        try {
          await unmountPath(r.path, true)
          cleared++
        } catch (err: any) {
          process.stderr.write(`cpfs daemon: cannot detach the view left at ${r.path}: ${err.message}\n`)
          continue
        }
      }
      if (r.created) try { fs.rmdirSync(r.path) } catch {}
    }
    if (records.length) fs.writeFileSync(viewsFile(loc), '[]\n', { mode: 0o600 })
    return cleared
  }

  list (): ViewInfo[] {
    return [...this.views.values()].map(v => infoOf(v.record))
  }

  /** Mount the tree at turn `spec` (its start, or with `end` its end) at `asked` (absolute), or at a fresh directory. */
  async open (spec: string, asked?: string, end = false): Promise<ViewInfo> {
    // Everything that can refuse runs before anything is made.
    const where = asked === undefined ? null : checkViewPath(asked, this.loc)
    const state = await turnState(this.session, spec, end)
    const path = where?.path ?? defaultViewPath(this.loc, state.ref + (state.at === 'end' && state.ref !== `b${state.branch}` ? '-end' : ''))
    if (this.views.has(path)) throw new CpfsError('VIEW_PATH', `${path} is a view already`, 'close it first: cpfs view --close ' + path)
    const created = where === null || where.create
    const record: ViewRecord = { turn: state.turn, ref: state.ref, at: state.at, path, openedAt: Date.now(), label: state.label, created }
    const overlay = new Overlay(state.view, new Map(), this.session.lower, this.session.chunks, {
      onChange: () => {},
      allocIno: () => { throw fsError('EROFS', path) },
      checkSpace: () => {}
    })
    // Recorded before the directory and the mount: a crash from here on leaves a record the
    // next daemon clears (a directory not made yet is no matter: its removal is tried only).
    this.writeRecords([...this.views.values()].map(v => v.record).concat(record))
    let fd: number
    try {
      if (created) fs.mkdirSync(path, { mode: 0o755 })
      fd = mountFuse(path, { readOnly: true, source: viewSource(state) })
    } catch (err) {
      if (created) try { fs.rmdirSync(path) } catch {}
      this.writeRecords([...this.views.values()].map(v => v.record))
      throw err
    }
    const ch = new Channel(fd)
    const ops = new FuseOps(new ReadOnlyFilesystem(overlay), NOTHING_TO_PERSIST, overlay.getattr('/').ino, { cacheTimeout: cacheTimeout(), nameMax: Math.min(NAME_MAX, nameMax(this.session.lower.dirFd)) })
    ops.register(ch)
    const v: OpenView = { record, fd, ch, closing: false }
    ch.onError = (err, req) => {
      const what = String((err as any)?.stack ?? err).split('\n').slice(0, 2).map(l => l.trim()).join(' ')
      process.stderr.write(`cpfs daemon: view ${path}: ${OP_NAMES[req.opcode] ?? 'op' + req.opcode} (node ${req.nodeid}) failed: ${what}\n`)
    }
    // Unmounted by someone else (umount PATH): the view is gone; forget it.
    ch.onEnd = () => { if (!v.closing) this.forget(v) }
    const initDone = new Promise<void>((resolve) => { ops.onInit = resolve })
    this.views.set(path, v)
    ch.start()
    await initDone
    return infoOf(record)
  }

  /** Close the view at `path` (absolute), or every view; a busy one is refused unless `lazy`. */
  async close (path?: string, lazy = false): Promise<ViewInfo[]> {
    let targets = [...this.views.values()]
    if (path !== undefined) {
      path = realPathOutside(resolve(path))
      const v = this.views.get(path)
      if (!v) {
        const open = this.list().map(i => i.path)
        throw new CpfsError('NO_VIEW', `${path} is not an open view${open.length ? ` (open: ${open.join(', ')})` : ' (no view is open)'}`, 'see cpfs view --list')
      }
      targets = [v]
    }
    const closed: ViewInfo[] = []
    for (const v of targets) {
      v.closing = true
      try {
        await unmountPath(v.record.path, false)
      } catch (err: any) {
        if (!lazy || err?.code !== 'MOUNT_BUSY') {
          v.closing = false
          throw err
        }
        process.stderr.write(`cpfs daemon: the view ${v.record.path} is busy; detaching it (processes still inside get ENOTCONN)\n`)
        await unmountPath(v.record.path, true)
      }
      this.forget(v)
      closed.push(infoOf(v.record))
    }
    return closed
  }

  /** Every view, busy or not (the workspace is being unmounted). */
  async closeAll (): Promise<ViewInfo[]> {
    return await this.close(undefined, true)
  }

  private forget (v: OpenView): void {
    v.ch.stop()
    try { fs.closeSync(v.fd) } catch {}
    this.views.delete(v.record.path)
    if (v.record.created) try { fs.rmdirSync(v.record.path) } catch {}
    this.writeRecords([...this.views.values()].map(x => x.record))
  }

  /** views.json, replaced atomically (a crash leaves the old list or the new one). */
  private writeRecords (records: ViewRecord[]): void {
    const file = viewsFile(this.loc)
    const tmp = `${file}.${process.pid}.tmp`
    fs.writeFileSync(tmp, JSON.stringify(records, null, 1) + '\n', { mode: 0o600 })
    fs.renameSync(tmp, file)
  }
}

function infoOf (r: ViewRecord): ViewInfo {
  return { turn: r.turn, ref: r.ref, at: r.at, path: r.path, openedAt: r.openedAt, label: r.label }
}
