#!/usr/bin/env node
// What one request costs: the same system-call loops in a plain directory, a cpfs mount and
// fuse-overlayfs over the same lower files, side by side in one run. Each loop is chosen so
// that every call reaches the filesystem daemon (nothing the kernel can answer from its caches):
//   getxattr of a missing attribute   1 request  (GETXATTR -> ENODATA)
//   open + close of a lower file      3 requests (OPEN, FLUSH, RELEASE)
// The difference to native, divided by the requests, is the crossing plus the handler.
// Run as root with /dev/fuse:  node bench/roundtrip.mjs [--n 50000]
// The loops run in python3 (a thin wrapper over the system calls, the same for every target).
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const CLI = join(ROOT, 'dist', 'cli', 'cpfs.cjs')
const argv = process.argv.slice(2)
const N = Number(argv[argv.indexOf('--n') + 1] || 50000)
const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-rt-'))
const env = { ...process.env, CPFS_HOME: join(base, 'home') }

function sh (cmd, allowFail = false) {
  const r = spawnSync('bash', ['-c', cmd], { encoding: 'utf8', env })
  if (r.status !== 0 && !allowFail) throw new Error(`${cmd}: ${r.stderr}`)
  return r.stdout
}

const LOOPS = `
import os, sys, time
p, n = sys.argv[1], int(sys.argv[2])
def per(f, k):
    best = None
    for _ in range(3):
        t = time.perf_counter(); f(k); d = (time.perf_counter() - t) / k * 1e6
        best = d if best is None else min(best, d)
    return best
def gx(k):
    for _ in range(k):
        try: os.getxattr(p, 'user.nothing')
        except OSError: pass
def oc(k):
    for _ in range(k): os.close(os.open(p, os.O_RDONLY))
print(f"{per(gx, n):.2f} {per(oc, n // 5):.2f}")
`

function measure (dir) {
  const [gx, oc] = sh(`python3 -c "${LOOPS.replace(/"/g, '\\"')}" ${join(dir, 'file.txt')} ${N}`).trim().split(' ').map(Number)
  return { gx, oc }
}

const results = {}
const lower = join(base, 'lower')
fs.mkdirSync(lower)
fs.writeFileSync(join(lower, 'file.txt'), 'hello\n')
results.native = measure(lower)

const ws = join(base, 'ws')
fs.mkdirSync(ws)
fs.writeFileSync(join(ws, 'file.txt'), 'hello\n')
sh(`node ${CLI} mount ${ws}`)
try {
  results.cpfs = measure(ws)
} finally {
  sh(`node ${CLI} unmount ${ws} --discard`, true)
}

if (spawnSync('bash', ['-c', 'command -v fuse-overlayfs']).status === 0) {
  for (const d of ['upper', 'work', 'merged']) fs.mkdirSync(join(base, d))
  sh(`fuse-overlayfs -o lowerdir=${lower},upperdir=${base}/upper,workdir=${base}/work ${base}/merged`)
  try {
    results['fuse-overlayfs'] = measure(join(base, 'merged'))
  } finally {
    sh(`umount ${base}/merged`, true)
  }
} else {
  process.stderr.write('fuse-overlayfs is not installed (apt-get install fuse-overlayfs): its column is left out\n')
}

const names = Object.keys(results)
console.log(`| µs per call (best of 3 × ${N}) | ${names.join(' | ')} |`)
console.log(`|---|${names.map(() => '---:').join('|')}|`)
console.log(`| getxattr, missing (1 request) | ${names.map(n => results[n].gx.toFixed(1)).join(' | ')} |`)
console.log(`| open + close (3 requests) | ${names.map(n => results[n].oc.toFixed(1)).join(' | ')} |`)
fs.rmSync(base, { recursive: true, force: true })
