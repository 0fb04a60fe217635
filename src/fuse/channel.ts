// The /dev/fuse channel: requests in, replies out, on the JavaScript thread. The descriptor is
// non-blocking and watched by libuv (the addon's pollStart); on each wake-up the addon reads
// every request that is ready into one buffer (readBatch), and each is dispatched in order to
// its handler, which replies synchronously or, for durability waits, later. Replies are one
// write(2) each (the kernel takes one reply per write). Notifications (cache invalidation)
// go out from a worker thread: the kernel may block such a write on a directory lock held by
// a request that is waiting for this very thread.
import { constants as osConstants } from 'node:os'
import { loadNative, native } from '../native/index.js'
import { Op, OUT_HEADER, OP_NAMES, align8 } from './kernel.js'
import { Request, putOutHeader } from './wire.js'
import { toErrno } from './errno.js'
import { newStats, type OpStats } from './stats.js'

/** What the kernel may send at most: max_write of data plus headers, or a 64 KiB xattr. */
export const MAX_WRITE = 1024 * 1024
const MIN_FREE = MAX_WRITE + 64 * 1024
const READ_BUF = 4 * MIN_FREE
/** Requests handled per wake-up before giving the event loop a turn (timers, control socket). */
const BATCH = 64
/** Microseconds to wait for the next request before sleeping (0: never spin), and how many batches one wake-up may serve. */
const SPIN_US = Number(process.env.CPFS_SPIN_US ?? 50)
const SPIN_ROUNDS = 256

export type Handler = (req: Request, ch: Channel) => void

const ERRNO = osConstants.errno as Record<string, number>

/** An expected failure: a filesystem error with an errno name (ENOENT, EEXIST...). */
function isErrnoError (err: unknown): boolean {
  const code = (err as any)?.code
  return typeof code === 'string' && ERRNO[code] !== undefined
}

export class Channel {
  readonly fd: number
  /** The reply scratch buffer: handlers encode their reply body at OUT_HEADER and call send(). */
  readonly out = Buffer.allocUnsafe(MAX_WRITE + 4096)
  private readonly inBuf = Buffer.allocUnsafe(READ_BUF)
  /** Header scratch for error and data replies (every write is synchronous, so one is enough). */
  private readonly head = Buffer.allocUnsafe(OUT_HEADER)
  private readonly nat = loadNative()
  private readonly handlers: Array<Handler | undefined> = []
  private poll: object | null = null
  private ended = false
  /** Requests answered later (flush, fsync): unique → reply once. */
  private readonly waiting = new Map<bigint, Request>()
  stats: OpStats = newStats()
  onEnd: (why: string) => void = () => {}
  onError: (err: unknown, req: Request) => void = () => {}

  constructor (fd: number) {
    this.fd = fd
  }

  on (op: Op, h: Handler): void {
    this.handlers[op] = h
  }

  start (): void {
    this.poll = native.pollStart(this.fd, (status: number) => this.readable(status))
  }

  stop (): void {
    if (this.poll) native.pollStop(this.poll)
    this.poll = null
  }

  get closed (): boolean {
    return this.ended
  }

  private readable (status: number): void {
    if (this.ended) return
    // An error status (the kernel reports POLLERR once the connection is gone): a read tells.
    void status
    let n = this.nat.readBatch(this.fd, this.inBuf, MIN_FREE, BATCH)
    for (let round = 0; ; round++) {
      if (n === -103) return this.end('the connection was aborted (/sys/fs/fuse/connections/N/abort)')
      if (n < 0) return this.end('the mount was unmounted')
      let off = 0
      for (let i = 0; i < n; i++) {
        const req = new Request(this.inBuf, off)
        off += align8(req.len)
        this.dispatch(req)
      }
      // Busy polling: the caller that was just answered usually sends its next request within
      // microseconds; waiting for it here is cheaper than sleeping in the event loop and paying
      // a CPU wake-up for it. Not while a reply waits for the store (its completion comes
      // through the event loop), and never for long (timers and the control socket wait too).
      if (n === 0 || SPIN_US === 0 || this.waiting.size > 0 || round >= SPIN_ROUNDS) return
      n = this.nat.readBatch(this.fd, this.inBuf, MIN_FREE, BATCH, SPIN_US)
    }
  }

  private end (why: string): void {
    if (this.ended) return
    this.ended = true
    this.stop()
    this.onEnd(why)
  }

  /**
   * Requests from one of the daemon's own threads, answered before the handlers see them:
   * true when it answered (daemon/watchers.ts: the requests its worker makes to raise inotify
   * events change nothing). null: every request goes to its handler.
   */
  ownRequests: ((req: Request) => boolean) | null = null
  /** Its pid: only requests with it go to ownRequests. 0: none. */
  ownPid = 0

  /**
   * Told whose request is being served: `caller` is the requesting thread's id while its
   * handler runs, 0 otherwise (who changed what: session/attribution.ts).
   */
  callers: { caller: number } | null = null

  /** Handle one request (the read loop calls this; tests call it with crafted requests). */
  dispatch (req: Request): void {
    if (this.ownPid !== 0 && req.pid === this.ownPid && this.ownRequests?.(req)) return
    const name = OP_NAMES[req.opcode] ?? `op${req.opcode}`
    const t0 = performance.now()
    const h = this.handlers[req.opcode]
    if (!h) {
      if (req.opcode !== Op.FORGET && req.opcode !== Op.BATCH_FORGET && req.opcode !== Op.INTERRUPT) this.error(req, 38 /* ENOSYS */)
    } else {
      const callers = this.callers
      if (callers !== null) callers.caller = req.pid
      try {
        h(req, this)
      } catch (err) {
        if ((err as any)?.code === 'ENOSPC' && this.retryOnSpace(req, err)) return
        // Anything unexpected becomes an error for this request only (EIO unless it names an
        // errno), with one line in the daemon's log; the daemon goes on.
        if (!isErrnoError(err)) this.onError(err, req)
        this.error(req, toErrno(err))
      } finally {
        if (callers !== null) callers.caller = 0
      }
    }
    const ms = performance.now() - t0
    this.stats.counts[name] = (this.stats.counts[name] ?? 0) + 1
    this.stats.ms[name] = (this.stats.ms[name] ?? 0) + ms
    const us = ms * 1000
    this.stats.hist[us < 1 ? 0 : Math.min(23, Math.floor(Math.log2(us)) + 1)]++
  }

  /** For a refusal of the store's space check: settles when freed space is back on its disk (Session.spaceComing), or null. */
  spaceComing: (refusal: unknown) => Promise<void> | null = () => null
  private readonly retried = new WeakSet<Request>()

  /**
   * A request refused for lack of space while freed space is on its way back runs again once
   * it is (once): a copy, since the read buffer holds the next batch by then. Handlers check
   * space before they change anything, so the first try left nothing behind.
   */
  private retryOnSpace (req: Request, refusal: unknown): boolean {
    const comes = this.retried.has(req) ? null : this.spaceComing(refusal)
    if (!comes) return false
    const again = new Request(Buffer.from(req.buf.subarray(req.off, req.off + req.len)), 0)
    this.retried.add(again)
    this.waiting.set(req.unique, again)
    void comes.then(() => {
      if (this.waiting.get(req.unique) !== again || this.ended) return // interrupted meanwhile
      this.waiting.delete(req.unique)
      this.dispatch(again)
    })
    return true
  }

  /** Send a reply whose body (bodyLen bytes) the handler put in `out` at OUT_HEADER. */
  send (req: Request, bodyLen: number): void {
    if (this.waiting.has(req.unique)) this.waiting.delete(req.unique)
    putOutHeader(this.out, OUT_HEADER + bodyLen, 0, req.unique)
    this.write(this.out, OUT_HEADER + bodyLen)
  }

  /** Reply with a header and an outside buffer (READ data, xattr values). */
  sendData (req: Request, data: Buffer, len: number): void {
    if (this.ended) return
    putOutHeader(this.head, OUT_HEADER + len, 0, req.unique)
    try {
      this.nat.writeReply2(this.fd, this.head, data, len)
    } catch (err: any) {
      this.writeFailed(err)
    }
  }

  /** An error reply (errno as a positive number). */
  error (req: Request, errno: number): void {
    if (this.waiting.has(req.unique)) this.waiting.delete(req.unique)
    putOutHeader(this.head, OUT_HEADER, -errno, req.unique)
    this.write(this.head, OUT_HEADER)
  }

  /** Run an asynchronous wait (durability) and reply when it settles (null: done already); INTERRUPT may cut it short. */
  later (req: Request, p: Promise<void> | null, name: string): void {
    if (p === null) return this.error(req, 0)
    const t0 = performance.now()
    this.waiting.set(req.unique, req)
    p.then(
      () => { if (this.waiting.has(req.unique)) this.error(req, 0) },
      (err) => { if (this.waiting.has(req.unique)) this.error(req, toErrno(err)) }
    ).finally(() => {
      this.stats.ms[name] = (this.stats.ms[name] ?? 0) + (performance.now() - t0)
    })
  }

  /**
   * Reply once `p` settles (null: now): `encode` then puts the body in `out` and returns its
   * length (namespace changes answer once they are durable, see Session.durable).
   */
  after (req: Request, p: Promise<void> | null, encode: () => number): void {
    if (p === null) return this.send(req, encode())
    this.waiting.set(req.unique, req)
    p.then(
      () => {
        if (!this.waiting.has(req.unique)) return
        let len: number
        try {
          len = encode()
        } catch (err) {
          return this.error(req, toErrno(err))
        }
        this.send(req, len)
      },
      (err) => { if (this.waiting.has(req.unique)) this.error(req, toErrno(err)) }
    )
  }

  /** INTERRUPT: a pending wait for `unique` ends now with EINTR; unknown ones are done already. */
  interrupt (unique: bigint): void {
    const req = this.waiting.get(unique)
    if (req) this.error(req, 4 /* EINTR */)
  }

  private write (b: Buffer, len: number): void {
    if (this.ended) return
    try {
      this.nat.writeReply(this.fd, b, len)
    } catch (err: any) {
      this.writeFailed(err)
    }
  }

  private writeFailed (err: any): void {
    // ENOENT: the request was interrupted and the kernel no longer waits for this reply.
    if (err?.code === 'ENOENT') return
    if (err?.code === 'ENODEV') return this.end('the mount was unmounted or its connection aborted')
    throw err
  }
}
