// The daemon of a workspace, seen from the CLI and the library: whether it is up, starting
// one (a detached process that reports when its mount is live), and stopping one that lost its
// mount but still holds the store. api.ts uses these; the daemon itself is daemon/daemon.ts.
import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CpfsError } from './errors.js'
import { ping } from './control/client.js'
import { callDaemon, explainTimeout } from './control/mounted.js'
import type { ReadyInfo } from './daemon/daemon.js'
import { runDaemon } from './daemon/daemon.js'
import { checkFuse } from './fuse/mount.js'
import { checkStoreOutside, isMounted, register, type Location } from './store/locate.js'
import { reserveBytes } from './store/config.js'
import { memoryBudgets } from './store/memory.js'
import { checkNotNested } from './workspaces.js'

export interface StartOptions {
  foreground?: boolean
  allowOther?: boolean
}

/** The workspace is mounted and its daemon answers. */
export async function daemonUp (loc: Location): Promise<boolean> {
  return !loc.stale && isMounted(loc.workspace) && await pingDaemon(loc)
}

/** ping, with a daemon that does not answer explained (which pid, stopped or busy, what to do). */
export async function pingDaemon (loc: Location): Promise<boolean> {
  try {
    return await ping(loc.socket)
  } catch (err) {
    throw explainTimeout(loc, err)
  }
}

/**
 * A daemon that lost its mount but still holds the store (it should have exited): stop it,
 * so that the command can go on. Returns true when one was stopped. The pid file may be stale
 * (kill -9, a crash) and its pid reused by any process: only a process proven to be this
 * workspace's daemon is signalled (daemonIdentity), and proven again before each signal.
 */
export async function stopStaleDaemon (loc: Location): Promise<boolean> {
  const pidFile = join(loc.dir, 'daemon.pid')
  let pid: number
  try {
    pid = Number(fs.readFileSync(pidFile, 'utf8').trim())
  } catch {
    return false
  }
  const id = daemonIdentity(pid, loc)
  if (id === null) {
    // Gone, or the pid now names another process: the file is stale, that process is not ours.
    try { fs.unlinkSync(pidFile) } catch {}
    return false
  }
  if (isMounted(loc.workspace) && await pingDaemon(loc)) return false
  if (fs.existsSync(join(loc.dir, 'retaining'))) process.stderr.write(`cpfs: stopping the retention the daemon of ${loc.workspace} (pid ${pid}) runs after its unmount; it runs again after the next one\n`)
  else process.stderr.write(`cpfs: the daemon of ${loc.workspace} (pid ${pid}) no longer serves a mount but holds the store; stopping it\n`)
  for (const [sig, wait] of [['SIGTERM', 5000], ['SIGKILL', 2000]] as const) {
    if (daemonIdentity(pid, loc) !== id) return true
    try { process.kill(pid, sig) } catch { return true }
    for (let t = 0; t < wait; t += 50) {
      if (daemonIdentity(pid, loc) !== id) return true
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }
  return true
}

/**
 * The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22) when its
 * command line shows it is the daemon of `loc` (daemon/main.js with this workspace's state
 * directory); else null. The start time tells a reused pid from the process seen before.
 */
function daemonIdentity (pid: number, loc: Location): string | null {
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return null
  try {
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    const i = argv.findIndex(a => a.endsWith('/daemon/main.js'))
    if (i < 0 || JSON.parse(argv[i + 1] ?? 'null')?.loc?.dir !== loc.dir) return null
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

export function statDev (p: string): number | null {
  try {
    return fs.statSync(p).dev
  } catch {
    return null
  }
}

/** Start the daemon of the workspace (detached, or in this process with `foreground`); resolves once its mount is live. */
export async function startDaemon (loc: Location, opts: StartOptions): Promise<ReadyInfo> {
  checkStoreOutside(loc)
  checkNotNested(loc.workspace)
  if (!loc.stale && isMounted(loc.workspace)) {
    if (await pingDaemon(loc)) {
      const st = await callDaemon(loc, { cmd: 'status' })
      throw new CpfsError('ALREADY_MOUNTED', `${loc.workspace} is already mounted by cpfs (daemon pid ${st.pid})`, `use it as it is, or run cpfs unmount ${loc.workspace} first`)
    }
  }
  checkFuse() // fail here, with the real reason, before a daemon is started
  checkStoreSpace(loc.store)
  await stopStaleDaemon(loc)
  register(loc)
  if (opts.foreground) {
    return await new Promise<ReadyInfo>((resolve, reject) => {
      runDaemon({ loc, allowOther: Boolean(opts.allowOther) }, resolve).catch(reject)
    })
  }
  const main = join(dirname(fileURLToPath(import.meta.url)), 'daemon', 'main.js')
  const log = fs.openSync(join(loc.dir, 'daemon.log'), 'a', 0o600)
  // CPFS_DAEMON_NODE_ARGS: extra node flags for the daemon (profiling: --cpu-prof), which
  // NODE_OPTIONS does not allow.
  const nodeArgs = (process.env.CPFS_DAEMON_NODE_ARGS ?? '').split(/\s+/).filter(Boolean)
  // V8's own heap limit (about 4 GB here) stopped a session of 1,000,000 files in the middle
  // of committing its plan while the machine had 15 GB free: the daemon may use up to three
  // quarters of the machine's memory before V8 gives up.
  // That ceiling is the heap budget when one is set (store/memory.ts).
  const heap = memoryBudgets().heap ?? os.totalmem() * 0.75
  for (const flag of [`--max-old-space-size=${Math.floor(heap / 1024 / 1024)}`, ...HEAP_FLAGS]) {
    if (!nodeArgs.some(a => a.startsWith(flag.split('=')[0] + '='))) nodeArgs.unshift(flag)
  }
  const child = spawn(process.execPath, [...nodeArgs, main, JSON.stringify({ loc, allowOther: Boolean(opts.allowOther) })], {
    detached: true,
    stdio: ['ignore', log, log, 'pipe'],
    cwd: '/',
    env: { ...MALLOC_ENV, ...process.env }
  })
  fs.closeSync(log)
  const pipe = child.stdio[3] as NodeJS.ReadableStream
  const line = await new Promise<string>((resolve) => {
    let buf = ''
    pipe.setEncoding('utf8')
    pipe.on('data', (d: string) => { buf += d })
    pipe.on('end', () => resolve(buf))
    pipe.on('error', () => resolve(buf))
  })
  child.unref()
  let msg: any
  try {
    msg = JSON.parse(line.trim().split('\n')[0])
  } catch {
    throw new CpfsError('DAEMON_FAILED', 'the cpfs daemon exited before the mount was ready', `see ${join(loc.dir, 'daemon.log')}`)
  }
  if (msg.error) throw new CpfsError(msg.error.code, msg.error.message, msg.error.hint)
  return msg.ready as ReadyInfo
}

/**
 * How V8 grows the daemon's heap (docs/decisions.md, "Bounded daemon memory"). With a ceiling
 * of GBs V8 lets the old generation grow 4× past what is live before collecting, and the young
 * generation takes 16 MiB semi-spaces: most of the daemon's resident size was garbage. 2 MiB
 * semi-spaces, not 4 ("Daemon memory, second pass"): the Buffer objects of written chunks die
 * young, and their 64 KiB backing stores go back only when a scavenge collects them — 22 MB less
 * at the peak of a 256 MiB dd. --expose-gc: once a burst of work is over, the daemon collects
 * in full before it trims (daemon/trim.ts).
 */
export const HEAP_FLAGS = ['--heap-growing-percent=50', '--max-semi-space-size=2', '--expose-gc']

/**
 * glibc's allocator for the daemon (the user's own MALLOC_* or GLIBC_TUNABLES win). LevelDB
 * and the libuv threads that run it each got an arena of their own, and freed memory stayed
 * in them: most of the resident size the V8 heap and Buffers did not explain. Two arenas; and a
 * fixed mmap threshold of one chunk (64 KiB), so chunk and request buffers are given back to
 * the system when freed instead of raising the threshold and staying in a fragmented arena.
 */
const MALLOC_ENV = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: String(64 * 1024) }

/** Refuse to mount when the store's disk is already below the reserve: every write would fail. */
function checkStoreSpace (store: string): void {
  let dir = store
  while (!fs.existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir)
  const st = fs.statfsSync(dir)
  const free = st.bavail * st.bsize
  const reserve = reserveBytes()
  if (free < reserve) {
    throw new CpfsError('STORE_FULL', `the store's disk has ${humanBytes(free)} free, less than the ${humanBytes(reserve)} cpfs keeps in reserve (store: ${store})`, 'free space there, move the store (--store or CPFS_HOME), or lower the reserve (CPFS_RESERVE_BYTES or "reserve" in config.json)')
  }
}

function humanBytes (n: number): string {
  return n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : n >= 1024 ** 2 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : `${Math.round(n / 1024)} KiB`
}

