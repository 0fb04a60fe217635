// The control socket: a Unix socket in the workspace's cpfs directory (mode 0600, in a 0700
// directory), one JSON request per connection, one JSON reply. The daemon answers with the
// result or with a CpfsError's code, message and hint, so the CLI prints the same one-line
// error whichever process found it. A request with `progress: true` (the CLI on a terminal)
// gets progress lines, {"progress": ProgressEvent}, before its reply; an older daemon ignores
// the flag and sends the reply alone. A request with `ack: true` gets {"ack": true} as soon as
// the daemon has read it, so that a caller can time out a stopped daemon without timing out
// a long command (and without a ping on a second connection first).
//
// `Commands` is the one table of what the daemon answers: each command's arguments and
// result. The client (control/client.ts, control/mounted.ts), the daemon's handlers
// (daemon/commands.ts), the API and the CLI are all typed by it, so a command changed in one
// place and not another does not compile. Only types are imported here: the mounted path
// (control/mounted.ts) must stay as light as node starting.
import type { WatchInfo, WatchStatus } from '../store/underneath.js'
import type { OpStats } from '../fuse/stats.js'
import type { Blame } from '../reports/blame.js'
import type { StepReport } from '../reports/step-report.js'
import type { CommandChanges } from '../reports/by-command.js'
import type { StepOptions, StepRecord } from '../session/steps.js'
import type { StepListed } from '../reports/step-list.js'
import type { StepUndone } from '../session/undo-step.js'
import type { Change } from '../reports/changes.js'
import type { RewindPreview } from '../reports/preview.js'
import type { PlanSummary } from '../plans/finish.js'
import type { ProgressEvent } from '../progress.js'
import type { TurnInfo } from '../session/reports.js'
import type { BranchInfo } from '../session/branch-log.js'
import type { SessionStatus } from '../session/session.js'
import type { MemoryBudgets } from '../store/memory.js'
import type { MergeResult } from '../merge/run.js'
import type { ImportResult, SandboxRun } from '../merge/import-sandbox.js'
import type { Remote } from '../remote/config.js'
import type { PushResult } from '../remote/push.js'
import type { PullResult } from '../remote/pull.js'

/** A read-only view of a turn the daemon serves (daemon/view-mounts.ts). */
export interface ViewInfo {
  /** The turn's number on its line (the head's stack, or its branch). */
  turn: number
  /** The turn as it can be named again: T, bN:T, or bN (a branch's tip). */
  ref: string
  /** The tree at the turn's start (`cpfs view T`) or at its end (what bisect judges). */
  at: 'start' | 'end'
  path: string
  openedAt: number
  /** The turn's message, prompt or id ('' when none). */
  label: string
}

/** What the daemon reports of its mount (`status`). */
export interface DaemonStatus extends SessionStatus {
  mounted: true
  pid: number
  ops: OpStats
  /** FUSE nodes the kernel holds. */
  nodes: number
  underneath: WatchStatus | WatchInfo
  /** The daemon's memory: what it uses (process.memoryUsage), its budgets, and what its caches hold. */
  memory: MemoryStatus
}

export interface MemoryStatus {
  usage: { rss: number, heapTotal: number, heapUsed: number, external: number, arrayBuffers: number }
  budgets: MemoryBudgets
  /** Bytes held now: the chunk read cache, chunks queued for a batch, chunks in flight to LevelDB, written bytes not yet in a batch, written chunks' buffers kept for reuse. */
  held: { chunkCache: number, pending: number, inflight: number, dirty: number, chunkBuffers: number }
}

/** What a turn number change did (rewind, undo, redo): the head now, and how many turns were dropped. */
export interface StackMoved {
  head: number
  dropped?: number
}

/** What `unmount` did: applied to the real directory (with its plan's summary) or set aside. */
export interface UnmountResult {
  applied: boolean
  summary: PlanSummary | null
  /** With --discard: turns set aside, kept as a branch (cpfs redo brings them back). */
  discarded?: number
  /**
   * Set when no daemon served the workspace: 'stale' (a mount whose daemon was gone, now
   * removed) or 'offline' (not mounted). The pending turns (a daemon stopped without applying)
   * were then applied, or set aside with --discard; `pending` says how many.
   */
  notMounted?: 'stale' | 'offline'
  pending?: number
}

/** What turn `spec` changed (a number, an id, or a range A..B): `diff`. */
export interface DiffResult {
  a: number
  b: number
  changes: Change[]
}

/** The table: command name → arguments (undefined: none) → result. */
export interface Commands {
  ping: { args: undefined, result: { pid: number } }
  status: { args: undefined, result: DaemonStatus }
  'reset-stats': { args: undefined, result: null }
  turn: { args: { message?: string, prompt?: string, id?: string }, result: { head: number } }
  /** `lines`: count inserted and deleted lines; `paths`: list at most this many paths per turn. */
  log: { args: { lines?: boolean, paths?: number }, result: TurnInfo[] }
  ids: { args: undefined, result: string[] }
  branches: { args: undefined, result: BranchInfo[] }
  rewind: { args: { turn: string }, result: StackMoved }
  undo: { args: undefined, result: StackMoved }
  redo: { args: { branch?: string } | undefined, result: StackMoved }
  fork: { args: { turn: string, dest: string }, result: { turn: number, dest: string, summary: PlanSummary } }
  /** Send the history to a remote; `env`: the caller's AWS variables (remote/s3.ts). */
  push: { args: { remote: Remote, force: boolean, env: Record<string, string> }, result: PushResult }
  /** The remote's new turns into the store, as branches (remote/pull.ts). */
  pull: { args: { remote: Remote, env: Record<string, string>, full?: boolean }, result: PullResult }
  restore: { args: { turn: string, paths: string[] }, result: { turn: number, paths: string[] } }
  diff: { args: { spec?: string, patches?: boolean, paths?: string[] }, result: DiffResult }
  /** Every turn that changed `path` (a workspace path, '/a/b'), and who changed it. */
  blame: { args: { path: string }, result: Blame }
  'preview-rewind': { args: { turn: string }, result: RewindPreview }
  /** Steps (session/steps.ts): begin, end, what one changed, the list, undo one. */
  'step-begin': { args: StepOptions, result: StepRecord }
  'step-end': { args: { ref?: string }, result: StepRecord }
  /** What turns changed, grouped by the process that changed each path (`diff --by-command`). */
  'diff-by-command': { args: { spec?: string }, result: { a: number, b: number, commands: CommandChanges[] } }
  /** End the open steps an agent's session began (a new prompt, the agent stopped). */
  'step-end-session': { args: { session: string }, result: { ended: number } }
  'step-show': { args: { ref: string }, result: StepReport }
  steps: { args: { last?: number }, result: StepListed[] }
  'undo-step': { args: { ref: string, force?: boolean, dryRun?: boolean }, result: StepUndone }
  unmount: { args: { discard?: boolean, force?: boolean }, result: UnmountResult }
  /** The inverse of turn `turn`'s change, as a new turn (merge/run.ts). */
  revert: { args: { turn: string, dryRun?: boolean }, result: MergeResult }
  /** Branch `branch`'s work brought into the head, as a new turn (merge/run.ts). */
  merge: { args: { branch: string, dryRun?: boolean }, result: MergeResult }
  /** A sandboxed run starts (sandbox-branch.ts): the layers the real directory holds, its base. */
  'sandbox-start': { args: undefined, result: { applied: number[] } }
  /** A sandboxed run ended: copy its work into this store as a branch (merge/import-sandbox.ts). */
  'import-sandbox': { args: SandboxRun, result: ImportResult }
  /** A read-only mount of the tree at `turn` (its start; with `end`, its end) at `path` (absolute; default: a fresh directory). */
  'view-open': { args: { turn: string, path?: string, end?: boolean }, result: ViewInfo }
  /** Close the view at `path` (absolute), or every view: the ones closed; `lazy` detaches busy ones. */
  'view-close': { args: { path?: string, lazy?: boolean } | undefined, result: ViewInfo[] }
  views: { args: undefined, result: ViewInfo[] }
}

export type CommandName = keyof Commands
export type ArgsOf<C extends CommandName> = Commands[C]['args']
export type ResultOf<C extends CommandName> = Commands[C]['result']

/** One request on the socket. */
export interface Request<C extends CommandName = CommandName> {
  cmd: C
  args?: ArgsOf<C>
  progress?: boolean
  ack?: boolean
}

/** The daemon's side of the table: one handler per command. */
export type Handlers = { [C in CommandName]: (args: ArgsOf<C>) => Promise<ResultOf<C>> | ResultOf<C> }

export interface ProgressLine {
  progress: ProgressEvent
}

export type Reply =
  | { ok: true, result: unknown }
  | { ok: false, code: string, message: string, hint?: string }
