// `cpfs bisect`, as a library: find the first turn whose tree a command judges bad, as
// `git bisect run` finds a commit. Each probe runs the command in a view of the tree the turn
// left (views-api.ts: read-only, served by the mount's daemon), so the live tree is never
// touched; with `write`, in a private writable copy of that view (kernel overlayfs over the
// view, its upper layer on a tmpfs, inside a mount namespace of its own), so the command may
// build and write while neither the view nor the live tree changes.
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { where, type Target } from './api.js'
import { callDaemon } from './control/mounted.js'
import type { DiffResult, ViewInfo } from './control/protocol.js'
import { daemonUp } from './daemons.js'
import { CpfsError } from './errors.js'
import type { Change } from './reports/changes.js'
import { BisectRange, verdictOf, type Verdict } from './session/bisect-range.js'
import type { Location } from './store/locate.js'

export type { Verdict } from './session/bisect-range.js'

export interface BisectOptions extends Target {
  /** A turn whose tree is good (N, an id, bN:T). */
  good: string | number
  /** A later turn whose tree is bad (default: the head turn, judged as it is now). */
  bad?: string | number
  /** The command and its arguments (a shell line: ['sh', '-c', LINE]). */
  command: string[]
  /** Run each probe in a private writable copy of the view. */
  write?: boolean
  /** Where the command's output goes: this process's stderr (default), or nowhere. */
  output?: 'stderr' | 'ignore'
  /** Told of each probe as it ends. */
  onProbe?: (p: Probe) => void
}

/** One run of the command on the tree a turn left. */
export interface Probe {
  turn: number
  ref: string
  label: string
  verdict: Verdict
  code: number | null
  signal: string | null
}

export interface BisectTurn {
  turn: number
  ref: string
  label: string
}

export interface BisectResult {
  /** The first bad turn, or null when skipped turns leave several (see `candidates`). */
  first: BisectTurn | null
  /** The turns the first bad one is among: just `first`, or the range skips left. */
  candidates: BisectTurn[]
  /** What the first bad turn changed (as cpfs diff T --stat counts it); empty for a range. */
  changes: Change[]
  probes: Probe[]
}

const BRANCH = /^b(\d+)(?::(\d+))?$/

/** The branch a canonical ref (T, bN:T, bN) is on, or null for the head's own line. */
function branchOf (ref: string): number | null {
  const m = BRANCH.exec(ref)
  return m ? Number(m[1]) : null
}

function describeExit (p: { code: number | null, signal: string | null }): string {
  return p.signal !== null ? `was killed by ${p.signal}` : `exited ${p.code}`
}

export async function bisect (opts: BisectOptions): Promise<BisectResult> {
  if (opts.command.length === 0) throw new CpfsError('USAGE', 'no command given', 'cpfs bisect --good T --run "npm test", or -- CMD ARGS...')
  const loc = where(opts)
  if (!await daemonUp(loc)) throw new CpfsError('NOT_MOUNTED', `${loc.workspace} is not mounted, and bisect runs the command in views its mount serves`, `cpfs mount ${loc.workspace}`)
  const probes: Probe[] = []
  const labels = new Map<number, BisectTurn>()
  const run = async (ref: string): Promise<Probe> => {
    const p = await probe(loc, ref, opts)
    probes.push(p)
    labels.set(p.turn, { turn: p.turn, ref: p.ref, label: p.label })
    opts.onProbe?.(p)
    return p
  }
  // Both ends first: a search between ends that are not what they are said to be means nothing.
  const bad = await run(String(opts.bad ?? '-1'))
  const good = await run(String(opts.good))
  const line = await lineOf(loc, good, bad)
  const range = new BisectRange(good.turn, bad.turn)
  if (good.verdict !== 'good') throw new CpfsError('BISECT_GOOD', `turn ${good.ref}, given as good, is not: the command ${good.verdict === 'skip' ? 'cannot test it (exit 125)' : describeExit(good)} there`, 'pass --good a turn where the command passes')
  if (bad.verdict !== 'bad') throw new CpfsError('BISECT_BAD', `turn ${bad.ref}, given as bad, is not: the command ${bad.verdict === 'skip' ? 'cannot test it (exit 125)' : describeExit(bad)} there`, 'pass --bad a turn where the command fails; the default is the head')
  for (let t = range.next(); t !== null; t = range.next()) range.record(t, (await run(line(t))).verdict)
  const outcome = range.outcome()
  const turnOf = (t: number): BisectTurn => labels.get(t) ?? { turn: t, ref: line(t), label: '' }
  if ('first' in outcome) {
    const first = turnOf(outcome.first)
    const diff: DiffResult = await callDaemon(loc, { cmd: 'diff', args: { spec: first.ref, patches: false } })
    return { first, candidates: [first], changes: diff.changes, probes }
  }
  const candidates: BisectTurn[] = []
  for (let t = outcome.oneOf[0]; t <= outcome.oneOf[1]; t++) candidates.push(turnOf(t))
  return { first: null, candidates, changes: [], probes }
}

/**
 * The line of history both ends lie on, as a ref for each turn of it: the head's (T), or a
 * branch's (bN:T). A good end on another line counts if that line shares it with the bad
 * end's (a branch's turns up to where it left the head's line are the head's too).
 */
async function lineOf (loc: Location, good: Probe, bad: Probe): Promise<(t: number) => string> {
  const gb = branchOf(good.ref)
  const bb = branchOf(bad.ref)
  if (gb !== bb) {
    const branches = await callDaemon(loc, { cmd: 'branches' })
    const shared = (n: number | null): number => n === null ? Infinity : branches.find(b => b.branch === `b${n}`)?.shared ?? 0
    if (good.turn > Math.min(shared(gb), shared(bb))) {
      throw new CpfsError('BISECT_LINE', `turn ${good.ref} is not on the line of turn ${bad.ref}: it is no earlier turn of it`, 'pass --good and --bad turns of one branch (cpfs log --all: bN:T)')
    }
  }
  return bb === null ? (t) => String(t) : (t) => `b${bb}:${t}`
}

/** Run the command on the tree turn `ref` left: in a view of it, or with `write` a private writable copy. */
async function probe (loc: Location, ref: string, opts: BisectOptions): Promise<Probe> {
  const v: ViewInfo = await callDaemon(loc, { cmd: 'view-open', args: { turn: ref, end: true } })
  try {
    const { code, signal } = opts.write ? await runWritable(v, opts) : await runIn(v.path, opts.command, v, opts)
    const verdict = verdictOf(code, signal)
    const p = { turn: v.turn, ref: v.ref === `b${branchOf(v.ref)}` ? `${v.ref}:${v.turn}` : v.ref, label: v.label, code, signal }
    if (verdict === null) {
      throw new CpfsError('BISECT_STOPPED', `the command ${describeExit(p)} at turn ${p.ref}: bisect stops (exit codes from 128 up, or a signal, mean the command itself failed)`, 'exit 0 for good, 1-127 for bad, 125 to skip a turn that cannot be tested')
    }
    return { ...p, verdict }
  } finally {
    await callDaemon(loc, { cmd: 'view-close', args: { path: v.path, lazy: true } })
  }
}

function runIn (cwd: string, argv: string[], v: ViewInfo, opts: BisectOptions, env: Record<string, string> = {}): Promise<{ code: number | null, signal: string | null }> {
  return new Promise((resolve) => {
    const out = opts.output === 'ignore' ? 'ignore' : process.stderr
    const child = spawn(argv[0], argv.slice(1), { cwd, stdio: ['ignore', out, out], env: { ...process.env, ...env, CPFS_BISECT_TURN: v.ref } })
    // A command that cannot be started is the command failing, not the turn: 127 as a shell says
    // it for "not found" would read as bad, so it stops the search instead.
    child.on('error', () => resolve({ code: 255, signal: null }))
    child.on('close', (code, signal) => resolve({ code, signal }))
  })
}

/**
 * The command in a writable copy of the view: a new mount namespace (private, so nothing
 * mounted in it is seen outside, and all of it goes when the command ends), a tmpfs for the
 * copy's own files, and an overlayfs with the view as its lower layer. Exit 255 when the copy
 * cannot be made: a failure of the command, never a verdict on the turn.
 */
async function runWritable (v: ViewInfo, opts: BisectOptions): Promise<{ code: number | null, signal: string | null }> {
  const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-bisect-'))
  const script = [
    'set -u',
    'fail () { echo "cpfs bisect: cannot make a writable copy of the view: $1" >&2; exit 255; }',
    'mount -t tmpfs -o mode=0700 cpfs-bisect "$D" || fail "mount tmpfs"',
    'mkdir "$D/upper" "$D/work" "$D/tree" || fail mkdir',
    'mount -t overlay cpfs-bisect -o "lowerdir=$V,upperdir=$D/upper,workdir=$D/work" "$D/tree" || fail "mount overlay (lowerdir $V)"',
    'cd "$D/tree" || fail cd',
    'exec "$@"'
  ].join('\n')
  try {
    // The paths go in through the environment: no quoting of them in the script.
    return await runIn('/', ['unshare', '-m', '--propagation', 'private', 'sh', '-c', script, 'cpfs-bisect', ...opts.command], v, opts, { D: dir, V: v.path })
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
