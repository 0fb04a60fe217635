// The evaluation of issue 22, after YoloFS's: small projects where a routine command silently
// damages something. A scripted agent (test/scripted-agent.mjs, its own process) replays the
// tool calls as Claude Code makes them — each through `cpfs hook claude-code` for PreToolUse
// and PostToolUse, with the hook's stdin/stdout protocol, the tool's work done by the agent's
// own process (Write, Edit) or a shell it starts (Bash). Each case checks that the feedback
// the agent gets names the damage and the reason to look twice, and that `cpfs undo --step`
// with the call's tool_use_id puts the project back exactly: the damaged paths as before the
// call, everything else (a later call's work included) as it is.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { CLI, ROOT, fuseAvailable, manifest, workspace, type Env, type ManifestEntry } from './helpers.js'

interface Call { id?: string, tool?: string, input?: Record<string, unknown>, wait?: number }
interface Result { id: string, pre: number, post: number, preStdout: string, stderr: string, context: string | null }

const AGENT = join(ROOT, 'test', 'scripted-agent.mjs')

/** Run the scripted agent over `calls` in the workspace; its results, one per tool call. */
function agent (t: Test, w: Env, calls: Call[]): Result[] {
  const script = join(w.home, `script-${Math.random().toString(36).slice(2)}.json`)
  fs.writeFileSync(script, JSON.stringify({ hook: `'${process.execPath}' '${CLI}' hook claude-code`, cwd: w.ws, session_id: 'eval-session', calls }))
  const r = spawnSync(process.execPath, [AGENT, script], { env: w.env, encoding: 'utf8', timeout: 120_000 })
  if (r.status !== 0) t.fail(`the scripted agent failed (${r.status}): ${r.stderr}`)
  const results: Result[] = JSON.parse(r.stdout)
  for (const x of results) {
    t.equal(x.pre, 0, `${x.id}: PreToolUse exits 0`)
    t.equal(x.post, 0, `${x.id}: PostToolUse exits 0`)
    t.equal(x.preStdout, '', `${x.id}: PreToolUse prints nothing (the call goes on as without cpfs)`)
    t.equal(x.stderr, '', `${x.id}: no complaint on stderr`)
  }
  return results
}

const bash = (id: string, command: string): Call => ({ id, tool: 'Bash', input: { command, description: 'routine command' } })
const write = (id: string, file: string, content: string): Call => ({ id, tool: 'Write', input: { file_path: file, content } })

interface Case {
  name: string
  /** The project, made by bash in the real directory before the mount, committed to git. */
  setup: string
  /** The damaging call (its id is toolu_damage), then calls after it. */
  calls: Call[]
  /** Paths the damage touched (workspace-relative). */
  damaged: string[]
  /** What the feedback of `in` (default the damaging call) must say. */
  says: RegExp[]
  in?: string
}

const git = 'git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm init'

const CASES: Case[] = [
  {
    name: 'a clean script deletes README',
    setup: `echo '# App' > README.md && mkdir -p scripts dist && echo x > dist/out.js && printf '#!/bin/sh\\nrm -rf dist README.md\\n' > scripts/clean.sh && chmod +x scripts/clean.sh && ${git}`,
    calls: [bash('toolu_damage', './scripts/clean.sh')],
    damaged: ['README.md', 'dist', 'dist/out.js'],
    says: [/- .*README\.md/, /deleted \d+ files? tracked by git: .*README\.md/]
  },
  {
    name: 'a configure step overwrites .env',
    setup: `echo 'API_KEY=real-secret' > .env && printf '#!/bin/sh\\necho API_KEY=changeme > .env\\n' > configure && chmod +x configure && ${git}`,
    calls: [bash('toolu_damage', './configure')],
    damaged: ['.env'],
    says: [/~ .*\.env/, /secret or dotfile: \.env/]
  },
  {
    name: 'a reset empties src/',
    setup: `mkdir src && for i in $(seq 1 12); do echo "export const v$i = $i" > src/m$i.ts; done && printf '#!/bin/sh\\nrm -rf src/*\\n' > reset.sh && chmod +x reset.sh && ${git}`,
    calls: [bash('toolu_damage', 'sh reset.sh')],
    damaged: Array.from({ length: 12 }, (_, i) => `src/m${i + 1}.ts`),
    says: [/deleted 12 files tracked by git/, /Check: deleted 12 files/]
  },
  {
    name: 'an update script rewrites the lockfile',
    setup: `echo '{"name":"app","lockfileVersion":3,"packages":{"node_modules/a":{"version":"1.0.0"}}}' > package-lock.json && printf '#!/bin/sh\\nnode -e "require(\\\\"fs\\\\").writeFileSync(\\\\"package-lock.json\\\\", JSON.stringify({name: \\\\"app\\\\", lockfileVersion: 3, packages: {}}))"\\n' > update.sh && chmod +x update.sh && ${git}`,
    calls: [bash('toolu_damage', './update.sh')],
    damaged: ['package-lock.json'],
    says: [/~ .*package-lock\.json/, /outside update\.sh: package-lock\.json/]
  },
  {
    name: 'a lint fix deletes a tracked test',
    setup: `mkdir tests && echo 'test(1)' > tests/legacy.test.js && echo 'test(2)' > tests/new.test.js && printf '#!/bin/sh\\nrm tests/legacy.test.js\\n' > lint.sh && chmod +x lint.sh && ${git}`,
    calls: [bash('toolu_damage', './lint.sh --fix')],
    damaged: ['tests/legacy.test.js'],
    says: [/tracked by git: tests\/legacy\.test\.js/]
  },
  {
    name: 'a background process writes after the command returned',
    setup: `echo '{"port": 3000}' > config.json && printf '#!/bin/sh\\n(sleep 1; echo corrupted > config.json) >/dev/null 2>&1 &\\necho started\\n' > dev.sh && chmod +x dev.sh && ${git}`,
    calls: [bash('toolu_damage', './dev.sh'), { wait: 2000 }, write('toolu_next', 'NOTES.md', 'notes\n')],
    damaged: ['config.json'],
    says: [/before this call, 1 path was changed outside any tool call: config\.json \(by pid \d+/],
    in: 'toolu_next'
  },
  {
    name: 'a formatter changes a file outside the one named',
    setup: `mkdir src lib && echo 'const foo = 1' > src/app.js && echo 'export const util = 1' > lib/util.js && printf '#!/bin/sh\\necho "export const util = 2 // reformatted" > lib/util.js\\n' > format.sh && chmod +x format.sh && ${git}`,
    calls: [bash('toolu_damage', "sed -i 's/foo/bar/' src/app.js && ./format.sh")],
    damaged: ['src/app.js', 'lib/util.js'],
    says: [/outside src\/app\.js.*: lib\/util\.js/]
  },
  {
    name: 'a build replaces a binary asset',
    setup: `mkdir assets && head -c 4096 /dev/urandom > assets/logo.png && printf '#!/bin/sh\\nhead -c 2048 /dev/urandom > assets/logo.png\\n' > build.sh && chmod +x build.sh && ${git}`,
    calls: [bash('toolu_damage', 'bash build.sh')],
    damaged: ['assets/logo.png'],
    says: [/~ assets\/logo\.png/, /outside build\.sh: assets\/logo\.png/]
  },
  {
    name: 'the agent\'s own Write replaces a secret',
    setup: `echo 'DB_PASSWORD=hunter2' > .env.local && ${git}`,
    calls: [write('toolu_damage', '.env.local', 'DB_PASSWORD=\n')],
    damaged: ['.env.local'],
    says: [/this Write call modified 1 path/, /secret or dotfile: \.env\.local/]
  }
]

/** The manifest with `paths` as in `before` (absent where before has none). */
function putBack (now: Record<string, ManifestEntry>, before: Record<string, ManifestEntry>, paths: string[]): Record<string, ManifestEntry> {
  const out = { ...now }
  for (const p of paths) {
    if (before[p] === undefined) delete out[p]
    else out[p] = before[p]
  }
  return out
}

if (fuseAvailable(t)) {
  for (const c of CASES) {
    t.test(c.name, async t => {
      const w = workspace(t, c.setup)
      w.ok('mount', w.ws)
      const skip = (rel: string) => rel === '.git' || rel.startsWith('.git/')
      const before = manifest(w.ws, { skip })
      // A call that changes nothing is told nothing.
      const [read] = agent(t, w, [{ id: 'toolu_read', tool: 'Bash', input: { command: 'ls -la && cat .git/HEAD' } }])
      t.equal(read.context, null, 'a call that changed nothing: no feedback')
      const results = agent(t, w, [...c.calls, write('toolu_after', 'AFTER.md', 'later work\n')])
      const told = results.find(r => r.id === (c.in ?? 'toolu_damage'))?.context ?? ''
      for (const re of c.says) t.match(told, re, `the feedback says ${re}`)
      t.ok(told.length <= 1500, 'the feedback is bounded')
      if (c.in === undefined) t.match(told, /Undo only this call: cpfs undo --step toolu_damage/, 'and how to undo the call')
      const now = manifest(w.ws, { skip })
      t.not(JSON.stringify(now), JSON.stringify(before), 'the damage is there')
      const dry = JSON.parse(w.ok('undo', '--step', 'toolu_damage', '--dry-run', '--json', w.ws))
      t.same(dry.conflicts, [], 'no later call touched the damaged paths')
      w.ok('undo', '--step', 'toolu_damage', w.ws)
      t.same(manifest(w.ws, { skip }), putBack(now, before, c.damaged), 'undo --step put back exactly the damaged paths; the later work stays')
      t.ok(fs.existsSync(join(w.ws, 'AFTER.md')), 'the call after it is kept')
      const expected = manifest(w.ws, { skip })
      w.ok('unmount', w.ws)
      t.same(manifest(w.ws, { skip }), expected, 'unmounted: the real directory holds it, verified')
    })
  }
}
