#!/usr/bin/env node
// Build the `cpfs` command, dist/cli/cpfs.cjs, from the compiled dist/cli/main.js: one
// CommonJS file holding main.js and everything it imports statically (the lean part: argument
// parsing, the mount table, the control client, the formatter, the hook). Every import() stays
// what it is, an ES module of the library in dist/, loaded when a command needs it.
//
// Why: `cpfs turn` runs on every user message, and on this machine kind node needs ~90 ms to
// start. Loading the CLI as ES modules added ~45 ms on top: ~10 ms for the ES module loader
// itself (an empty .mjs against an empty .cjs), ~1–2 ms per module for 15 modules, ~5 ms for
// node:crypto. One CommonJS file loads none of that (measured: bench/cli-start.mjs, and
// docs/decisions.md). Run after tsc: `npm run build` does both.
import { build } from 'esbuild'
import { chmodSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const entry = join(root, 'dist', 'cli', 'main.js')
const outfile = join(root, 'dist', 'cli', 'cpfs.cjs')

/** import() of a module of ours: left as a real import() of the file in dist/, from the bundle's directory. */
const libraryStaysLazy = {
  name: 'library-stays-lazy',
  setup (b) {
    b.onResolve({ filter: /^\.\.?\// }, args => {
      if (args.kind !== 'dynamic-import') return undefined
      let path = relative(dirname(outfile), resolve(args.resolveDir, args.path))
      if (!path.startsWith('.')) path = './' + path
      return { path, external: true }
    })
  }
}

const result = await build({
  entryPoints: [entry],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  plugins: [libraryStaysLazy],
  // Packages are the library's business (LevelDB, the MCP SDK): the lean part must use none.
  packages: 'external',
  logLevel: 'silent',
  legalComments: 'none'
})
// A warning here is a bug in the bundle (import.meta in CommonJS, a missing module): stop.
const problems = [...result.errors, ...result.warnings]
if (problems.length > 0) {
  for (const p of problems) process.stderr.write(`bundle-cli: ${p.text}${p.location ? ` (${p.location.file}:${p.location.line})` : ''}\n`)
  process.exit(1)
}
chmodSync(outfile, 0o755)
