#!/usr/bin/env node
// What history beyond one machine costs (issue 24), against a real S3 server (Ceph's radosgw,
// started here by scripts/s3-server.sh, on 127.0.0.1): the first push of a --files source tree
// (PUTs, bytes sent against the tree's raw bytes, seconds, peak RSS), a push of a 100-file
// turn, a clone (GETs, seconds, verified byte-exact) and a --full one, and a second workspace
// of the same tree with 1% of its files edited (bytes sent against the tree). Beside them, what one object per
// file would cost (the PUTs a file-by-file sync makes). The tree is real source text: files of
// this repo's node_modules (their first 8 KiB), each made unique by a first line naming its
// copy, so nothing is deduplicated that a real tree would not repeat. Last, a history far larger
// than its head: a lazy clone against a --full one, and a rewind to its first turn.
// Run as root with /dev/fuse.
//   node bench/remote.mjs [--files 100000] [--json]
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { cpus, loadavg, release } from 'node:os'
import { join } from 'node:path'
import { CLI, ROOT, makeBench, opt } from './lib/systems.mjs'

const FILES = Number(opt('--files', 100000))
const JSON_OUT = process.argv.includes('--json')
const { base } = makeBench('cpfs-remote-')
const s3dir = join(base, 's3')
const started = spawnSync('bash', [join(ROOT, 'scripts', 's3-server.sh'), 'start', s3dir], { encoding: 'utf8' })
if (started.status !== 0) throw new Error(`the S3 server did not start: ${started.stderr}`)
const s3env = Object.fromEntries(started.stdout.trim().split('\n').map(l => l.split('=')).map(([k, ...v]) => [k, v.join('=')]))
const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_'))), ...s3env, AWS_ENDPOINT_URL: s3env.CPFS_S3_ENDPOINT, CPFS_HOME: join(base, 'home') }

function sh (cmd, cwd = base) {
  const r = spawnSync('bash', ['-c', cmd], { cwd, env, encoding: 'utf8', maxBuffer: 1 << 28 })
  if (r.status !== 0) throw new Error(`${cmd}: ${(r.stderr + r.stdout).slice(-2000)}`)
  return r.stdout
}

/** A cpfs command timed: wall seconds, peak RSS of its largest process (GNU time %M), its JSON output. */
function timed (args) {
  const t0 = process.hrtime.bigint()
  const r = spawnSync('/usr/bin/time', ['-f', '%M', process.execPath, CLI, ...args, '--json'], { cwd: base, env, encoding: 'utf8', maxBuffer: 1 << 28 })
  const s = Number(process.hrtime.bigint() - t0) / 1e9
  if (r.status !== 0) throw new Error(`cpfs ${args.join(' ')}: ${r.stderr}`)
  const rss = Number(r.stderr.trim().split('\n').pop()) * 1024
  return { s, rss, out: JSON.parse(r.stdout) }
}

function makeTree (dir) {
  fs.mkdirSync(dir)
  const sources = sh(`find ${join(ROOT, 'node_modules')} -type f -size +0 | sort`).trim().split('\n')
  let raw = 0
  for (let i = 0; i < FILES; i++) {
    const src = sources[i % sources.length]
    const sub = join(dir, `d${Math.floor(i / 1000)}`, `e${Math.floor(i / 50) % 20}`)
    if (i % 50 === 0) fs.mkdirSync(sub, { recursive: true })
    const fd = fs.openSync(src, 'r')
    const buf = Buffer.alloc(8192)
    const n = fs.readSync(fd, buf, 0, 8192, 0)
    fs.closeSync(fd)
    const body = Buffer.concat([Buffer.from(`// copy ${i} of ${src.slice(ROOT.length)}\n`), buf.subarray(0, n)])
    fs.writeFileSync(join(sub, `f${i}.js`), body)
    raw += body.length
  }
  return raw
}

/** Bytes in a directory tree (du -sb). */
function du (dir) {
  return fs.existsSync(dir) ? Number(sh(`du -sb ${dir}`).split('\t')[0]) : 0
}

/**
 * A history much larger than its head: TURNS turns that each rewrite a 16 MiB file of random
 * bytes (an artifact a CI agent rebuilds). A lazy clone against a --full one, then a rewind
 * to turn 1 in the lazy clone (its data fetched on demand, checked byte-exact).
 */
function lazyHistory () {
  const TURNS = 10
  const h = join(base, 'h')
  fs.mkdirSync(h)
  sh('head -c 16777216 /dev/urandom > artifact && echo 0 > n', h)
  sh(`node ${CLI} mount ${h}`)
  for (let i = 1; i <= TURNS; i++) sh(`head -c 16777216 /dev/urandom > artifact && echo ${i} > n && node ${CLI} turn ${h} -m "build ${i}" >/dev/null`, h)
  sh(`node ${CLI} unmount ${h} && node ${CLI} remote add origin s3://bench/fleet --as h --dir ${h}`)
  const pushed = timed(['push', h])
  const lazy = timed(['clone', 's3://bench/fleet/h', join(base, 'hl')])
  const full = timed(['clone', 's3://bench/fleet/h', join(base, 'hf'), '--full'])
  const cache = join(base, 'home', fs.readdirSync(join(base, 'home')).find(n => n.startsWith('hl-')), 'store', 'remote-cache', 'chunks')
  const rewind = timed(['rewind', '1', join(base, 'hl')])
  sh(`node ${CLI} rewind 1 ${h} >/dev/null && diff -r ${h} ${join(base, 'hl')}`)
  return {
    turns: TURNS,
    historyBytes: pushed.out.bytes,
    lazyClone: { seconds: lazy.s, rssBytes: lazy.rss, gets: lazy.out.requests.get, bytes: lazy.out.bytes, remoteChunks: lazy.out.remoteChunks },
    fullClone: { seconds: full.s, rssBytes: full.rss, gets: full.out.requests.get, bytes: full.out.bytes },
    rewindToFirst: { seconds: rewind.s, rssBytes: rewind.rss, fetchedBytes: du(cache), byteExact: true }
  }
}

const results = { files: FILES, machine: { cpus: cpus().length, load: loadavg().map(x => x.toFixed(1)).join(' '), kernel: release() } }
sh(`node -e "const {S3Client,CreateBucketCommand}=require('${ROOT}/node_modules/@aws-sdk/client-s3');new S3Client({endpoint:process.env.AWS_ENDPOINT_URL,forcePathStyle:true,region:'us-east-1'}).send(new CreateBucketCommand({Bucket:'bench'})).catch(e=>{console.error(e);process.exit(1)})"`)
try {
  const a = join(base, 'a')
  const raw = makeTree(a)
  results.rawBytes = raw
  sh(`node ${CLI} mount ${a} && node ${CLI} unmount ${a} && node ${CLI} remote add origin s3://bench/fleet --as a --dir ${a}`)
  const first = timed(['push', a])
  results.firstPush = { seconds: first.s, rssBytes: first.rss, puts: first.out.requests.put, sentBytes: first.out.storedBytes, ofRaw: first.out.storedBytes / raw, naivePuts: FILES }
  sh(`node ${CLI} mount ${a}`)
  sh('for i in $(seq 0 99); do echo "// edited" >> d0/e$((i / 50))/f$i.js; done', a)
  sh(`node ${CLI} turn ${a} -m "100 files"`)
  const turn = timed(['push', a])
  results.turnPush = { seconds: turn.s, puts: turn.out.requests.put, sentBytes: turn.out.storedBytes }
  sh(`node ${CLI} unmount ${a}`)
  const c = join(base, 'c')
  const clone = timed(['clone', 's3://bench/fleet/a', c])
  results.clone = { seconds: clone.s, rssBytes: clone.rss, gets: clone.out.requests.get, verified: clone.out.summary.verified }
  sh(`diff -r ${a} ${c}`)
  results.clone.byteExact = true
  const cf = timed(['clone', 's3://bench/fleet/a', join(base, 'cf'), '--full'])
  results.fullClone = { seconds: cf.s, rssBytes: cf.rss, gets: cf.out.requests.get }
  const b = join(base, 'b')
  sh(`cp -a ${a} ${b} && find ${b} -name '*.js' | awk 'NR % 100 == 0' | xargs sed -i '1s/$/ edited in b/'`)
  sh(`node ${CLI} mount ${b} && node ${CLI} unmount ${b} && node ${CLI} remote add origin s3://bench/fleet --as b --dir ${b}`)
  const second = timed(['push', b])
  results.secondWorkspace = { seconds: second.s, puts: second.out.requests.put, sentBytes: second.out.storedBytes, ofTree: second.out.storedBytes / raw, rawSentOfTree: second.out.bytes / raw }
  results.lazy = lazyHistory()
} finally {
  spawnSync('bash', [join(ROOT, 'scripts', 's3-server.sh'), 'stop', s3dir])
  spawnSync('bash', ['-c', `for d in ${base}/a ${base}/h; do node ${CLI} unmount $d >/dev/null 2>&1; done; rm -rf ${base}`], { env })
}
if (JSON_OUT) console.log(JSON.stringify(results, null, 2))
else {
  const mb = n => (n / 1048576).toFixed(1) + ' MiB'
  const r = results
  console.log(`machine: ${r.machine.cpus} CPUs, load ${r.machine.load}, ${r.machine.kernel}`)
  console.log(`tree: ${FILES} files, ${mb(r.rawBytes)} of source text`)
  console.log(`first push:        ${r.firstPush.seconds.toFixed(1)} s, ${r.firstPush.puts} PUTs (one object per file: ${r.firstPush.naivePuts}), ${mb(r.firstPush.sentBytes)} sent = ${(r.firstPush.ofRaw * 100).toFixed(1)}% of raw, peak RSS ${mb(r.firstPush.rssBytes)}`)
  console.log(`100-file turn:     ${r.turnPush.seconds.toFixed(1)} s, ${r.turnPush.puts} PUTs, ${mb(r.turnPush.sentBytes)} sent`)
  console.log(`clone:             ${r.clone.seconds.toFixed(1)} s, ${r.clone.gets} GETs, ${r.clone.verified} paths verified, byte-exact (diff -r), peak RSS ${mb(r.clone.rssBytes)}`)
  console.log(`clone --full:      ${r.fullClone.seconds.toFixed(1)} s, ${r.fullClone.gets} GETs, peak RSS ${mb(r.fullClone.rssBytes)}`)
  console.log(`second workspace:  ${r.secondWorkspace.seconds.toFixed(1)} s, ${r.secondWorkspace.puts} PUTs, ${mb(r.secondWorkspace.sentBytes)} sent = ${(r.secondWorkspace.ofTree * 100).toFixed(2)}% of the tree`)
  const l = r.lazy
  console.log(`history of ${l.turns} turns, ${mb(l.historyBytes)} (a 16 MiB artifact rebuilt each turn):`)
  console.log(`  lazy clone:      ${l.lazyClone.seconds.toFixed(1)} s, ${l.lazyClone.gets} GETs, ${mb(l.lazyClone.bytes)} fetched, ${l.lazyClone.remoteChunks} chunks left on the remote, peak RSS ${mb(l.lazyClone.rssBytes)}`)
  console.log(`  full clone:      ${l.fullClone.seconds.toFixed(1)} s, ${l.fullClone.gets} GETs, ${mb(l.fullClone.bytes)} fetched, peak RSS ${mb(l.fullClone.rssBytes)}`)
  console.log(`  rewind to 1:     ${l.rewindToFirst.seconds.toFixed(1)} s in the lazy clone, ${mb(l.rewindToFirst.fetchedBytes)} fetched on demand, byte-exact (diff -r), peak RSS ${mb(l.rewindToFirst.rssBytes)}`)
}
