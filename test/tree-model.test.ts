// Model-based test of the history tree (issue 23): seeded random sequences of file operations,
// turns, rewinds to turns of the head's line, to turns of other branches (bN:T) and to their
// tips (bN), and redos, run in a real mount beside a plain directory (the model). The model
// keeps what cpfs must never lose: the tree at the start of every turn (by the turn's layer, as
// cpfs log --all --json names it) and at every tip the workspace left. After every move the
// mount must equal the model's saved tree; at the end every turn and tip cpfs lists is visited
// and checked, then retention (prune --keep-branches, --keep-turns) runs and every turn it kept
// is checked again, offline; the real directory must equal the last view.
//
// A longer run: CPFS_TREE_SEQUENCES=50 CPFS_TREE_MOVES=120 npx tap test/tree-model.test.ts;
// to replay one failure: CPFS_TREE_SEED=<seed printed by the failure>.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { fuseAvailable, manifest, workspace, type Env } from './helpers.js'
import { LOWER, errCode, makeOp, prng } from './model-ops.js'

const SEQUENCES = Number(process.env.CPFS_TREE_SEQUENCES ?? 2)
const MOVES = Number(process.env.CPFS_TREE_MOVES ?? 36)
const FIRST_SEED = Number(process.env.CPFS_TREE_SEED ?? 0x7ee)

interface Listed { turn: number, layer: number, head: boolean }
interface Branch { branch: string, turns: Array<Listed & { ref: string }> }

async function tree (w: Env): Promise<{ turns: Listed[], branches: Branch[] }> {
  return JSON.parse(await w.okAsync('log', '--all', '--json', w.ws))
}

// The sequences share nothing (a workspace and daemon each) and mostly wait on cpfs: two at a time.
t.jobs = 2

if (fuseAvailable(t)) {
  for (let s = 0; s < SEQUENCES; s++) {
    const seed = FIRST_SEED + s
    t.test(`random tree of turns, seed ${seed}`, async t => {
      const rand = prng(seed)
      const w = workspace(t, LOWER)
      const model = join(w.home, '..', 'model')
      const snaps = join(w.home, '..', 'snaps')
      fs.mkdirSync(snaps)
      await w.runAsync(`cp -a ${w.ws} ${model}`)
      const moves: string[] = []
      const where = (what: string): string => `seed ${seed}: ${what} (moves: ${moves.join('; ')}; replay: CPFS_TREE_SEED=${seed} CPFS_TREE_SEQUENCES=1)`
      // Saved trees: `s<layer>` the start of the turn with that layer, `t<layer>` the tip whose
      // head turn had that layer when the workspace left it.
      const save = async (key: string): Promise<void> => { await w.runAsync(`rm -rf ${snaps}/${key} && cp -a ${model} ${snaps}/${key}`) }
      const saved = (key: string): boolean => fs.existsSync(join(snaps, key))
      const headLayer = async (): Promise<number> => (await tree(w)).turns.at(-1)!.layer
      /** The mount must now be the saved tree `key`; the model becomes it too. */
      const arrived = async (key: string, what: string): Promise<boolean> => {
        const want = manifest(join(snaps, key))
        const same = JSON.stringify(manifest(w.ws)) === JSON.stringify(want)
        if (!same) t.same(manifest(w.ws), want, where(what))
        await w.runAsync(`rm -rf ${model} && cp -a ${snaps}/${key} ${model}`)
        return same
      }
      /** The redo chain as the model knows it: the tips rewinds left, most recent last. */
      const redo: number[] = []
      /** Leave the head's line: its tip is saved, and redo goes back to it when the move dropped something. */
      const leave = async (args: string[], expect: (layer: number) => string | null, what: string): Promise<boolean> => {
        const tip = await headLayer()
        await save(`t${tip}`)
        const r = JSON.parse(await w.okAsync('rewind', ...args, w.ws, '--json'))
        moves.push(`rewind ${args.join(' ')}`)
        if (r.dropped > 0) redo.push(tip)
        const now = await headLayer()
        const key = expect(now)
        if (key === null) return true
        if (!saved(`s${now}`)) await w.runAsync(`cp -a ${snaps}/${key} ${snaps}/s${now}`)
        return await arrived(key, what)
      }
      const counter = { n: 0 }
      await w.okAsync('mount', w.ws)
      const origin = await headLayer()
      await save(`s${origin}`)
      let ok = true
      for (let m = 0; m < MOVES && ok; m++) {
        const r = rand()
        const { turns, branches } = await tree(w)
        const branchTurns = branches.flatMap(b => b.turns)
        if (r < 0.35) {
          for (let i = 0; i < 6 && ok; i++) {
            const op = makeOp(rand, model, counter)
            moves.push(op.name)
            const want = errCode(() => op.run(model))
            const got = errCode(() => op.run(w.ws))
            if (want !== got) { ok = false; t.fail(where(`"${op.name}" gave ${got} in the mount and ${want} on disk`)) }
          }
        } else if (r < 0.55 || (r >= 0.9 && redo.length === 0)) {
          await w.okAsync('turn', w.ws)
          moves.push('turn')
          await save(`s${(await headLayer())}`)
        } else if (r < 0.7) {
          const to = turns[Math.floor(rand() * turns.length)]
          ok = await leave([String(to.turn)], () => `s${to.layer}`, `rewind ${to.turn} of the head's line`)
        } else if (r < 0.82 && branchTurns.length) {
          const to = branchTurns[Math.floor(rand() * branchTurns.length)]
          ok = await leave([to.ref], () => `s${to.layer}`, `rewind ${to.ref}`)
        } else if (r < 0.9 && branches.length) {
          const b = branches[Math.floor(rand() * branches.length)]
          const tip = b.turns.at(-1)!.layer
          ok = await leave([b.branch], (now) => now === tip ? `t${tip}` : null, `rewind ${b.branch} (its tip)`)
          if (ok && (await headLayer()) !== tip) { ok = false; t.fail(where(`rewind ${b.branch}: the head is not its tip turn`)) }
        } else if (redo.length) {
          await save(`t${(await headLayer())}`)
          await w.okAsync('redo', w.ws)
          moves.push('redo')
          const back = redo.pop()!
          const head = await headLayer()
          ok = head === back || (t.fail(where(`redo: the head is layer ${head}, not ${back}`)), false)
          ok = ok && await arrived(`t${back}`, 'redo: back to the tip the last rewind left')
        }
      }
      /** Where the turn with this layer is now: its number on the head's line, or bN:T. */
      const refOf = async (layer: number): Promise<string | null> => {
        const { turns, branches } = await tree(w)
        const own = turns.find(x => x.layer === layer)
        if (own) return String(own.turn)
        return branches.flatMap(x => x.turns).find(x => x.layer === layer)?.ref ?? null
      }
      /** Every turn cpfs lists starts with what the model saved for it (a rewind to each, found by its layer). */
      const visitAll = async (what: string, offline: boolean): Promise<boolean> => {
        const { turns, branches } = await tree(w)
        // The head's turn first: a rewind elsewhere leaves it, and an empty head is kept by nobody (its start is another turn's).
        for (const layer of [...turns.slice().reverse(), ...branches.flatMap(x => x.turns)].map(x => x.layer)) {
          if (!saved(`s${layer}`)) return t.fail(where(`${what}: the turn of layer ${layer} is one the model never saw (${JSON.stringify({ turns: turns.map(x => [x.turn, x.layer]), branches: branches.map(x => [x.branch, x.turns.map(y => [y.ref, y.layer])]) })})`))
          const ref = await refOf(layer)
          if (ref === null) return t.fail(where(`${what}: the turn of layer ${layer} is gone`))
          await w.okAsync('rewind', ref, w.ws)
          moves.push(`rewind ${ref}`)
          if (!await arrived(`s${layer}`, `${what}: ${ref} (layer ${layer})${offline ? ', offline' : ''}`)) return false
          const now = await headLayer() // the turn the rewind opened starts there too
          if (!saved(`s${now}`)) await w.runAsync(`cp -a ${snaps}/s${layer} ${snaps}/s${now}`)
        }
        return true
      }
      if (ok) ok = await visitAll('every turn kept', false)
      if (ok) {
        await w.okAsync('unmount', w.ws)
        const before = (await tree(w)).branches.length
        const keep = Math.floor(before / 2)
        await w.okAsync('prune', w.ws, '--keep-branches', String(keep), '--keep-turns', '4')
        t.equal((await tree(w)).branches.length, Math.min(before, keep), where('prune --keep-branches keeps that many'))
        // Turns merged by --keep-turns are one new turn 1: the original tree.
        const first = (await tree(w)).turns[0].layer
        if (!saved(`s${first}`)) await w.runAsync(`cp -a ${snaps}/s${origin} ${snaps}/s${first}`)
        ok = await visitAll('after prune', true)
      }
      if (ok) t.equal((await w.cpfsAsync('fsck', w.ws)).code, 0, where('fsck: nothing wrong'))
      t.ok(ok, where(`${moves.length} moves checked`))
    })
  }
}
