// cpfs exec: mount, run a command inside the mount, unmount — for CI agents and scripts.
// The command's exit code is exec's exit code. Signals that reach exec (Ctrl-C, SIGTERM)
// are passed on to the command, and the mount is always cleaned up. With --sandbox the whole
// thing runs in a private mount namespace (unshare), so only the command and its children see
// the overlay: several sandboxed agents can work on one checkout at once, each with its own
// store and history, and the real directory changes only when each one applies.
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { constants } from 'node:os'
import { CpfsError } from './errors.js'
import * as api from './api.js'
import type { PlanSummary } from './plans/finish.js'
import { cpfsHome, locate, workspaceId } from './store/locate.js'
import { commandLine, keepAsBranch, prepareRunQuietly, recordStart } from './sandbox-branch.js'

export interface ExecOptions extends api.Target {
  command: string[]
  discard?: boolean
  sandbox?: boolean
  /** Each argument of `command` is one shell command line, run in a turn of its own. */
  turnPerCommand?: boolean
  /** Each argument of `command` is one shell command line, run in a step of its own (cpfs undo --step N takes one back). */
  stepPerCommand?: boolean
  force?: boolean
}

export interface ExecResult {
  code: number
  signal: NodeJS.Signals | null
  applied: boolean
  summary: PlanSummary | null
  store: string
  /** A sandboxed run: the branch of the shared history its work is kept as (sandbox-branch.ts). */
  branch?: string
}

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']

function runChild (argv: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number, signal: NodeJS.Signals | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd, stdio: 'inherit', env })
    const forward = (sig: NodeJS.Signals) => () => { child.kill(sig) }
    const handlers = FORWARDED.map(sig => [sig, forward(sig)] as const)
    for (const [sig, h] of handlers) process.on(sig, h)
    child.on('error', (err: any) => {
      for (const [sig, h] of handlers) process.off(sig, h)
      reject(new CpfsError('EXEC_FAILED', `cannot run ${argv[0]}: ${err.code === 'ENOENT' ? 'command not found' : err.message}`, 'check the command after --'))
    })
    child.on('exit', (code, signal) => {
      for (const [sig, h] of handlers) process.off(sig, h)
      resolve({ code: code ?? 128 + (signal ? constants.signals[signal] ?? 0 : 0), signal })
    })
  })
}

/** A private state directory (socket, log, store) for one sandboxed run. */
function sandboxState (workspace: string): string {
  const dir = join(cpfsHome(), 'sandboxes', `${workspaceId(workspace)}-${process.pid}-${Date.now().toString(36)}`)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  return dir
}

export async function exec (opts: ExecOptions): Promise<ExecResult> {
  if (opts.command.length === 0) throw new CpfsError('USAGE', 'no command given', 'put the command after --, e.g. cpfs exec . -- npm test')
  const loc = locate(opts.dir ?? '.', opts.store)
  if (opts.sandbox && !process.env.CPFS_IN_SANDBOX) return await sandboxed(opts, loc.workspace)
  await api.mount({ dir: loc.workspace, store: opts.store })
  let outcome: { code: number, signal: NodeJS.Signals | null } = { code: 0, signal: null }
  let failure: unknown = null
  try {
    if (opts.turnPerCommand || opts.stepPerCommand) {
      const { stepBegin, stepEnd } = await import('./steps-api.js')
      for (const line of opts.command) {
        if (opts.turnPerCommand) await api.turn({ dir: loc.workspace, store: opts.store, prompt: line })
        // The step is this process's: the command runs as its child.
        if (opts.stepPerCommand) await stepBegin({ dir: loc.workspace, store: opts.store, label: line, ownerPid: process.pid })
        try {
          outcome = await runChild(['bash', '-c', line], loc.workspace, process.env)
        } finally {
          if (opts.stepPerCommand) await stepEnd(undefined, { dir: loc.workspace, store: opts.store })
        }
        if (outcome.code !== 0) break
      }
    } else {
      outcome = await runChild(opts.command, loc.workspace, process.env)
    }
  } catch (err) {
    failure = err
  }
  // Always unmount; wait out processes the command left behind in the mount (busy).
  let result: api.UnmountResult | null = null
  for (let i = 0; ; i++) {
    try {
      result = await api.unmount({ dir: loc.workspace, store: opts.store, discard: opts.discard || failure !== null, force: opts.force })
      break
    } catch (err: any) {
      if (err?.code !== 'MOUNT_BUSY' || i >= 50) {
        failure ??= err
        break
      }
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  }
  // Inside a sandbox with a store of its own: make its work ready to be kept as a branch of the
  // shared history (sandbox-branch.ts); the outer cpfs copies it once the namespace is gone.
  const state = process.env.CPFS_IN_SANDBOX ? process.env.CPFS_STATE_DIR : undefined
  if (state && result && opts.store === join(state, 'store')) await prepareRunQuietly(loc.workspace, opts.store, state)
  if (failure) throw failure
  return { ...outcome, applied: Boolean(result?.applied), summary: result?.summary ?? null, store: locate(loc.workspace, opts.store).store }
}

async function sandboxed (opts: ExecOptions, workspace: string): Promise<ExecResult> {
  const state = sandboxState(workspace)
  const store = opts.store ?? join(state, 'store')
  // Its work becomes a branch of the shared history (not when it was given a store of its own).
  let branch = opts.store === undefined
  try {
    if (branch) await recordStart(workspace, state, commandLine(opts.command, Boolean(opts.turnPerCommand || opts.stepPerCommand)))
  } catch (err: any) {
    branch = false // the run goes on as before; it only will not be a branch
    process.stderr.write(`cpfs: the sandboxed run will not be kept as a branch: cannot read where the history is (${String(err?.message ?? err).split('\n')[0]})\n`)
  }
  const args = [process.argv[1], 'exec', workspace, '--store', store, '--json-result', join(state, 'result.json')]
  if (opts.discard) args.push('--discard')
  if (opts.turnPerCommand) args.push('--turn-per-command')
  if (opts.stepPerCommand) args.push('--step-per-command')
  if (opts.force) args.push('--force')
  args.push('--', ...opts.command)
  // unshare -m: a private mount namespace; --propagation private: our mount never leaks out.
  const env = { ...process.env, CPFS_IN_SANDBOX: '1', CPFS_STATE_DIR: state }
  const r = await runChild(['unshare', '-m', '--propagation', 'private', process.execPath, ...args], '/', env)
  let inner: (ExecResult & { error?: { code: string, message: string, hint?: string } }) | null = null
  try {
    inner = JSON.parse(fs.readFileSync(join(state, 'result.json'), 'utf8'))
  } catch {}
  const kept = branch ? await keepAsBranch(workspace, state, Boolean(inner && !inner.error)) : null
  if (kept?.branch) {
    process.stderr.write(`cpfs: the sandboxed run is kept as branch ${kept.branch} of ${workspace}'s history (cpfs log --all)${kept.unsure.length ? `; ${kept.unsure.length} path${kept.unsure.length === 1 ? '' : 's'} changed outside it meanwhile (a merge refuses them): ${kept.unsure.slice(0, 3).join(', ')}` : ''}\n`)
  }
  if (!inner) throw new CpfsError('SANDBOX_FAILED', `the sandboxed run ended without a result (exit ${r.code})`, `see the log in ${state}`)
  if (inner.error) throw new CpfsError(inner.error.code, inner.error.message, inner.error.hint)
  return { ...inner, store, ...(kept?.branch ? { branch: kept.branch } : {}) }
}
