// Bounded daemon memory (issue 21): the budgets set in the environment or config.json reach the
// daemon (it reports them in `cpfs status --json`, and its node flags carry the heap budget),
// what its caches hold stays within them while a big file is written, and data flushed early
// because of a small dirty budget keeps every durability promise: byte-exact after kill -9
// once dd returned, and after a remount and an unmount; free native memory is given back
// (malloc_trim) once work is over, never during it. Structural bounds only: resident sizes
// belong in bench/run.mjs's output, not in a test.
import t from 'tap'
import * as fs from 'node:fs'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { HANG_GUARD_MS, daemonPid, exited, fuseAvailable, workspace } from './helpers.js'
import { native } from '../dist/native/index.js'
import { Trimmer, collectAndTrim } from '../dist/daemon/trim.js'

const MiB = 1024 * 1024

async function kill9 (home: string): Promise<void> {
  const pid = daemonPid(home)
  process.kill(pid, 'SIGKILL')
  if (!await exited(pid)) throw new Error(`the daemon ${pid} is still there ${HANG_GUARD_MS / 1000} s after SIGKILL`)
}

t.test('free native memory is given back once work is over, never while busy or idle', async t => {
  t.type(native.mallocTrim(), 'boolean', 'the addon has malloc_trim')
  let requests = 0
  let trims = 0
  const trimmer = new Trimmer(() => requests, () => { trims++; return true })
  t.equal(trimmer.tick(), false, 'an idle mount: no trim')
  requests += 5
  t.equal(trimmer.tick(), false, 'requests are being answered: no trim while busy')
  requests += 5
  t.equal(trimmer.tick(), false, 'still busy')
  t.equal(trimmer.tick(), true, 'quiet after work: trimmed')
  t.equal(trimmer.tick(), false, 'and not again while quiet')
  t.equal(trims, 1)
  requests++
  trimmer.tick()
  trimmer.tick()
  t.equal(trims, 2, 'once per burst')
  const failing = new Trimmer(() => requests, () => { throw new Error('an old addon') })
  requests++
  failing.tick()
  t.equal(failing.tick(), false, 'an addon without mallocTrim is no error')
})

t.test('after a burst the daemon collects garbage in full before it trims, when it can', async t => {
  const g = globalThis as { gc?: () => void }
  const had = g.gc
  t.teardown(() => { g.gc = had })
  let collections = 0
  g.gc = () => { collections++ }
  t.type(collectAndTrim(), 'boolean', 'trimmed')
  t.equal(collections, 1, 'after one full collection (the daemon runs with --expose-gc)')
  g.gc = undefined
  t.type(collectAndTrim(), 'boolean', 'without gc (a foreground daemon): it only trims')
})

if (fuseAvailable(t)) {
  t.test('budgets from the environment and config.json reach the daemon', async t => {
    const w = workspace(t, '', { env: { CPFS_DIRTY_BYTES: '1M', CPFS_HEAP: '768M' } })
    fs.writeFileSync(join(w.home, 'config.json'), JSON.stringify({ memory: { chunkCache: '256K', levelCache: '1M', dirty: '8M', inflight: '3M' } }))
    w.ok('mount', w.ws)
    const m = JSON.parse(w.ok('status', w.ws, '--json')).memory
    t.same(m.budgets, { chunkCache: 256 * 1024, dirty: MiB, inflight: 3 * MiB, levelCache: MiB, heap: 768 * MiB }, 'the environment wins over config.json')
    for (const k of ['rss', 'heapTotal', 'heapUsed', 'external', 'arrayBuffers']) t.type(m.usage[k], 'number', `usage.${k} reported`)
    const argv = fs.readFileSync(`/proc/${daemonPid(w.home)}/cmdline`, 'utf8').split('\0')
    t.ok(argv.includes('--max-old-space-size=768'), 'the heap budget is V8\'s ceiling')
    t.ok(argv.some(a => a.startsWith('--heap-growing-percent=')), 'and the heap grows by a bounded factor')
    t.ok(argv.includes('--expose-gc'), 'and it may collect in full once a burst is over (daemon/trim.ts)')
    w.ok('unmount', w.ws)
  })

  t.test('a budget below its minimum: mount refuses, naming it', async t => {
    const w = workspace(t, '', { env: { CPFS_INFLIGHT_BYTES: '1K' } })
    const r = w.cpfs('mount', w.ws)
    t.equal(r.code, 1)
    t.match(r.stderr, /^cpfs: the memory budget inflight \(CPFS_INFLIGHT_BYTES\) is 1024 bytes, below its minimum of 2097152 \(set it to 2M or more\)/)
  })

  t.test('a big write with a small dirty budget: byte-exact after kill -9 once dd returned, and after remount and unmount', async t => {
    const w = workspace(t, '', { env: { CPFS_DIRTY_BYTES: '1M', CPFS_INFLIGHT_BYTES: '2M', CPFS_CHUNK_CACHE: '256K' } })
    const src = join(w.ws, '..', 'random.bin')
    w.run(`head -c ${40 * MiB} /dev/urandom > ${src}`)
    w.ok('mount', w.ws)
    // dd with fsync, watched: what the caches hold never passes their budgets.
    const dd = spawn('dd', [`if=${src}`, 'of=big.bin', 'bs=1M', 'conv=fsync', 'status=none'], { cwd: w.ws, stdio: 'ignore' })
    const done = new Promise<number | null>(resolve => dd.on('exit', resolve))
    let running = true
    void done.then(() => { running = false })
    let samples = 0
    while (running) {
      const r = w.cpfs('status', w.ws, '--json')
      if (r.code === 0 && running) {
        const m = JSON.parse(r.stdout).memory
        samples++
        if (m.held.dirty > m.budgets.dirty) t.fail(`written bytes not in a batch: ${m.held.dirty} > ${m.budgets.dirty}`)
        if (m.held.chunkCache > m.budgets.chunkCache) t.fail(`chunk cache: ${m.held.chunkCache} > ${m.budgets.chunkCache}`)
        // Reused chunk buffers: at most the dirty budget (and never fewer than 16 of 64 KiB).
        if (m.held.chunkBuffers > Math.max(m.budgets.dirty, MiB)) t.fail(`chunk buffers kept: ${m.held.chunkBuffers} > ${m.budgets.dirty}`)
      }
      await new Promise(resolve => setTimeout(resolve, 20))
    }
    t.equal(await done, 0, `dd returned (${samples} status samples while it ran)`)
    // A second file without fsync: its close returned, which is a promise too.
    w.run(`dd if=${src} of=closed.bin bs=64k count=200 skip=7 status=none`)
    const want = w.run(`sha256sum < ${src}`)
    const wantClosed = w.run(`dd if=${src} bs=64k count=200 skip=7 status=none | sha256sum`)
    await kill9(w.home)
    w.ok('mount', w.ws)
    t.equal(w.run('sha256sum < big.bin'), want, 'big.bin byte-exact after kill -9 and remount')
    t.equal(w.run('sha256sum < closed.bin'), wantClosed, 'closed.bin too')
    w.ok('unmount', w.ws)
    t.equal(w.run('sha256sum < big.bin'), want, 'and in the real directory after unmount')
    t.equal(w.run('sha256sum < closed.bin'), wantClosed)
    w.ok('mount', w.ws)
    t.equal(w.run('sha256sum < big.bin'), want, 'and after a normal remount')
    w.ok('unmount', w.ws)
  })
}
