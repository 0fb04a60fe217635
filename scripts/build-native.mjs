#!/usr/bin/env node
// Builds cpfs's own native addon, src/native/cpfs.c -> build/Release/cpfs_native.node (see
// native-bindings.md), from the repository root's binding.gyp.
//
// It uses the node-gyp in node_modules (a dependency) rather than whatever is on PATH, and
// compiles against the headers of the Node that runs this script (--nodedir), so nothing is
// downloaded: the network may be closed, and the addon must match the running Node anyway.
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { spawnSync } from 'node:child_process'

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const require = createRequire(import.meta.url)
const addon = join(root, 'build', 'Release', 'cpfs_native.node')

function fail (msg) {
  console.error(`cpfs: cannot build the native addon: ${msg} (install python3, make and g++, then run npm run native)`)
  process.exit(1)
}

let nodeGyp
try {
  nodeGyp = require.resolve('node-gyp/bin/node-gyp.js')
} catch {
  fail('node-gyp is not installed; run npm ci')
}

const args = [nodeGyp, 'rebuild']
const prefix = dirname(dirname(process.execPath))
if (!process.env.npm_config_nodedir && existsSync(join(prefix, 'include', 'node', 'node_api.h'))) {
  args.push('--nodedir=' + prefix)
}
const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
if (r.error) fail(`cannot run node-gyp: ${r.error.message}`)
if (r.status !== 0) {
  // The compiler's or gyp's own words first (they say what is missing), then our one line.
  const out = (r.stdout ?? '') + (r.stderr ?? '')
  process.stderr.write(out.slice(-4000))
  // The most telling line: a compiler error, gyp's stack message, or its Python search.
  const lines = out.split('\n')
  const why = (lines.find(l => /error:/.test(l) && !l.startsWith('gyp')) ??
    lines.find(l => /^gyp ERR! stack Error: /.test(l))?.replace('gyp ERR! stack Error: ', '') ??
    (lines.some(l => l.startsWith('gyp ERR! find Python')) ? 'no usable Python found' : undefined) ??
    lines.find(l => /error/i.test(l)))?.trim().slice(0, 200)
  fail(`node-gyp rebuild failed${why ? ': ' + why : ''}`)
}
if (!existsSync(addon)) fail('node-gyp finished but build/Release/cpfs_native.node is missing')
console.log('cpfs: built the native addon at ' + addon)
