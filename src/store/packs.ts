// Pack files: where chunk bytes live (issue 21; docs/decisions.md "Chunk bytes in pack files").
// LevelDB keeps only a small record per chunk (keys.ts refKey: pack, offset, length); the bytes
// are appended once to the open pack, in order, and never moved by LevelDB's compactions.
//
// In the store directory, packs/ holds:
//   <id>.open                  the pack being written (at most one per open store)
//   <id>-<sha256>.pack         sealed packs: never written again. The hash is SHA-256 over the
//                              file header and every record header (each holds its data's
//                              SHA-256): a name that says what the pack holds, checkable by
//                              anyone who has the file, and the same wherever it is copied.
// The id (10 digits) is what LevelDB's records name, so sealing (a rename) touches no record.
//
// Durability: an append is a write(2) at the end of the file, done before the batch that refers
// to the chunk is logged or handed to LevelDB: kill -9 leaves the bytes in the page cache, so no
// reference ever outlives its bytes. `sync` (fdatasync of every pack written since the last one,
// and of the directory when a pack was created or renamed) runs before every synced LevelDB
// batch (Store.batch), so what a synced batch refers to is on the disk before the batch is.
// A pack left open by a crash is scanned when the store opens: a torn record at its end is cut
// off (nothing can refer to it: its write never returned), and the pack is sealed.
import * as fs from 'node:fs'
import { createHash, type Hash } from 'node:crypto'
import { join } from 'node:path'
import { CpfsError } from '../errors.js'
import { PACK_HEADER, RECORD_HEADER, packHeader, recordHeader, scanPack, type ChunkRef, type PackScan } from './pack-format.js'

/** A pack is sealed once it holds this many bytes (and when the store closes). */
export const SEAL_AT = 16 * 1024 * 1024
/** Sealed packs kept open for reading at once (a big store has thousands of packs). */
const OPEN_FDS = 64

/** Two buffers a record: within IOV_MAX (1024) on Linux. */
const MAX_RECORDS_PER_WRITE = 512

const OPEN_RE = /^(\d{10})\.open$/
const SEALED_RE = /^(\d{10})-([0-9a-f]{64})\.pack$/

export function packId (id: number): string {
  return id.toString().padStart(10, '0')
}

interface Active {
  id: number
  fd: number
  size: number
  /** Over the file header and the record headers so far: the sealed pack's name. */
  names: Hash
}

export class PackSet {
  readonly dir: string
  /** File name of every pack, by id. */
  private readonly names = new Map<number, string>()
  private readonly fds = new Map<number, number>()
  private active: Active | null = null
  /** Packs written since the last sync (fdatasync before the next synced batch). */
  private readonly unsynced = new Set<number>()
  /** A pack was created, renamed or removed since the last sync: the directory is fsynced too. */
  private dirChanged = false
  /** This session's packs: chunks appended, and of those, freed again (see reclaimable). */
  private readonly appended = new Map<number, number>()
  private readonly freed = new Map<number, number>()
  private nextId = 1
  /** Packs being fdatasynced: their fds stay open. */
  private readonly syncing = new Set<number>()
  /** fdatasyncs started when a pack was sealed, not yet done (sync waits for them). */
  private readonly sealSyncs = new Set<Promise<void>>()

  private constructor (dir: string) {
    this.dir = dir
  }

  /** The packs of the store at storePath (packs/ is made if missing); open ones are recovered and sealed. */
  static open (storePath: string): PackSet {
    const p = new PackSet(join(storePath, 'packs'))
    fs.mkdirSync(p.dir, { recursive: true, mode: 0o700 })
    for (const name of fs.readdirSync(p.dir)) {
      const m = SEALED_RE.exec(name) ?? OPEN_RE.exec(name)
      if (!m) continue
      const id = Number(m[1])
      p.names.set(id, name)
      p.nextId = Math.max(p.nextId, id + 1)
    }
    for (const [id, name] of [...p.names]) if (OPEN_RE.test(name)) p.recover(id)
    return p
  }

  /** Ids of every pack, in order. */
  ids (): number[] {
    return [...this.names.keys()].sort((a, b) => a - b)
  }

  fileName (id: number): string | undefined {
    return this.names.get(id)
  }

  path (id: number): string {
    return join(this.dir, this.names.get(id) ?? packId(id) + '.pack')
  }

  size (id: number): number {
    if (this.active?.id === id) return this.active.size
    return fs.fstatSync(this.fd(id)).size
  }

  /** Append one chunk (its SHA-256 and bytes): written when this returns, not synced. */
  append (hash: Buffer, data: Buffer): ChunkRef {
    return this.appendAll([[hash, data]])[0]
  }

  /**
   * Append chunks in order, as few writes as the open pack and IOV_MAX allow (one per chunk
   * was a syscall per 64 KiB of a big write): every one written when this returns, not synced.
   * A write that fails leaves the pack as it was (the next append writes over its bytes).
   */
  appendAll (items: Array<[hash: Buffer, data: Buffer]>): ChunkRef[] {
    const refs: ChunkRef[] = []
    let i = 0
    while (i < items.length) {
      const a = this.active ?? this.start()
      const bufs: Buffer[] = []
      const heads: Buffer[] = []
      let bytes = 0
      // Records up to the one that reaches SEAL_AT, as for single appends.
      while (i < items.length && heads.length < MAX_RECORDS_PER_WRITE && (heads.length === 0 || a.size + bytes < SEAL_AT)) {
        const [hash, data] = items[i++]
        const head = recordHeader(hash, data.length)
        refs.push({ pack: a.id, offset: a.size + bytes + RECORD_HEADER, length: data.length })
        bufs.push(head, data)
        heads.push(head)
        bytes += head.length + data.length
      }
      writevAll(a.fd, bufs, bytes, a.size)
      for (const h of heads) a.names.update(h)
      a.size += bytes
      this.unsynced.add(a.id)
      this.appended.set(a.id, (this.appended.get(a.id) ?? 0) + heads.length)
      if (a.size >= SEAL_AT) this.seal()
    }
    return refs
  }

  /**
   * The stored bytes `ref` names (not checked: the caller hashes them), read into `into` when it
   * is big enough (a view of it is returned), else into a new buffer.
   */
  read (ref: ChunkRef, into?: Buffer): Buffer {
    const buf = into !== undefined && into.length >= ref.length ? into.subarray(0, ref.length) : Buffer.allocUnsafe(ref.length)
    let got = 0
    const fd = this.fd(ref.pack)
    while (got < ref.length) {
      const n = fs.readSync(fd, buf, got, ref.length - got, ref.offset + got)
      if (n === 0) break
      got += n
    }
    return got === ref.length ? buf : buf.subarray(0, got)
  }

  /** The record header before the data at `ref` (fsck checks it names the same chunk). */
  readHeader (ref: ChunkRef): Buffer {
    const buf = Buffer.alloc(RECORD_HEADER)
    const n = ref.offset >= RECORD_HEADER ? fs.readSync(this.fd(ref.pack), buf, 0, RECORD_HEADER, ref.offset - RECORD_HEADER) : 0
    return buf.subarray(0, n)
  }

  /** The pack being written, if any (never deleted or repacked). */
  activeId (): number | undefined {
    return this.active?.id
  }

  has (id: number): boolean {
    return this.names.has(id)
  }

  /**
   * Make every pack written so far durable: before a synced LevelDB batch that refers to them.
   * fdatasync runs in libuv's pool, so the mount keeps answering meanwhile.
   */
  async sync (): Promise<void> {
    const ids = [...this.unsynced]
    this.unsynced.clear() // appends from now on go with the next sync
    const dir = this.dirChanged
    this.dirChanged = false
    const sealed = [...this.sealSyncs]
    try {
      // All at once: the disk gets every pack's writeback together, as one file's fsync would.
      await Promise.all(ids.filter(id => this.names.has(id)).map(id => this.fdatasync(id)).concat(sealed))
      if (dir) {
        const fd = fs.openSync(this.dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
        try { fs.fsyncSync(fd) } finally { fs.closeSync(fd) }
      }
    } catch (err) {
      for (const id of ids) this.unsynced.add(id)
      if (dir) this.dirChanged = true
      throw err
    }
  }

  /** fdatasync these packs now (those a replayed write-ahead log refers to). */
  syncNow (ids: number[]): void {
    for (const id of ids) if (this.names.has(id)) fs.fdatasyncSync(this.fd(id))
  }

  /**
   * Seal the open pack, if any: renamed to its content name, never written again. Its
   * fdatasync starts now, in the background: a big write's packs reach the disk while the
   * next ones fill, and the fsync at its end waits only for the rest (sync).
   */
  seal (background = true): void {
    const a = this.active
    if (!a) return
    this.active = null
    const name = `${packId(a.id)}-${a.names.digest('hex')}.pack`
    fs.renameSync(join(this.dir, this.names.get(a.id)!), join(this.dir, name))
    this.names.set(a.id, name)
    this.dirChanged = true
    if (!background || !this.unsynced.delete(a.id)) return
    const p: Promise<void> = this.fdatasync(a.id).catch((err) => {
      if (this.names.has(a.id)) this.unsynced.add(a.id) // the next sync tries again
      throw err
    }).finally(() => this.sealSyncs.delete(p))
    p.catch(() => {}) // a sync that was waiting for it reports the error
    this.sealSyncs.add(p)
  }

  /** fdatasync pack id in libuv's pool; its fd stays open meanwhile. */
  private async fdatasync (id: number): Promise<void> {
    const fd = this.fd(id)
    this.syncing.add(id)
    try {
      await new Promise<void>((resolve, reject) => fs.fdatasync(fd, err => err ? reject(err) : resolve()))
    } finally {
      this.syncing.delete(id)
    }
  }

  /** A chunk of pack `id` appended by this session was freed (its reference deleted). */
  noteFreed (id: number): void {
    if (this.appended.has(id)) this.freed.set(id, (this.freed.get(id) ?? 0) + 1)
  }

  /** This session's packs whose every chunk was freed again: nothing can refer to them. */
  reclaimable (): number[] {
    return [...this.appended].filter(([id, n]) => this.freed.get(id) === n).map(([id]) => id)
  }

  /** Delete a pack (nothing may refer to it any more: the caller made sure of that, durably). */
  remove (id: number): void {
    const name = this.names.get(id)
    if (name === undefined) return
    if (this.active?.id === id) this.active = null
    const fd = this.fds.get(id)
    if (fd !== undefined) fs.closeSync(fd)
    this.fds.delete(id)
    this.names.delete(id)
    this.unsynced.delete(id)
    this.appended.delete(id)
    this.freed.delete(id)
    fs.rmSync(join(this.dir, name), { force: true })
    this.dirChanged = true
  }

  /** Scan a pack's records (fsck, gc, recovery). */
  scan (id: number): PackScan {
    const fd = this.fd(id)
    const read = (offset: number, length: number): Buffer => {
      const b = Buffer.alloc(length)
      return b.subarray(0, fs.readSync(fd, b, 0, length, offset))
    }
    return scanPack(read, fs.fstatSync(fd).size)
  }

  /** Seal the open pack and close every file (the store closes). */
  close (): void {
    if (this.active && this.active.size > PACK_HEADER) this.seal(false) // its fd closes below
    else if (this.active) this.remove(this.active.id)
    for (const fd of this.fds.values()) fs.closeSync(fd)
    this.fds.clear()
  }

  private start (): Active {
    const id = this.nextId++
    const name = packId(id) + '.open'
    const fd = fs.openSync(join(this.dir, name), fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600)
    const head = packHeader(id)
    fs.writeSync(fd, head, 0, head.length, 0)
    this.names.set(id, name)
    this.fds.set(id, fd)
    this.dirChanged = true
    this.unsynced.add(id)
    this.active = { id, fd, size: head.length, names: createHash('sha256').update(head) }
    return this.active
  }

  /**
   * A pack a crash left open: cut off a torn record at its end, then seal it. Bytes after the
   * last intact record were never part of an append that returned, so nothing refers to them.
   */
  private recover (id: number): void {
    const path = join(this.dir, this.names.get(id)!)
    const s = this.scan(id)
    if (!s.header && fs.statSync(path).size > PACK_HEADER) return // damage, not a crash: left for fsck to report
    if (s.records.length === 0) {
      this.remove(id) // no whole record: nothing can refer to it
      return
    }
    if (s.stopped) fs.truncateSync(path, s.end)
    const names = createHash('sha256').update(packHeader(s.header!.id, s.header!.created))
    const fd = this.fd(id)
    for (const r of s.records) {
      const b = Buffer.alloc(RECORD_HEADER)
      fs.readSync(fd, b, 0, RECORD_HEADER, r.offset - RECORD_HEADER)
      names.update(b)
    }
    fs.fdatasyncSync(fd)
    this.active = { id, fd, size: s.end, names }
    this.seal(false) // synced just above
  }

  private fd (id: number): number {
    const open = this.fds.get(id)
    if (open !== undefined) {
      // Most recently used last: the first one is closed when too many are open.
      this.fds.delete(id)
      this.fds.set(id, open)
      return open
    }
    const name = this.names.get(id)
    if (name === undefined) throw new CpfsError('STORE_CORRUPT', `pack ${packId(id)} is missing from ${this.dir}`, 'run cpfs fsck to see what is lost')
    const fd = fs.openSync(join(this.dir, name), OPEN_RE.test(name) ? fs.constants.O_RDWR : fs.constants.O_RDONLY)
    this.fds.set(id, fd)
    for (const [old, ofd] of this.fds) {
      if (this.fds.size <= OPEN_FDS) break
      if (old === this.active?.id || this.unsynced.has(old) || this.syncing.has(old)) continue
      fs.closeSync(ofd)
      this.fds.delete(old)
    }
    return fd
  }
}

/** Write every byte of bufs (total bytes) at pos, going on after a short write. */
function writevAll (fd: number, bufs: Buffer[], total: number, pos: number): void {
  let done = fs.writevSync(fd, bufs, pos)
  while (done < total) {
    const rest: Buffer[] = []
    let skip = done
    for (const b of bufs) {
      if (skip >= b.length) { skip -= b.length; continue }
      rest.push(skip > 0 ? b.subarray(skip) : b)
      skip = 0
    }
    done += fs.writevSync(fd, rest, pos + done)
  }
}
