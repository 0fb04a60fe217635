// File watchers after the daemon changes the tree itself: rewind, redo, undo and a mounted
// restore must reach inotify watchers (node's fs.watch, which jest --watch, tsc -w and webpack
// build on; inotifywait when installed) as events for the paths that changed — and producing
// those events must record nothing (the redo stack and the head turn stay as they were).
import t from 'tap'
import * as fs from 'node:fs'
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { fuseAvailable, sleep, until, workspace } from './helpers.js'

const TREE = 'echo keep > keep && echo one > mod && mkdir d && echo x > d/x'

interface Seen { event: string, name: string }

/** Watch dirs with fs.watch; `until` waits for events matching every wanted [event, name]. */
function watchDirs (dirs: Record<string, string>) {
  const seen: Seen[] = []
  const watchers = Object.entries(dirs).map(([prefix, dir]) => fs.watch(dir, (event, name) => {
    seen.push({ event, name: prefix + String(name) })
  }))
  return {
    seen,
    /**
     * Wait until each wanted event came (the touches follow the command's answer), however long
     * that takes; only a hang ends the wait without them, and the assertions on `got` fail.
     */
    async until (wanted: Array<[string, string]>): Promise<Seen[]> {
      await until(() => wanted.every(([e, n]) => seen.some(s => s.event === e && s.name === n)))
      const got = seen.splice(0)
      return got
    },
    close: () => { for (const w of watchers) w.close() }
  }
}

const has = (got: Seen[], event: string, name: string) => got.some(s => s.event === event && s.name === name)

if (fuseAvailable(t)) {
  t.test('rewind, redo, undo and restore reach fs.watch watchers, and record nothing', async t => {
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo two >> mod && echo new > added && rm keep && mkdir nd && echo y > nd/y')
    w.ok('turn', w.ws)
    // Watchers stat what they watch: the kernel knows these names.
    w.run('stat added mod nd nd/y d/x > /dev/null')
    const watch = watchDirs({ '': w.ws, 'nd/': join(w.ws, 'nd') })
    t.teardown(watch.close)

    w.ok('rewind', '1', w.ws)
    let got = await watch.until([['rename', 'added'], ['change', 'mod'], ['change', 'keep'], ['rename', 'nd'], ['rename', 'nd/y']])
    t.ok(has(got, 'rename', 'added'), 'a file the rewind removed: rename (IN_DELETE)')
    t.ok(has(got, 'rename', 'nd') && has(got, 'rename', 'nd/y'), 'a removed directory and the file in it')
    t.ok(has(got, 'change', 'mod'), 'a file the rewind changed back: change (IN_MODIFY)')
    t.ok(has(got, 'change', 'keep'), 'a file the rewind brought back: change')
    t.notOk(got.some(s => s.name === 'd/x' || s.name === 'd'), 'nothing for paths the rewind did not touch')
    t.equal(w.run('cat mod keep'), 'one\nkeep\n', 'the content is the rewound one')
    let st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(st.redo, 1, 'the events did not clear the redo stack')
    t.equal(JSON.parse(w.ok('log', w.ws, '--json')).at(-1).files, 0, 'and recorded nothing in the head turn')
    watch.close()

    const top = watchDirs({ '': w.ws })
    t.teardown(top.close)
    w.ok('redo', w.ws)
    got = await top.until([['rename', 'keep'], ['change', 'added'], ['change', 'mod']])
    t.ok(has(got, 'rename', 'keep'), 'redo: a removed file')
    t.ok(has(got, 'change', 'added') && has(got, 'change', 'mod'), 'redo: files that are back or changed')
    t.ok(has(got, 'change', 'nd') || has(got, 'rename', 'nd'), 'redo: a directory that is back')
    st = JSON.parse(w.ok('status', w.ws, '--json'))
    t.equal(st.head, 2, 'redo happened')
    t.equal(JSON.parse(w.ok('log', w.ws, '--json')).at(-1).files, 0, 'the head turn is still empty')

    w.run('echo three > mod && cat mod > /dev/null')
    await sleep(200)
    top.seen.splice(0)
    w.ok('undo', w.ws)
    got = await top.until([['change', 'mod']])
    t.ok(has(got, 'change', 'mod'), 'undo: the file it changed back')
    t.equal(w.run('cat mod'), 'one\ntwo\n')

    w.ok('restore', '1', join(w.ws, 'mod'), join(w.ws, 'added'), w.ws)
    got = await top.until([['change', 'mod'], ['rename', 'added']])
    t.ok(has(got, 'change', 'mod'), 'restore: a restored file')
    t.ok(has(got, 'rename', 'added'), 'restore: a file that did not exist then', { got })
    t.equal(w.run('cat mod; ls'), 'one\nd\nmod\nnd\n', 'restore changed exactly that')
    top.close()
    // The toucher is done with the mount (or skips the rest): unmount is not busy.
    w.ok('rewind', '1', w.ws)
    w.ok('unmount', w.ws, '--discard')
  })

  t.test('inotifywait sees what an editor save and rm look like', async t => {
    if (spawnSync('inotifywait', ['--help']).error) {
      // CI installs it (.ci/run): there, a missing tool is a failure, never a skip.
      if (process.env.CI) t.fail('inotifywait is missing: .ci/run installs inotify-tools')
      else t.skip('SKIPPED: inotifywait is not installed (apt-get install inotify-tools): the raw inotify events are not checked')
      return
    }
    const w = workspace(t, TREE)
    w.ok('mount', w.ws)
    w.run('echo two >> mod && echo new > added')
    w.ok('turn', w.ws)
    w.run('stat added mod > /dev/null')
    const iw = spawn('inotifywait', ['-m', '-r', '--format', '%e %w%f', w.ws], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    iw.stdout.on('data', (d) => { out += d })
    await new Promise<void>((resolve) => iw.stderr.on('data', (d) => { if (/established/.test(String(d))) resolve() }))
    w.ok('rewind', '1', w.ws)
    await until(() => /CLOSE_WRITE\S* \S*mod/.test(out))
    iw.kill()
    t.match(out, new RegExp(`DELETE ${w.ws}/added`), 'IN_DELETE for the removed file')
    t.match(out, new RegExp(`MODIFY ${w.ws}/mod`), 'IN_MODIFY for the changed file')
    t.match(out, new RegExp(`CLOSE_WRITE\\S* ${w.ws}/mod`), 'IN_CLOSE_WRITE, as after an editor\'s save')
    w.ok('unmount', w.ws, '--discard')
  })
}
