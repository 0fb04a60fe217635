#!/usr/bin/env node
// Rebuilds fuse-native's native addon with the fixes cpfs needs (see native-bindings.md).
//
// Why a rebuild: fuse-native 2.2.6 (unmaintained since 2020) passes the access time in place
// of the modification time to utimens, and never receives `touch -m`/`touch -a` because it
// does not declare flag_utime_omit_ok. Both live in its C file, so we patch that file at
// install time (anchored edits that fail loudly if upstream ever changes) and compile it with
// node-gyp against the libfuse 2.9 headers and library that fuse-shared-library-linux ships.
// The result lands in node_modules/fuse-native/build/Release, which node-gyp-build prefers
// over the published prebuild. An rpath of $ORIGIN plus a libfuse.so.2 link next to the addon
// means no Debian libfuse2 package is needed at run time.
import { readFileSync, writeFileSync, existsSync, symlinkSync, rmSync, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { spawnSync } from 'node:child_process'

const require = createRequire(import.meta.url)
const force = process.argv.includes('--force')
const MARK = '/* cpfs-patched v1 */'

function fail (msg) {
  console.error(`cpfs: cannot build the patched fuse-native binding: ${msg} (see native-bindings.md, "When the binding fails")`)
  process.exit(1)
}

let pkgDir
try {
  pkgDir = dirname(require.resolve('fuse-native/package.json'))
} catch {
  fail('fuse-native is not installed; run npm install')
}
const release = join(pkgDir, 'build', 'Release')
const addon = join(release, 'fuse.node')
const source = join(pkgDir, 'fuse-native.c')
const gyp = join(pkgDir, 'binding.gyp')

const current = readFileSync(source, 'utf8')
if (!force && current.includes(MARK) && existsSync(addon) && existsSync(join(release, 'libfuse.so.2'))) {
  process.exit(0)
}

// Each edit: [description, exact text upstream has, replacement]. Idempotent: the pristine
// text is kept beside the file so that --force rebuilds from the original.
const pristinePath = source + '.orig'
if (!existsSync(pristinePath)) writeFileSync(pristinePath, current)
let c = readFileSync(pristinePath, 'utf8')
const edits = [
  ['utimens passes mtime (not atime twice) and keeps UTIME_OMIT / UTIME_NOW',
    `  l->atime = timespec_to_uint64(&tv[0]);
  l->mtime = timespec_to_uint64(&tv[1]);
}, {
  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));
  FUSE_UINT64_TO_INTS_ARGV(l->atime, 3)
  FUSE_UINT64_TO_INTS_ARGV(l->atime, 5)`,
    `  l->atime = cpfs_utime_arg(&tv[0]);
  l->mtime = cpfs_utime_arg(&tv[1]);
}, {
  napi_create_string_utf8(env, l->path, NAPI_AUTO_LENGTH, &(argv[2]));
  FUSE_UINT64_TO_INTS_ARGV(l->atime, 3)
  FUSE_UINT64_TO_INTS_ARGV(l->mtime, 5)`],
  ['helper that maps UTIME_OMIT to all-ones (JS sees >= 2^53) and UTIME_NOW to the clock',
    `static void populate_stat (uint32_t *ints, struct stat* stat) {`,
    `${MARK}
static uint64_t cpfs_utime_arg (const struct timespec* ts) {
  if (ts->tv_nsec == UTIME_OMIT) return UINT64_MAX;
  if (ts->tv_nsec == UTIME_NOW) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return timespec_to_uint64(&now);
  }
  return timespec_to_uint64(ts);
}

static void populate_stat (uint32_t *ints, struct stat* stat) {`],
  ['declare flag_utime_omit_ok so touch -m / touch -a reach the filesystem',
    `  if (implemented[op_init]) ops.init = fuse_native_init;`,
    `  if (implemented[op_init]) ops.init = fuse_native_init;
  ops.flag_utime_omit_ok = 1;`]
]
for (const [what, from, to] of edits) {
  if (!c.includes(from)) fail(`fuse-native.c changed upstream; the edit "${what}" no longer applies`)
  c = c.replace(from, () => to)
}
writeFileSync(source, c)

const gypText = readFileSync(gyp, 'utf8')
if (!gypText.includes('$$ORIGIN')) {
  const anchor = `    "sources": [\n      "fuse-native.c"\n    ],`
  if (!gypText.includes(anchor)) fail('binding.gyp changed upstream; cannot add the rpath')
  // A function replacement: a string one would treat "$$" as an escape. Make needs "$$".
  writeFileSync(gyp, gypText.replace(anchor, () => anchor + `\n    "ldflags": [ "-Wl,-rpath,'$$ORIGIN'" ],`))
}

let nodeGyp
try {
  nodeGyp = require.resolve('node-gyp/bin/node-gyp.js')
} catch {
  fail('node-gyp is not installed; run npm install')
}
rmSync(join(pkgDir, 'build'), { recursive: true, force: true })
// Build against the headers of the Node that runs us (no download: the network may be closed).
const args = [nodeGyp, 'rebuild']
const prefix = dirname(dirname(process.execPath))
if (!process.env.npm_config_nodedir && existsSync(join(prefix, 'include', 'node', 'node_api.h'))) {
  args.push('--nodedir=' + prefix)
}
const r = spawnSync(process.execPath, args, { cwd: pkgDir, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
if (r.status !== 0) {
  process.stderr.write(r.stdout.slice(-4000) + r.stderr.slice(-4000))
  fail('node-gyp rebuild failed (needs python3, make, g++ and Node headers)')
}
mkdirSync(release, { recursive: true })
const so2 = join(release, 'libfuse.so.2')
rmSync(so2, { force: true })
symlinkSync('libfuse.so', so2)
if (!existsSync(addon)) fail('node-gyp finished but build/Release/fuse.node is missing')
console.log('cpfs: built patched fuse-native binding at ' + addon)
