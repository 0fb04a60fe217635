// The daemon's own changes (rewind, redo, undo, restore, writes recorded from underneath) must
// not be hidden by the kernel's caches: every dentry is looked up again (one epoch bump), nodes
// whose path now leads to another inode lose that name, and the attributes, pages and listings
// of the touched paths and their directories are dropped. Then file watchers hear of the
// change (watchers.ts).
import type { Channel } from '../fuse/channel.js'
import type { Notifier } from '../fuse/invalidate.js'
import type { FuseOps } from '../fuse/ops.js'
import { namesOf } from '../fuse/nodes.js'
import { ancestors, baseName, belowAny, parentOf } from '../paths/paths.js'
import type { Session } from '../session/session.js'
import { inoOfKey, isInoKey } from '../store/entries.js'
import type { Before, WatcherEvents } from './watchers.js'

export class ViewInvalidation {
  /** Paths (and inode keys) the session reported changed since the last invalidation. */
  private pending: Set<string> | null = null

  constructor (
    private readonly session: Session,
    private readonly ops: FuseOps,
    private readonly notifier: Notifier,
    private readonly watch: WatcherEvents,
    private readonly ch: Channel
  ) {
    session.onViewChange = (touched) => {
      ops.viewChanged()
      this.pending ??= new Set()
      for (const p of touched) this.pending.add(p)
    }
  }

  /** Run fn (a change of the view), then invalidate what it changed, even if it failed halfway. */
  async around<T> (fn: () => Promise<T>): Promise<T> {
    const before = this.watch.snapshot()
    try {
      return await fn()
    } finally {
      await this.invalidate(before)
    }
  }

  private async invalidate (before: Before): Promise<void> {
    const keys = this.pending
    this.pending = null
    if (!keys || keys.size === 0 || this.ch.closed) return
    // Inode records (hard links) are touched by inode number: every name the kernel knows of
    // such an inode shares its node, including real names that have no entry of their own.
    const touched = new Set<string>()
    const inos = new Set<number>()
    for (const k of keys) {
      if (isInoKey(k)) inos.add(inoOfKey(k))
      else touched.add(k)
    }
    // Memoised per directory: every ancestor of every node was O(depth³) characters in a deep tree.
    const below = belowAny(touched)
    const affected = (p: string): boolean => touched.has(p) || below(p)
    // Nodes by the names the kernel knew them under, before those names are re-checked.
    const stale = new Set<number>()
    for (const n of this.ops.nodes.all()) if (inos.has(n.ino) || [...namesOf(n)].some(affected)) stale.add(n.id)
    this.notifyReplaced(affected)
    this.staleDirectories(touched, stale)
    const ov = this.session.overlay
    this.ops.nodes.revalidate((p, ino) => {
      if (!affected(p)) return true
      const r = ov.view.resolve(p)
      return r !== null && ov.attrOf(r).ino === ino
    })
    if (this.ops.negotiated.minor >= 44) this.notifier.incEpoch()
    for (const id of stale) this.notifier.invalInode(id, false)
    await this.notifier.flush()
    this.watch.changed(touched, before)
  }

  /**
   * A file the kernel knows that is now another inode: watchers of the old one get
   * IN_DELETE_SELF (NOTIFY_DELETE); watchers of directories hear of it later (watchers.ts).
   */
  private notifyReplaced (affected: (p: string) => boolean): void {
    const ov = this.session.overlay
    for (const n of this.ops.nodes.all()) {
      if (n.path === null || n.path === '/' || !affected(n.path)) continue
      const r = ov.view.resolve(n.path)
      const parent = this.ops.nodes.at(parentOf(n.path))
      if (r && parent && ov.attrOf(r).ino !== n.ino && (ov.attrOf(r).mode & 0o170000) !== 0o040000) this.notifier.deleteEntry(parent.id, n.id, baseName(n.path))
    }
  }

  /** Every directory above a touched path is stale; before protocol 7.44 (no epoch), each entry is invalidated by name. */
  private staleDirectories (touched: Set<string>, stale: Set<number>): void {
    const above = new Set<string>()
    for (const p of touched) {
      for (const a of ancestors(p)) {
        if (above.has(a)) break // and so are its own ancestors
        above.add(a)
        const d = this.ops.nodes.at(a)
        if (d) stale.add(d.id)
      }
      if (this.ops.negotiated.minor < 44) {
        const parent = p === '/' ? undefined : this.ops.nodes.at(parentOf(p))
        if (parent) this.notifier.invalEntry(parent.id, p.slice(p.lastIndexOf('/') + 1))
      }
    }
  }
}
