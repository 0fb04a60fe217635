// Model-based test of the history across sessions: seeded random sequences of the commands a
// user and an agent host run — mount, turn, rewind, undo, redo, unmount, unmount --discard,
// exec, kill -9 of the daemon and remount — with random file operations in between. A model
// (plain directories) says what the mount must show and, after every unmount, what the real
// directory must hold: what the head view holds is either applied or pending, never neither.
// Redo goes back one rewind, undo or discard at a time, also after writes and turns (the
// history is a tree: what was written since is kept as a branch).
//
//   CPFS_SESSIONS_SEQUENCES=50 npx tap test/sessions-model.test.ts   (more sequences)
//   CPFS_SESSIONS_SEED=<seed from a failure>                         (replay one)
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { daemonPid, exited, fuseAvailable, manifest, until, workspace, isMountedAt, type ManifestEntry } from './helpers.js'
import { LOWER, LOWER_LINKED, errCode, makeOp, prng } from './model-ops.js'

const SEQUENCES = Number(process.env.CPFS_SESSIONS_SEQUENCES ?? 4)
const STEPS = Number(process.env.CPFS_SESSIONS_STEPS ?? 45)
const FIRST_SEED = Number(process.env.CPFS_SESSIONS_SEED ?? 0x5e55)

type Tree = Record<string, ManifestEntry>

// Five sequences, each mounting, unmounting and killing daemons dozens of times: 70 to 310 s
// each on a loaded 2-core VM, more than tap's 600 s per file. A hang guard, not a deadline.
t.setTimeout(1_800_000)
// The sequences share nothing (each has its own workspace, store and daemons) and spend most
// of their time waiting for daemons to start and stop: three at a time cut the file's time in
// CI without changing what it covers.
t.jobs = Number(process.env.CPFS_SESSIONS_JOBS ?? 3)

if (fuseAvailable(t)) {
  const runs: Array<{ seed: number, lower: string, title: string }> = []
  for (let s = 0; s < SEQUENCES; s++) runs.push({ seed: FIRST_SEED + s, lower: LOWER, title: `random session sequence, seed ${FIRST_SEED + s}` })
  // A real file with two names before the mount (src/lib/f3 = docs/f3-link): seed 24149 once
  // lost writes through docs/f3-link after kill -9 and a remount.
  if (process.env.CPFS_SESSIONS_SEED === undefined) runs.push({ seed: 24149, lower: LOWER_LINKED, title: 'random session sequence over a real hard link, seed 24149' })
  if (process.env.CPFS_SESSIONS_LINKED !== undefined) for (const r of runs) r.lower = LOWER_LINKED
  for (const { seed, lower, title } of runs) {
    t.test(title, async t => {
      const rand = prng(seed)
      const w = workspace(t, lower)
      const model = join(w.home, '..', 'model') // what the mount shows (or would show)
      await w.runAsync(`cp -a ${w.ws} ${model}`)
      const history: string[] = []
      // The linked run shares its seed with the first sequence and runs beside it: its own log.
      const linked = lower === LOWER_LINKED
      const logFile = join(tmpdir(), `cpfs-sessions-${seed}${linked ? '-linked' : ''}.log`)
      t.teardown(() => fs.writeFileSync(logFile, history.join('\n') + '\n'))
      const where = (what: string) => {
        fs.writeFileSync(logFile, history.join('\n') + '\n')
        return `seed ${seed}: ${what} (replay: CPFS_SESSIONS_SEED=${seed} CPFS_SESSIONS_SEQUENCES=1${linked ? ' CPFS_SESSIONS_LINKED=1' : ''}; steps: ${logFile})`
      }
      const snapDir = join(w.home, '..', 'snaps')
      fs.mkdirSync(snapDir)
      let snapN = 0
      /** A saved copy of the model: its manifest and a directory to restore it from. */
      const save = async (): Promise<{ tree: Tree, dir: string }> => {
        const dir = join(snapDir, String(snapN++))
        await w.runAsync(`cp -a ${model} ${dir}`)
        return { tree: manifest(model), dir }
      }
      const restore = (snap: { dir: string }) => w.runAsync(`rm -rf ${model} && cp -a ${snap.dir} ${model}`)
      const status = async () => JSON.parse(await w.okAsync('status', w.ws, '--json'))

      // The model of cpfs's history: the view at the start of each turn, the redo stack, and
      // what the real directory holds (the applied view) with the turn starts it came from.
      let mounted = false
      let turns = [await save()]
      let redo: Array<{ turns: typeof turns, cur: Awaited<ReturnType<typeof save>> }> = []
      let real = await save()
      let appliedTurns = turns.slice()
      const counter = { n: 0 }
      let ok = true
      let probes = 0

      const check = (what: string, got: Tree, want: Tree): void => {
        if (!ok) return
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          ok = false
          t.same(got, want, where(`${what}; last steps: ${history.slice(-10).join('; ')}`))
        }
      }
      /** Turn numbers are cpfs's: when it opens a turn on its own (sealing an applied head), follow. */
      const syncTurns = async () => {
        const st = await status()
        while (turns.length < st.head) turns.push(await save())
        if (turns.length !== st.head) { ok = false; t.fail(where(`cpfs has ${st.head} turns, the model ${turns.length}`)) }
        return st
      }
      /**
       * A rewind to the start of the head turn when nothing was written in it changes nothing
       * and stores no redo step. Whether the head holds nothing is cpfs's to say (writes that
       * cancel out still leave entries): follow it, but only for a rewind to the head turn.
       */
      const alreadyThere = async (to: number, redoBefore: number): Promise<boolean> => to === turns.length && (await status()).redo === redoBefore
      const work = (n: number) => {
        for (let i = 0; i < n && ok; i++) {
          const op = makeOp(rand, model, counter)
          history.push(op.name)
          const want = errCode(() => op.run(model))
          const got = errCode(() => op.run(w.ws))
          if (want !== got) { ok = false; t.fail(where(`"${op.name}" gave ${got} in the mount and ${want} on disk`)) }
        }
      }
      const mount = async () => {
        await w.okAsync('mount', w.ws)
        mounted = true
        check('the mount shows the model', manifest(w.ws), manifest(model))
      }
      const unmount = async () => {
        await w.okAsync('unmount', w.ws)
        mounted = false
        real = await save()
        check('after unmount the real directory holds the head view', manifest(w.ws), real.tree)
        await syncTurns()
        appliedTurns = turns.slice()
        check('nothing is pending after unmount', { pending: (await status()).pending } as any, { pending: 0 } as any)
      }

      history.push('mount')
      await mount()
      for (let step = 0; step < STEPS && ok; step++) {
        const r = rand()
        if (!mounted) {
          if (r < 0.55) {
            history.push('mount')
            await mount()
          } else if (r < 0.75) {
            // An agent run in CI: mount, commands, apply.
            history.push('exec')
            const script = `echo ${Math.floor(rand() * 1e6)} > exec${counter.n} && rm -rf ${['src/empty', 'docs', 'nothing'][Math.floor(rand() * 3)]} && mkdir -p made${counter.n}/x`
            counter.n++
            await w.runAsync(script, model)
            const res = await w.cpfsAsync('exec', w.ws, '--', 'bash', '-c', script)
            if (res.code !== 0) { ok = false; t.fail(where(`exec failed: ${res.stderr}`)) }
            real = await save()
            check('exec applied the command\'s work', manifest(w.ws), real.tree)
            await syncTurns()
            appliedTurns = turns.slice()
          } else if (r < 0.85 && redo.length) {
            history.push('redo (offline)')
            await w.okAsync('redo', w.ws)
            const back = redo.pop()!
            turns = back.turns
            await restore(back.cur)
            real = await save()
            check('an offline redo applied the view it brings back', manifest(w.ws), real.tree)
            await syncTurns()
            appliedTurns = turns.slice()
          } else {
            const to = 1 + Math.floor(rand() * turns.length)
            history.push(`rewind ${to} (offline)`)
            const redoBefore = (await status()).redo
            await w.okAsync('rewind', String(to), w.ws)
            if (!await alreadyThere(to, redoBefore)) redo.push({ turns, cur: await save() })
            turns = turns.slice(0, to)
            await restore(turns[to - 1])
            real = await save()
            check(`an offline rewind to ${to} applied that turn's start`, manifest(w.ws), real.tree)
            await syncTurns()
            appliedTurns = turns.slice()
          }
          continue
        }
        if (r < 0.45) {
          work(1 + Math.floor(rand() * 6))
        } else if (r < 0.58) {
          history.push('turn')
          await w.okAsync('turn', w.ws)
          turns.push(await save())
        } else if (r < 0.68) {
          const to = 1 + Math.floor(rand() * turns.length)
          history.push(`rewind ${to}`)
          const redoBefore = (await status()).redo
          await w.okAsync('rewind', String(to), w.ws)
          if (!await alreadyThere(to, redoBefore)) redo.push({ turns, cur: await save() })
          turns = turns.slice(0, to)
          await restore(turns[to - 1])
          check(`rewind to ${to}`, manifest(w.ws), manifest(model))
        } else if (r < 0.74) {
          history.push('redo')
          const res = await w.cpfsAsync('redo', w.ws)
          if (redo.length) {
            if (res.code !== 0) { ok = false; t.fail(where(`redo failed: ${res.stderr}`)) }
            const back = redo.pop()!
            turns = back.turns
            await restore(back.cur)
            check('redo', manifest(w.ws), manifest(model))
          } else if (res.code === 0) {
            ok = false
            t.fail(where('redo succeeded where the model had nothing to redo'))
          }
        } else if (r < 0.84) {
          history.push('unmount')
          await unmount()
        } else if (r < 0.92) {
          history.push('unmount --discard')
          const pendingBefore = (await status()).pending
          await w.okAsync('unmount', w.ws, '--discard')
          mounted = false
          check('discard leaves the real directory as it was', manifest(w.ws), real.tree)
          const st = await status()
          if (st.pending !== 0) { ok = false; t.fail(where(`discard left ${st.pending} turns pending`)) }
          // Nothing pending: nothing to set aside (and the redo stack stays as it was).
          if (pendingBefore > 0) {
            redo.push({ turns, cur: await save() })
            turns = appliedTurns.slice(0, st.head - 1)
            turns.push(real)
            await restore(real)
          }
        } else {
          history.push('kill -9 the daemon, mount again')
          const pid = daemonPid(w.home)
          process.kill(pid, 'SIGKILL')
          // Wait for the daemon to be gone, then for the mount to answer ENOTCONN (hang guards,
          // not deadlines). The question is a lookup of a name never asked before: the kernel
          // answers a stat of the root (its attributes, kept for the cache timeout, a day) and
          // a listing of it (kept too) without the daemon, so a wait on those only ever ended
          // at the hang guard, 120 s per kill.
          if (!await exited(pid)) { ok = false; t.fail(where(`the daemon ${pid} is still there after SIGKILL`)) }
          const gone = await until(() => { try { fs.statSync(join(w.ws, `.probe-${probes++}`)); return false } catch (e: any) { return e.code === 'ENOTCONN' } }, 20)
          if (!gone) { ok = false; t.fail(where('the mount did not answer ENOTCONN after its daemon was killed')) }
          const cur = manifest(model)
          await w.okAsync('mount', w.ws)
          check('after kill -9 and remount the view is intact', manifest(w.ws), cur)
        }
      }
      if (mounted && ok) {
        history.push('unmount')
        await unmount()
      }
      if (isMountedAt(w.ws)) await w.okAsync('unmount', w.ws)
      t.ok(ok, where(`${history.length} steps compared`))
    })
  }
}
