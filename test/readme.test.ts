// The README's main example runs as written, top to bottom: the block is read from README.md
// (so a change there that breaks it fails here) and run by bash, line by line as a user types
// it, with `cpfs` on the PATH and HOME holding a small project at ~/src/app.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CLI, ROOT, fuseAvailable, isMountedAt, workspace } from './helpers.js'

/** The first ```sh block under "## The main job". */
function mainExample (): string {
  const readme = fs.readFileSync(join(ROOT, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('\n## The main job'))
  const m = /```sh\n([\s\S]*?)```/.exec(section)
  if (!m) throw new Error('README.md: no sh block under "## The main job"')
  return m[1]
}

if (fuseAvailable(t)) {
  t.test('the README\'s main example runs as written, top to bottom', async t => {
    const w = workspace(t)
    const home = join(w.ws, '..', 'user')
    const app = join(home, 'src', 'app')
    const bin = join(w.ws, '..', 'bin')
    fs.mkdirSync(join(app, 'src'), { recursive: true })
    fs.writeFileSync(join(app, 'src', 'main.ts'), 'console.log("app")\n')
    fs.writeFileSync(join(app, 'README.md'), '# app\n')
    fs.mkdirSync(bin)
    fs.writeFileSync(join(bin, 'cpfs'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 })
    t.teardown(() => { if (isMountedAt(app)) w.sh(`umount -l ${app}`) })
    // Stop at the first line that fails, and name it.
    const r = w.sh(`export HOME=${JSON.stringify(home)} PATH=${JSON.stringify(bin)}:"$PATH"\ncd\ntrap 'echo "README line failed: $BASH_COMMAND" >&2' ERR\n${mainExample()}`, home)
    t.equal(r.code, 0, `every line succeeded${r.code ? ': ' + r.stderr.trim() : ''}`)
    t.notOk(isMountedAt(app), 'the last line unmounted ~/src/app')
    t.match(r.stdout, /^1\n/, 'cpfs mount printed the head turn, 1')
    t.match(r.stdout, /\+export function login/, 'cpfs diff 1 -- login.ts showed what turn 1 did to src/login.ts')
    t.match(r.stdout, /rewound to the start of turn 2\n/, 'cpfs rewind 2 went back')
    t.match(r.stdout, /redone: head is turn 2\n/, 'cpfs redo came back')
    t.match(r.stdout, /unmounted; applied \d+ operations/, 'cpfs unmount applied the result')
    t.equal(fs.readFileSync(join(app, 'src', 'login.ts'), 'utf8'), 'export function login () {}\n', 'the real directory holds the work of turn 1')
    t.equal(fs.readFileSync(join(app, 'notes.md'), 'utf8'), 'more work\n', 'and that of turn 2, which redo brought back')
  })
}
