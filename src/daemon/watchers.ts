// Telling file watchers (inotify: editors, jest --watch, tsc -w, webpack, inotifywait) about the
// changes the daemon makes on its own — rewind, redo, undo, restore. The kernel raises inotify
// events only for operations that pass through the VFS; cache invalidations raise none, and
// FUSE_NOTIFY_DELETE only IN_DELETE_SELF for a watch on the deleted inode itself, nothing for
// the directory's watchers (measured, docs/decisions.md "File watchers after a rewind"). So a
// worker thread of the daemon (touch-worker.ts) goes through the mount like any process, right
// after the command has answered:
//  - every name the change took away is unlinked (or rmdir'ed), children first: IN_DELETE for
//    the directory's watchers, IN_DELETE_SELF for the file's;
//  - every path that changed or came back (with everything below a directory that came back) is
//    opened for writing, truncated to its own size and closed — IN_OPEN, IN_MODIFY,
//    IN_CLOSE_WRITE, what an editor's save looks like; directories, symlinks and special files
//    get utimes with their own times (IN_ATTRIB).
// The worker's requests carry its thread id as the FUSE header's pid, and the daemon answers
// them here without recording anything: its LOOKUP of a name being removed is answered from the
// view before the change (with no caching), its UNLINK/RMDIR succeed and change nothing (the
// view has no such name any more), its SETATTRs are answered as GETATTRs. The history, the redo
// stack and every file stay exactly as the command left them. Unmount waits for the slice in
// progress and skips the rest.
import { Worker } from 'node:worker_threads'
import type { Channel } from '../fuse/channel.js'
import { ENTRY_OUT, FATTR, GETATTR_FH, Op, OUT_HEADER } from '../fuse/kernel.js'
import type { Node } from '../fuse/nodes.js'
import type { FuseOps } from '../fuse/ops.js'
import { putEntry, type Request } from '../fuse/wire.js'
import { wire } from '../fuse/context.js'
import { depth, join } from '../paths/paths.js'
import { resolvedType, View } from '../overlay/view.js'
import type { Session } from '../session/session.js'
import type { Entry } from '../store/entries.js'

const SLICE = 256

/** The layers of the view before a change (the head copied: a restore changes it in place). */
export type Before = Array<Map<string, Entry>>

export class WatcherEvents {
  private readonly worker: Worker
  private readonly started: Promise<void>
  private next = 0
  private readonly waiting = new Map<number, () => void>()
  private last: Promise<void> = Promise.resolve()
  private closed = false
  private skipping = false
  /** While the worker removes names: those names, the view they were in, and the kernel's nodes by inode. */
  private removing: { paths: Set<string>, old: View, byIno: Map<number, Node> | null } | null = null

  constructor (private readonly ch: Channel, private readonly ops: FuseOps, private readonly session: Session, private readonly workspace: string) {
    this.worker = new Worker(new URL('./touch-worker.js', import.meta.url))
    this.worker.unref()
    let ready = (): void => {}
    this.started = new Promise((resolve) => { ready = resolve })
    this.worker.on('message', (m: { tid?: number, id?: number }) => {
      if (m.tid !== undefined) {
        // The worker thread's id is the pid field of the FUSE requests it causes.
        this.ch.ownPid = m.tid
        ready()
        return
      }
      this.waiting.get(m.id!)?.()
      this.waiting.delete(m.id!)
    })
    // A worker that cannot run (no /proc/thread-self) only costs the watchers their events.
    this.worker.on('error', (err) => {
      process.stderr.write(`cpfs daemon: file watchers will not hear of rewinds: ${err.message}\n`)
      this.closed = true
      ready()
      for (const done of this.waiting.values()) done()
      this.waiting.clear()
    })
    ch.ownRequests = (req) => this.answer(req)
  }

  /** Answer one of the worker's requests without recording anything; false: the usual handler. */
  private answer (req: Request): boolean {
    switch (req.opcode) {
      case Op.UNLINK:
      case Op.RMDIR:
        this.ch.error(req, 0)
        return true
      case Op.SETATTR:
        // The bodies of SETATTR and GETATTR keep the file handle at the same offset.
        req.buf.writeUInt32LE(req.buf.readUInt32LE(req.body) & FATTR.FH ? GETATTR_FH : 0, req.body)
        req.opcode = Op.GETATTR
        return false
      case Op.LOOKUP: return this.lookupRemoved(req)
      default:
        return false
    }
  }

  /**
   * The worker looks up a name it is about to remove: answer with the entry as it was (nobody
   * else ever sees it). The kernel's node for it, if it has one, or a new
   * one — unless the kernel knows that inode under another name now (then no event).
   */
  private lookupRemoved (req: Request): boolean {
    const rm = this.removing
    if (!rm) return false
    let path: string
    try {
      path = join(this.ops.nodes.path(req.nodeid), req.cstring(req.body).s)
    } catch {
      return false
    }
    const r = rm.paths.has(path) ? rm.old.resolve(path) : null
    if (r === null) return false
    const a = this.session.overlay.attrOf(r)
    if (!rm.byIno) {
      rm.byIno = new Map()
      for (const n of this.ops.nodes.all()) rm.byIno.set(n.ino, n)
    }
    const known = rm.byIno.get(a.ino)
    if (known && known.path !== null && known.path !== path) return false
    const node = this.ops.nodes.remember(a.ino, path)
    rm.byIno.set(a.ino, node)
    // The name is never cached (others look it up again and get ENOENT); the attributes are, a
    // little, for the permission checks of the worker's walk below a removed directory.
    putEntry(this.ch.out, OUT_HEADER, node.id, 0, 0, 10, wire(a))
    this.ch.send(req, ENTRY_OUT)
    return true
  }

  /** The view's layers now, before a change the daemon makes on its own. */
  snapshot (): Before {
    const head = this.session.headLayer
    return this.session.history.expand(this.session.meta.stack).map(id => id === head ? new Map(this.session.overlay.head) : this.session.history.layers.get(id)!)
  }

  /**
   * The view changed from `before` at the touched paths (and the kernel's caches were
   * invalidated): queue the removals and touches that tell the watchers.
   */
  changed (touched: Set<string>, before: Before): void {
    if (this.closed) return
    let old: View | null = null
    const oldView = (): View => (old ??= View.build(this.session.lower, before))
    const gone: string[] = []
    const present: string[] = []
    const below = (v: View, dir: string, out: string[]): void => {
      for (const name of v.readdir(dir)) {
        const q = join(dir, name)
        const r = v.resolve(q)
        if (!r || touched.has(q)) continue // touched paths are handled on their own
        out.push(q)
        if (resolvedType(r) === 'd') below(v, q, out)
      }
    }
    this.last = this.last.then(async () => {
      if (this.closed || this.skipping) return
      const now = this.session.overlay.view
      for (const p of touched) {
        if (p === '/') continue
        const was = oldView().resolve(p)
        const is = now.resolve(p)
        if (is) {
          present.push(p)
          if (!was && resolvedType(is) === 'd') below(now, p, present)
        } else if (was) {
          gone.push(p)
          if (resolvedType(was) === 'd') below(oldView(), p, gone)
        }
      }
      if (gone.length) {
        this.removing = { paths: new Set(gone), old: oldView(), byIno: null }
        try {
          await this.slices('remove', gone.sort((x, y) => depth(y) - depth(x)))
        } finally {
          this.removing = null
        }
      }
      await this.slices('touch', present.sort())
    }).catch((err) => {
      process.stderr.write(`cpfs daemon: could not tell file watchers of a change: ${err?.message ?? err}\n`)
    })
  }

  /** In slices, so that an unmount waits for one slice at most (drain() skips the rest). */
  private async slices (op: 'touch' | 'remove', paths: string[]): Promise<void> {
    for (let i = 0; i < paths.length && !this.closed && !this.skipping; i += SLICE) await this.run(op, paths.slice(i, i + SLICE))
  }

  /** One message to the worker: it does these paths, then answers. */
  private async run (op: 'touch' | 'remove', paths: string[]): Promise<void> {
    await this.started
    if (this.closed || paths.length === 0) return
    const id = this.next++
    await new Promise<void>((resolve) => {
      this.waiting.set(id, resolve)
      this.worker.postMessage({ id, op, paths: paths.map(p => this.workspace + p) })
    })
  }

  /**
   * Before unmounting: skip the touches still queued and wait for the slice in progress (the
   * worker must not hold a file in the mount while it is unmounted).
   */
  async drain (): Promise<void> {
    this.skipping = true
    try {
      await this.last
    } finally {
      this.skipping = false
    }
  }

  async close (): Promise<void> {
    await this.drain()
    this.closed = true
    await this.worker.terminate()
  }
}
