// Progress of long work (applying a plan, a fork, pruning): the code doing the work reports
// phases and counts here; whoever asked for the work decides where they go. The CLI renders
// them on a terminal (cli/progress.ts); the daemon streams them to the CLI over the control
// socket. Without a listener, nothing is computed beyond a counter.
//
// The listener travels with the request (AsyncLocalStorage), not through every signature:
// the same plan code runs in the CLI (offline) and in the daemon (mounted), and the daemon
// may serve other requests meanwhile, which must not report into this one.
import { AsyncLocalStorage } from 'node:async_hooks'

export interface ProgressEvent {
  /** What is being done: "preparing", "applying", "verifying", ... */
  phase: string
  /** What done and total count: "files", "paths", "chunks", ... */
  unit: string
  done: number
  /** Absent when the total is not known in advance. */
  total?: number
  bytes: number
  totalBytes?: number
  /** Share of the phase done (0..1) when neither total says it (a key-space scan). */
  fraction?: number
  /** The phase is over: the counts are final. */
  end?: boolean
}

export type ProgressSink = (e: ProgressEvent) => void

// One scope per process, whichever copy of this module asks: the `cpfs` command is a bundle
// that sets the listener, and the library it loads (as ES modules) reads it.
const SCOPE = Symbol.for('cpfs.progress.scope')
const scope: AsyncLocalStorage<ProgressSink> = (globalThis as any)[SCOPE] ??= new AsyncLocalStorage<ProgressSink>()

/** Run fn with progress going to sink (undefined: nowhere). */
export function withProgress<T> (sink: ProgressSink | undefined, fn: () => Promise<T>): Promise<T> {
  return sink ? scope.run(sink, fn) : fn()
}

/** The listener of the work running now, if any. */
export function progressSink (): ProgressSink | undefined {
  return scope.getStore()
}

/** Reports are sent at most this often (and at the end of each phase). */
const EVERY_MS = 100

/** One phase of the work; bytes counted deep in synchronous loops go to the one running. */
export class Phase {
  done = 0
  bytes = 0
  fraction: number | undefined
  private last = 0

  constructor (private readonly sink: ProgressSink | undefined, readonly phase: string, readonly unit: string, readonly total?: number, readonly totalBytes?: number) {
    this.emit(false)
  }

  item (n = 1): void {
    this.done += n
    this.tick()
  }

  addBytes (n: number): void {
    this.bytes += n
    this.tick()
  }

  /** Count bytes and items done since the last call in one report (absolute values). */
  set (done: number, bytes = this.bytes, fraction?: number): void {
    this.done = done
    this.bytes = bytes
    if (fraction !== undefined) this.fraction = fraction
    this.tick()
  }

  end (): void {
    if (current === this) current = undefined
    this.emit(true)
  }

  private tick (): void {
    if (!this.sink) return
    const now = Date.now()
    if (now - this.last >= EVERY_MS) this.emit(false, now)
  }

  private emit (end: boolean, now = Date.now()): void {
    if (!this.sink) return
    this.last = now
    const e: ProgressEvent = { phase: this.phase, unit: this.unit, done: this.done, bytes: this.bytes }
    if (this.total !== undefined) e.total = this.total
    if (this.totalBytes !== undefined) e.totalBytes = this.totalBytes
    if (this.fraction !== undefined) e.fraction = this.fraction
    if (end) e.end = true
    this.sink(e)
  }
}

let current: Phase | undefined

/**
 * Start a phase. It is the running one until it ends: countBytes() adds to it. Start and end
 * a phase within one synchronous stretch of code when something below it counts bytes.
 */
export function phase (name: string, unit: string, total?: number, totalBytes?: number): Phase {
  const sink = progressSink()
  const p = new Phase(sink, name, unit, total, totalBytes)
  if (sink) current = p
  return p
}

/** Bytes read or written by the running phase (no-op when none runs). */
export function countBytes (n: number): void {
  current?.addBytes(n)
}
