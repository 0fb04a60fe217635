// Faults injected into plans on purpose, so that the tests can prove what cpfs does when a plan
// is killed midway (recovery), refused by the real filesystem (roll-back), raced by another
// process (the re-check of each path), or written wrong by the disk (verification). The plan
// functions take them in their options; the default is none, and production passes none.
//
// Only the entry points of the processes that run plans build them, from the environment
// (faultsFromEnv): the tests drive real cpfs processes (the CLI, the daemon it starts), and
// the environment is the one way into those. No other module reads these variables.
import * as fs from 'node:fs'
import type { Lower } from '../real/lower.js'
import type { PlanOp } from './planner.js'

export interface Faults {
  /** Before operation `index` of a plan: another process changes the real directory. */
  beforeOp?: (index: number, op: PlanOp, lower: Lower) => void
  /** Before operation `index` of a plan: the real filesystem refuses it (throws). */
  failOp?: (index: number) => void
  /** After operation `index` of a plan completed: the process dies (as with kill -9). */
  afterOp?: (index: number) => void
  /** A new file's content is written at fd, not yet its attributes: the disk got it wrong. */
  afterWrite?: (path: string, size: number, fd: number) => void
  /** Before an interrupted plan is finished: it cannot be (throws), as one that hit a bug would. */
  beforeRecover?: () => void
}

export const NO_FAULTS: Faults = Object.freeze({})

/**
 * The faults the environment asks for, or undefined when it asks for none:
 *   CPFS_TEST_CRASH_AFTER_OP=N     SIGKILL right after operation N
 *   CPFS_TEST_FAIL_AT_OP=N         operation N fails with EIO (as a full disk or a too-long name would)
 *   CPFS_TEST_EDIT_BEFORE_OP=N     the path of operation N is appended to just before the plan reaches it
 *   CPFS_TEST_EDIT_BEFORE_OP=N:P   a new file is written at P just before operation N
 *   CPFS_TEST_CORRUPT_WRITE=P      one byte of the new content of P is flipped (once per process,
 *                                  so that the roll-back writes it right)
 *   CPFS_TEST_RECOVER_FAILS=1      an interrupted plan can be neither finished nor rolled back
 * A variable set to '' counts as set (N is then 0), as it always has.
 */
export function faultsFromEnv (env: NodeJS.ProcessEnv): Faults | undefined {
  const faults: Faults = {}
  const crashAt = env.CPFS_TEST_CRASH_AFTER_OP
  if (crashAt !== undefined) {
    faults.afterOp = (index) => { if (Number(crashAt) === index) process.kill(process.pid, 'SIGKILL') }
  }
  const failAt = env.CPFS_TEST_FAIL_AT_OP
  if (failAt !== undefined) {
    faults.failOp = (index) => {
      if (index === Number(failAt)) throw Object.assign(new Error('EIO: injected failure'), { code: 'EIO' })
    }
  }
  const edit = env.CPFS_TEST_EDIT_BEFORE_OP
  if (edit !== undefined) faults.beforeOp = editBeforeOp(edit)
  const corrupt = env.CPFS_TEST_CORRUPT_WRITE
  if (corrupt !== undefined) faults.afterWrite = corruptOnce(corrupt)
  if (env.CPFS_TEST_RECOVER_FAILS) {
    faults.beforeRecover = () => { throw new Error('injected: the interrupted plan cannot be finished') }
  }
  return Object.keys(faults).length ? faults : undefined
}

function editBeforeOp (spec: string): NonNullable<Faults['beforeOp']> {
  const [at, path] = spec.split(':')
  return (index, op, lower) => {
    if (index !== Number(at)) return
    if (path) fs.writeFileSync(lower.realPath(path), 'made concurrently\n')
    else fs.appendFileSync(lower.realPath(op.path), 'edited concurrently\n')
  }
}

function corruptOnce (target: string): NonNullable<Faults['afterWrite']> {
  let corrupted = false
  return (path, size, fd) => {
    if (path !== target || size === 0 || corrupted) return
    corrupted = true
    const b = Buffer.alloc(1)
    fs.readSync(fd, b, 0, 1, 0)
    b[0] ^= 0xff
    fs.writeSync(fd, b, 0, 1, 0)
  }
}
