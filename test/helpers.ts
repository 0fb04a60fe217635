// Test helpers: real workspaces in temporary directories, the real CLI in its own process
// (so the daemon runs in its own process too), real tools through bash, and manifests that
// compare trees by path, type, mode, symlink target and content hash.
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
export const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')

/**
 * FUSE is required. Outside CI a machine without /dev/fuse skips loudly; in CI (CI=true)
 * the missing device is a failure, never a skip.
 */
export function fuseAvailable (t: Test): boolean {
  if (fs.existsSync('/dev/fuse') && process.getuid?.() === 0) return true
  const why = !fs.existsSync('/dev/fuse') ? '/dev/fuse is missing' : 'these tests mount as root and this process is not root'
  if (process.env.CI) {
    t.fail(`FUSE tests cannot run: ${why} (CI must provide /dev/fuse and root)`)
    return false
  }
  process.stderr.write(`\n!!! SKIPPING FUSE TESTS: ${why}. They are the real tests of cpfs; run them as root on a machine with /dev/fuse.\n\n`)
  t.skip(`SKIPPED LOUDLY: ${why}`)
  return false
}

export interface Run {
  code: number
  stdout: string
  stderr: string
}

function result (r: SpawnSyncReturns<string>): Run {
  return { code: r.status ?? (r.signal ? 128 : 1), stdout: r.stdout ?? '', stderr: r.stderr ?? '' }
}

export interface Env {
  /** The workspace directory. */
  ws: string
  /** CPFS_HOME for this test. */
  home: string
  cpfs: (...args: string[]) => Run
  /** Like cpfs() but fails the test on a non-zero exit. */
  ok: (...args: string[]) => string
  sh: (script: string, cwd?: string) => Run
  /** bash that must succeed; returns stdout. */
  run: (script: string, cwd?: string) => string
  env: NodeJS.ProcessEnv
  /**
   * The same four, asynchronous: the event loop runs while the command does, so that
   * independent cases in one file (each in its own workspace) can run side by side.
   */
  cpfsAsync: (...args: string[]) => Promise<Run>
  okAsync: (...args: string[]) => Promise<string>
  shAsync: (script: string, cwd?: string) => Promise<Run>
  runAsync: (script: string, cwd?: string) => Promise<string>
}

/**
 * spawnSync's result, without blocking: the exit code (128 when a signal ended it, as
 * result() says), stdout and stderr once the process has exited and its output is closed.
 */
export function spawnAsync (cmd: string, args: string[], opts: { env: NodeJS.ProcessEnv, cwd: string, timeout: number, maxBuffer?: number }): Promise<Run> {
  return new Promise(resolve => {
    const child = spawn(cmd, args, { env: opts.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    const max = opts.maxBuffer ?? 1024 * 1024
    const out: Buffer[] = []
    const err: Buffer[] = []
    let outBytes = 0
    let errBytes = 0
    let failure = ''
    const kill = (why: string): void => { if (!failure) failure = why; child.kill('SIGTERM') }
    const timer = setTimeout(() => kill(`timed out after ${opts.timeout} ms`), opts.timeout)
    child.stdout.on('data', (b: Buffer) => { outBytes += b.length; if (outBytes > max) kill('stdout maxBuffer exceeded'); else out.push(b) })
    child.stderr.on('data', (b: Buffer) => { errBytes += b.length; if (errBytes > max) kill('stderr maxBuffer exceeded'); else err.push(b) })
    child.on('error', e => { failure ||= String(e) })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      const stderr = Buffer.concat(err).toString('utf8') + (failure ? `\n${cmd}: ${failure}` : '')
      resolve({ code: failure ? (code ?? 128) || 128 : code ?? (signal ? 128 : 1), stdout: Buffer.concat(out).toString('utf8'), stderr })
    })
  })
}

let counter = 0

/** A fresh workspace (filled by `setup`, a bash script run inside it) and CPFS_HOME. */
export function workspace (t: Test, setup = '', opts: { env?: NodeJS.ProcessEnv } = {}): Env {
  const base = fs.mkdtempSync(join(tmpdir(), `cpfs-test-${process.pid}-${counter++}-`))
  const ws = join(base, 'ws')
  const home = join(base, 'home')
  fs.mkdirSync(ws)
  fs.mkdirSync(home)
  const env = { ...process.env, CPFS_HOME: home, NO_COLOR: '1', ...opts.env }
  const cpfs = (...args: string[]): Run => result(spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8', cwd: base, timeout: 300_000 }))
  const sh = (script: string, cwd = ws): Run => result(spawnSync('bash', ['-euo', 'pipefail', '-c', script], { env, encoding: 'utf8', cwd, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 }))
  const cpfsAsync = (...args: string[]): Promise<Run> => spawnAsync(process.execPath, [CLI, ...args], { env, cwd: base, timeout: 300_000 })
  const shAsync = (script: string, cwd = ws): Promise<Run> => spawnAsync('bash', ['-euo', 'pipefail', '-c', script], { env, cwd, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 })
  const e: Env = {
    ws,
    home,
    env,
    cpfs,
    sh,
    cpfsAsync,
    shAsync,
    okAsync: async (...args: string[]) => {
      const r = await cpfsAsync(...args)
      if (r.code !== 0) t.fail(`cpfs ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`)
      return r.stdout.trim()
    },
    runAsync: async (script: string, cwd?: string) => {
      const r = await shAsync(script, cwd)
      if (r.code !== 0) t.fail(`bash failed (${r.code}): ${script}\n${r.stderr.trim()}`)
      return r.stdout
    },
    ok: (...args: string[]) => {
      const r = cpfs(...args)
      if (r.code !== 0) t.fail(`cpfs ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`)
      return r.stdout.trim()
    },
    run: (script: string, cwd?: string) => {
      const r = sh(script, cwd)
      if (r.code !== 0) t.fail(`bash failed (${r.code}): ${script}\n${r.stderr.trim()}`)
      return r.stdout
    }
  }
  if (setup) e.run(setup)
  t.teardown(() => cleanup(ws, home, base))
  return e
}

/** Unmount anything a test left behind and kill its daemon, then remove the files. */
export function cleanup (ws: string, home: string, base: string): void {
  for (const pidFile of findFiles(home, 'daemon.pid')) {
    try {
      process.kill(Number(fs.readFileSync(pidFile, 'utf8')), 'SIGKILL')
    } catch {}
  }
  const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8')
  for (const line of mounts.split('\n')) {
    const mnt = line.split(' ')[4]
    if (mnt && mnt.startsWith(base)) spawnSync('umount', ['-l', mnt])
  }
  // rm(1) walks with openat: it also removes trees deeper than PATH_MAX (fs.rmSync cannot).
  spawnSync('rm', ['-rf', base])
}

function findFiles (dir: string, name: string): string[] {
  const out: string[] = []
  let entries: fs.Dirent[] = []
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true })
  } catch {
    return out
  }
  for (const d of entries) {
    const p = join(dir, d.name)
    if (d.isDirectory()) out.push(...findFiles(p, name))
    else if (d.name === name) out.push(p)
  }
  return out
}

export interface ManifestEntry {
  type: 'f' | 'd' | 'l' | '?'
  mode: number
  size?: number
  sha?: string
  target?: string
}

/** Every path below dir (relative, sorted) with type, permission bits, content hash, link target. */
export function manifest (dir: string, opts: { skip?: (rel: string) => boolean } = {}): Record<string, ManifestEntry> {
  const out: Record<string, ManifestEntry> = {}
  const walk = (rel: string): void => {
    const p = rel ? join(dir, rel) : dir
    for (const name of fs.readdirSync(p).sort()) {
      const r = rel ? `${rel}/${name}` : name
      if (opts.skip?.(r)) continue
      const full = join(dir, r)
      const st = fs.lstatSync(full)
      const mode = st.mode & 0o7777
      if (st.isDirectory()) {
        out[r] = { type: 'd', mode }
        walk(r)
      } else if (st.isSymbolicLink()) {
        out[r] = { type: 'l', mode: 0, target: fs.readlinkSync(full) }
      } else if (st.isFile()) {
        out[r] = { type: 'f', mode, size: st.size, sha: createHash('sha256').update(fs.readFileSync(full)).digest('hex') }
      } else {
        out[r] = { type: '?', mode }
      }
    }
  }
  walk('')
  return out
}

export function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}

export function daemonPid (home: string): number {
  const files = findFiles(home, 'daemon.pid')
  if (files.length !== 1) throw new Error(`expected one daemon.pid under ${home}, found ${files.length}`)
  return Number(fs.readFileSync(files[0], 'utf8'))
}

export function isMountedAt (dir: string): boolean {
  return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some(l => l.split(' ')[4] === dir && l.includes(' fuse.cpfs '))
}

/**
 * How long a wait for something that must happen (a process exits, a state is reached) may
 * last before the test calls it a hang. It is a guard, not a threshold: nothing is expected to
 * come near it, however loaded the machine, and reaching it fails the test loudly.
 */
export const HANG_GUARD_MS = 120_000

/**
 * Wait until `ok()` holds — a state observed, not a time waited — checking every `every` ms;
 * false only when HANG_GUARD_MS passed first (a hang: the caller fails the test then).
 */
export async function until (ok: () => boolean | Promise<boolean>, every = 50): Promise<boolean> {
  for (const end = Date.now() + HANG_GUARD_MS; !await ok();) {
    if (Date.now() > end) return false
    await sleep(every)
  }
  return true
}

/**
 * Run `fn(0)`, `fn(1)`, ... up to `fn(count - 1)` in order of their index, at most `width` at
 * a time (each in its own workspace). Once one returns true (the end of what there is to
 * try: a loop's `break`), no higher index starts; those already running finish.
 */
export async function inParallel (count: number, width: number, fn: (i: number) => Promise<boolean | void>): Promise<void> {
  let next = 0
  let stopped = false
  const worker = async (): Promise<void> => {
    while (!stopped && next < count) {
      if (await fn(next++) === true) stopped = true
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, width) }, worker))
}

/**
 * Wait until process `pid` (not necessarily a child) has gone, however long that takes; false
 * only when HANG_GUARD_MS passed first (a hang).
 */
export async function exited (pid: number, guardMs = HANG_GUARD_MS): Promise<boolean> {
  for (const end = Date.now() + guardMs; Date.now() < end;) {
    try {
      process.kill(pid, 0)
    } catch {
      return true
    }
    await sleep(50)
  }
  try {
    process.kill(pid, 0)
    return false
  } catch {
    return true
  }
}

/**
 * Wait until no cpfs daemon whose location names `under` (a store, or a CPFS_HOME) is running.
 * A daemon can outlive its unmount's answer: it applies retention then (daemon/retention.ts),
 * still holding the store, and rewrites its pid file, so it is found by its command line.
 */
export async function daemonsGone (under: string, guardMs = HANG_GUARD_MS): Promise<boolean> {
  const running = (): boolean => {
    for (const pid of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue
      let argv: string[]
      try {
        argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      } catch {
        continue
      }
      const i = argv.findIndex(a => a.endsWith('/daemon/main.js'))
      if (i >= 0 && (argv[i + 1] ?? '').includes(under)) return true
    }
    return false
  }
  for (const end = Date.now() + guardMs; Date.now() < end;) {
    if (!running()) return true
    await sleep(50)
  }
  return !running()
}

/**
 * Stop the daemon the way SIGTERM does: unmounted, nothing applied, nothing discarded — the
 * turns stay pending, for tests of plans run offline by the next command.
 */
export async function stopDaemon (home: string, ws: string): Promise<void> {
  const pid = daemonPid(home)
  process.kill(pid, 'SIGTERM')
  if (!await exited(pid)) throw new Error(`the daemon ${pid} did not stop on SIGTERM (hung: still there after ${HANG_GUARD_MS / 1000} s)`)
  // Its mount goes before it exits (it unmounts, then releases the store).
  if (isMountedAt(ws)) throw new Error(`the daemon ${pid} exited on SIGTERM and left its mount at ${ws}`)
}
