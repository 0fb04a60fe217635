// Reused 64 KiB buffers for written chunks. A big write fills one CHUNK_SIZE buffer per 64 KiB;
// allocated fresh each time, each is a new mapping of zeroed pages (the daemon's malloc maps
// every block of 64 KiB or more on its own, store/memory.ts), faulted in page by page and
// unmapped again when collected: measured, that doubled the time of a 256 MiB `dd` in the
// mount. A buffer comes back here once its bytes are in a pack file (ChunkStore.drain) or
// dropped (a truncate, a hole), and the next write takes it as it is, its pages mapped.
// The list is bounded by the dirty budget (what can be waiting at once) and let go after a
// quiet second, so an idle daemon keeps none of it.
import { CHUNK_SIZE } from './entries.js'

const IDLE_MS = 1000

export class ChunkBuffers {
  private readonly free: Buffer[] = []
  private readonly max: number
  private timer: NodeJS.Timeout | null = null
  private used = false

  /** keepBytes: the most this keeps for reuse (the dirty budget). */
  constructor (keepBytes: number) {
    this.max = Math.max(16, Math.ceil(keepBytes / CHUNK_SIZE))
  }

  /** A CHUNK_SIZE buffer whose bytes are whatever it last held: the caller writes all it reads. */
  take (): Buffer {
    this.used = true
    return this.free.pop() ?? Buffer.allocUnsafeSlow(CHUNK_SIZE)
  }

  /** b (from take) is no longer referenced by anyone: it may be handed out again. */
  give (b: Buffer): void {
    if (b.length !== CHUNK_SIZE || b.byteOffset !== 0 || b.buffer.byteLength !== CHUNK_SIZE) return
    if (this.free.length >= this.max) return
    this.free.push(b)
    if (!this.timer) {
      this.timer = setInterval(() => this.idle(), IDLE_MS)
      this.timer.unref()
    }
  }

  /** Buffers kept for reuse, in bytes. */
  get kept (): number {
    return this.free.length * CHUNK_SIZE
  }

  private idle (): void {
    if (this.used) {
      this.used = false
      return
    }
    this.free.length = 0
    clearInterval(this.timer!)
    this.timer = null
  }
}
