// What the image test needs around the image: a Docker engine (the one running, or one of the
// test's own started here), a Debian 13 base image made with debootstrap (no public image
// registry is reachable where the tests run) and the project's image built from its
// Dockerfile on that base. Both images stay in the engine as a cache for the next run.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { ROOT } from './helpers.js'

/** The engine the test starts keeps its images here between runs. */
export const CACHE = process.env.CPFS_DOCKER_CACHE ?? '/var/cache/cpfs-test-docker'
const RUN_DIR = '/run/cpfs-test-docker'
const OWN_HOST = `unix://${RUN_DIR}/docker.sock`
export const BASE = 'cpfs-test-base:trixie'
export const IMAGE = 'cpfs-test-image:latest'
/** The build stage, tagged so that pruning old images keeps its layers (the npm ci cache). */
const BUILD_STAGE = 'cpfs-test-image:build'

export interface Result { code: number, stdout: string, stderr: string }

export function onPath (cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0
}

function tail (s: string, lines = 40): string {
  return s.trimEnd().split('\n').slice(-lines).join('\n')
}

export class Engine {
  host: string | undefined
  /** The dockerd this test started, stopped again at the end. */
  private own: ChildProcess | undefined
  private lock: ChildProcess | undefined

  private env (): NodeJS.ProcessEnv {
    // The classic builder: the same on Debian's docker.io and on newer engines, and its
    // --network host applies to the RUN steps (the test's own engine has no bridge).
    return { ...process.env, ...(this.host ? { DOCKER_HOST: this.host } : {}), DOCKER_BUILDKIT: '0' }
  }

  docker (args: string[], opts: { timeout?: number, input?: string } = {}): Result {
    const r = spawnSync('docker', args, { env: this.env(), encoding: 'utf8', timeout: opts.timeout ?? 300_000, input: opts.input, maxBuffer: 256 * 1024 * 1024 })
    return { code: r.status ?? 128, stdout: r.stdout ?? '', stderr: (r.stderr ?? '') + (r.error ? String(r.error) : '') }
  }

  /** docker, asynchronously (for containers the test talks to while they run). */
  spawn (args: string[]): ChildProcess {
    return spawn('docker', args, { env: this.env(), stdio: ['ignore', 'pipe', 'pipe'] })
  }

  bash (script: string, timeout: number): Result {
    const r = spawnSync('bash', ['-euo', 'pipefail', '-c', script], { env: this.env(), encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 })
    return { code: r.status ?? 128, stdout: r.stdout ?? '', stderr: (r.stderr ?? '') + (r.error ? String(r.error) : '') }
  }

  private answers (): boolean {
    return this.docker(['version', '--format', '{{.Server.Version}}'], { timeout: 20_000 }).code === 0
  }

  /**
   * Use the engine that runs (DOCKER_HOST or the default socket); else start one of the
   * test's own: no bridge (containers run with --network none, the build uses the host's
   * network), no iptables rules, its data root in CACHE. A lock keeps concurrent runs of
   * this test (other checkouts on the same machine) from sharing or stopping it mid-run.
   */
  async start (log: (s: string) => void): Promise<void> {
    fs.mkdirSync(RUN_DIR, { recursive: true })
    this.lock = spawn('flock', [join(RUN_DIR, 'test.lock'), 'sh', '-c', 'echo locked; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] })
    const waiting = setTimeout(() => log('waiting for another run of the image test to finish (it holds the lock)'), 2000)
    await new Promise<void>((resolve, reject) => {
      this.lock!.stdout!.once('data', () => resolve())
      this.lock!.once('exit', code => reject(new Error(`flock exited ${code}`)))
    })
    clearTimeout(waiting)
    if (this.answers()) return
    this.host = OWN_HOST
    if (this.answers()) return // a previous run's engine, left behind by a crash: stopped at the end
    fs.mkdirSync(CACHE, { recursive: true })
    const logFile = join(CACHE, 'dockerd.log')
    const out = fs.openSync(logFile, 'a')
    this.own = spawn('dockerd', ['--bridge=none', '--iptables=false', '--ip6tables=false',
      '--data-root', join(CACHE, 'data-root'), '--exec-root', join(RUN_DIR, 'exec'),
      '--pidfile', join(RUN_DIR, 'dockerd.pid'), '-H', OWN_HOST], { stdio: ['ignore', out, out] })
    fs.closeSync(out)
    let exited: number | null | undefined
    this.own.once('exit', code => { exited = code })
    for (let i = 0; i < 240 && exited === undefined; i++) {
      if (this.answers()) {
        log(`started dockerd (pid ${this.own.pid}, data root ${join(CACHE, 'data-root')}, log ${logFile})`)
        return
      }
      await new Promise(resolve => setTimeout(resolve, 250))
    }
    const why = exited === undefined ? 'did not answer within 60 s' : `exited ${exited}`
    throw new Error(`dockerd ${why}; its log (${logFile}) ends:\n${tail(fs.readFileSync(logFile, 'utf8'))}`)
  }

  /** Stop the test's own engine (whether this run or a crashed one started it), free the lock. */
  async stop (): Promise<void> {
    if (this.host === OWN_HOST) {
      // Old images (each source change leaves one) go; the tagged ones and their layers stay.
      this.docker(['image', 'prune', '--force'])
      let pid = this.own?.pid
      if (pid === undefined) {
        try { pid = Number(fs.readFileSync(join(RUN_DIR, 'dockerd.pid'), 'utf8')) } catch {}
      }
      if (pid) {
        try { process.kill(pid, 'SIGTERM') } catch {}
        for (let i = 0; i < 300 && alive(pid); i++) await new Promise(resolve => setTimeout(resolve, 100))
        if (alive(pid)) try { process.kill(pid, 'SIGKILL') } catch {}
      }
      // dockerd leaves its bind mounts of the host's network namespace (exec-root/netns) and
      // of its data root (and a killed one its containers' overlays): deepest first.
      const root = join(CACHE, 'data-root')
      const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map(l => l.split(' ')[4])
        .filter((m): m is string => m !== undefined && (m.startsWith(RUN_DIR + '/') || m === root || m.startsWith(root + '/')))
      for (const mnt of mounts.reverse()) spawnSync('umount', ['-l', mnt])
    }
    this.lock?.stdin?.end()
  }
}

function alive (pid: number): boolean {
  try {
    // A zombie (our exited child, not yet reaped) counts as gone.
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
  } catch {
    return false
  }
}

/**
 * The machine's Debian mirror, from its APT sources (the entry for its own release), for
 * debootstrap. CPFS_DEBIAN_MIRROR overrides it.
 */
export function debianMirror (): string {
  if (process.env.CPFS_DEBIAN_MIRROR) return process.env.CPFS_DEBIAN_MIRROR
  const read = (f: string): string => { try { return fs.readFileSync(f, 'utf8') } catch { return '' } }
  const codename = /^VERSION_CODENAME=(.*)$/m.exec(read('/etc/os-release'))?.[1]?.trim()
  const dir = '/etc/apt/sources.list.d'
  let files: string[] = []
  try { files = fs.readdirSync(dir).map(f => join(dir, f)) } catch {}
  const entries: Array<{ uri: string, suites: string[] }> = []
  for (const f of ['/etc/apt/sources.list', ...files.filter(f => f.endsWith('.list'))]) {
    for (const line of read(f).split('\n')) {
      const m = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/.exec(line)
      if (m) entries.push({ uri: m[1], suites: [m[2]] })
    }
  }
  for (const f of files.filter(f => f.endsWith('.sources'))) {
    for (const stanza of read(f).split(/\n\s*\n/)) {
      const field = (name: string): string[] => (new RegExp(`^${name}:(.*)$`, 'mi').exec(stanza.split('\n').filter(l => !l.startsWith('#')).join('\n'))?.[1] ?? '').trim().split(/\s+/).filter(Boolean)
      if (!field('Types').includes('deb') || field('Enabled')[0] === 'no') continue
      for (const uri of field('URIs')) entries.push({ uri, suites: field('Suites') })
    }
  }
  const http = entries.filter(e => /^https?:\/\//.test(e.uri))
  const main = http.find(e => codename !== undefined && e.suites.includes(codename)) ?? http.find(e => /\/debian\/?$/.test(e.uri))
  return main?.uri ?? 'http://deb.debian.org/debian'
}

/** The base image: reused when the engine has it, else made with debootstrap (minutes). */
export function baseImage (e: Engine, log: (s: string) => void): void {
  if (e.docker(['image', 'inspect', BASE]).code === 0) {
    log(`base image ${BASE}: cached in the engine`)
    return
  }
  if (!onPath('debootstrap')) throw new Error('debootstrap is missing (apt-get install debootstrap; .ci/run installs it)')
  const mirror = debianMirror()
  fs.mkdirSync(CACHE, { recursive: true })
  const dir = fs.mkdtempSync(join(CACHE, 'rootfs-'))
  const started = Date.now()
  try {
    const r = spawnSync('debootstrap', ['--variant=minbase', 'trixie', dir, mirror], { encoding: 'utf8', timeout: 1_200_000, maxBuffer: 64 * 1024 * 1024 })
    if (r.status !== 0) throw new Error(`debootstrap --variant=minbase trixie ${dir} ${mirror} failed (${r.status ?? r.error}):\n${tail((r.stdout ?? '') + (r.stderr ?? ''))}`)
    // As in Debian's own images: no package lists or downloaded packages in the image.
    const imp = e.bash(`rm -rf ${dir}/var/cache/apt/archives/*.deb ${dir}/var/lib/apt/lists/*; tar -C ${dir} -c . | docker import - ${BASE}`, 600_000)
    if (imp.code !== 0) throw new Error(`docker import of the debootstrap tree failed: ${tail(imp.stderr)}`)
  } finally {
    spawnSync('rm', ['-rf', dir])
  }
  log(`base image ${BASE}: debootstrap --variant=minbase trixie from ${mirror} and docker import, ${((Date.now() - started) / 1000).toFixed(0)} s`)
}

/**
 * What the build needs to reach the npm registry the way npm on this machine does: its
 * registry, its proxy and the extra CA certificates it trusts (a TLS-intercepting proxy signs
 * with a CA that Debian's bundle lacks; Debian keeps local CAs in /usr/local/share/ca-certificates).
 */
export function npmBuildArgs (): string[] {
  const args: string[] = []
  const r = spawnSync('npm', ['config', 'list', '--json'], { cwd: ROOT, encoding: 'utf8' })
  let config: Record<string, unknown> = {}
  try { config = JSON.parse(r.stdout) } catch {}
  if (typeof config.registry === 'string' && config.registry !== 'https://registry.npmjs.org/') args.push('--build-arg', `npm_config_registry=${config.registry}`)
  for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy']) {
    if (process.env[name]) args.push('--build-arg', `${name}=${process.env[name]}`)
  }
  if (typeof config['https-proxy'] === 'string' && !process.env.HTTPS_PROXY && !process.env.https_proxy) args.push('--build-arg', `HTTPS_PROXY=${config['https-proxy']}`)
  if (typeof config.proxy === 'string' && !process.env.HTTP_PROXY && !process.env.http_proxy) args.push('--build-arg', `HTTP_PROXY=${config.proxy}`)
  const pem: string[] = []
  const add = (text: string): void => { pem.push(...(text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [])) }
  // The system bundle (often what cafile or NODE_EXTRA_CA_CERTS name) is Debian's plus the
  // local CAs: those are read from where Debian keeps them, not the whole bundle (too big
  // for one argument).
  const addFile = (f: string): void => {
    if (f.startsWith('/etc/ssl/certs/')) return
    try { add(fs.readFileSync(f, 'utf8')) } catch {}
  }
  if (process.env.NODE_EXTRA_CA_CERTS) addFile(process.env.NODE_EXTRA_CA_CERTS)
  if (typeof config.cafile === 'string') addFile(config.cafile)
  for (const ca of [config.ca].flat()) if (typeof ca === 'string') add(ca)
  const local = (dir: string): void => {
    let names: fs.Dirent[] = []
    try { names = fs.readdirSync(dir, { withFileTypes: true }) } catch {}
    for (const d of names) {
      if (d.isDirectory()) local(join(dir, d.name))
      else if (d.name.endsWith('.crt')) addFile(join(dir, d.name))
    }
  }
  local('/usr/local/share/ca-certificates')
  if (pem.length > 0) args.push('--build-arg', `CA_CERTS=${[...new Set(pem)].join('\n')}`)
  return args
}

/** Build the project's image from its Dockerfile on the base; returns the seconds it took. */
export function buildImage (e: Engine): { seconds: number, log: string } {
  const started = Date.now()
  const common = ['build', '--network', 'host', '--build-arg', `BASE=${BASE}`, ...npmBuildArgs()]
  let log = ''
  for (const [target, tag] of [['build', BUILD_STAGE], [undefined, IMAGE]] as const) {
    const r = e.docker([...common, ...(target ? ['--target', target] : []), '--tag', tag, ROOT], { timeout: 1_800_000 })
    log += r.stdout + r.stderr
    if (r.code !== 0) throw new Error(`docker build ${target ? '--target ' + target + ' ' : ''}failed (${r.code}):\n${tail(r.stdout + r.stderr, 60)}`)
  }
  return { seconds: (Date.now() - started) / 1000, log }
}
