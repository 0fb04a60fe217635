// Model-based randomized test: seeded random sequences of file operations are applied both
// inside a cpfs mount and to a plain directory (the model). After every turn the two trees
// must be identical (paths, types, modes, bytes, link targets), and every operation must fail
// with the same error code on both sides. Then random rewinds are checked against the saved
// manifests of the turns they go back to, more work happens after each rewind, and finally
// the unmounted real directory must equal the last view.
//
// CI runs a bounded number of sequences. A longer run: npm run test:long, or
//   CPFS_MODEL_SEQUENCES=500 CPFS_MODEL_OPS=400 npx tap test/model.test.ts
// and to replay one failure: CPFS_MODEL_SEED=<seed printed by the failure>.
import t from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { fuseAvailable, manifest, workspace, type ManifestEntry } from './helpers.js'

const SEQUENCES = Number(process.env.CPFS_MODEL_SEQUENCES ?? 6)
const OPS = Number(process.env.CPFS_MODEL_OPS ?? 160)
const FIRST_SEED = Number(process.env.CPFS_MODEL_SEED ?? 0x5eed)

function prng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

interface Node { path: string, type: 'f' | 'd' | 'l' }

function list (root: string): Node[] {
  const out: Node[] = []
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name
      const st = fs.lstatSync(join(root, r))
      if (st.isDirectory()) {
        out.push({ path: r, type: 'd' })
        walk(r)
      } else out.push({ path: r, type: st.isSymbolicLink() ? 'l' : 'f' })
    }
  }
  walk('')
  return out
}

type Op = { name: string, run: (root: string) => void }

function makeOp (rand: () => number, model: string, counter: { n: number }): Op {
  const nodes = list(model)
  const pick = <T>(xs: T[]): T | undefined => xs.length ? xs[Math.floor(rand() * xs.length)] : undefined
  const files = nodes.filter(n => n.type === 'f')
  const dirs = ['', ...nodes.filter(n => n.type === 'd').map(n => n.path)]
  const any = nodes
  const fresh = () => {
    const dir = pick(dirs)!
    return (dir ? dir + '/' : '') + `n${counter.n++}`
  }
  const bytes = (n: number) => {
    const b = Buffer.alloc(n)
    for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256)
    return b
  }
  const sizes = [0, 1, 100, 4096, 65535, 65536, 65537, 200000]
  const r = rand()
  if (r < 0.16 || files.length === 0) {
    const p = fresh()
    const data = bytes(pick(sizes)!)
    return { name: `create ${p} (${data.length} B)`, run: root => fs.writeFileSync(join(root, p), data) }
  }
  if (r < 0.30) {
    const f = pick(files)!.path
    const off = pick([0, 10, 4095, 65530, 65536, 131072, 300000])!
    const data = bytes(pick([1, 7, 5000, 70000])!)
    return {
      name: `write ${f} @${off} (${data.length} B)`,
      run: root => {
        const fd = fs.openSync(join(root, f), 'r+')
        try { fs.writeSync(fd, data, 0, data.length, off) } finally { fs.closeSync(fd) }
      }
    }
  }
  if (r < 0.38) {
    const f = pick(files)!.path
    const data = bytes(pick([1, 300, 70000])!)
    return { name: `append ${f} (${data.length} B)`, run: root => fs.appendFileSync(join(root, f), data) }
  }
  if (r < 0.45) {
    const f = pick(files)!.path
    const size = pick([0, 1, 50, 65536, 65537, 100000, 400000])!
    return { name: `truncate ${f} to ${size}`, run: root => fs.truncateSync(join(root, f), size) }
  }
  if (r < 0.55) {
    const src = pick(any.filter(n => n.type !== 'd'))
    if (!src) return makeOp(rand, model, counter)
    const dst = rand() < 0.3 ? pick(files)!.path : fresh()
    return { name: `rename ${src.path} -> ${dst}`, run: root => fs.renameSync(join(root, src.path), join(root, dst)) }
  }
  if (r < 0.62) {
    const src = pick(dirs.filter(d => d))
    if (!src) return makeOp(rand, model, counter)
    const dst = fresh()
    return { name: `rename dir ${src} -> ${dst}`, run: root => fs.renameSync(join(root, src), join(root, dst)) }
  }
  if (r < 0.72) {
    const f = pick(any.filter(n => n.type !== 'd'))
    if (!f) return makeOp(rand, model, counter)
    return { name: `unlink ${f.path}`, run: root => fs.unlinkSync(join(root, f.path)) }
  }
  if (r < 0.80) {
    const p = fresh()
    return { name: `mkdir ${p}`, run: root => fs.mkdirSync(join(root, p)) }
  }
  if (r < 0.86) {
    const d = pick(dirs.filter(x => x))
    if (!d) return makeOp(rand, model, counter)
    return { name: `rmdir ${d}`, run: root => fs.rmdirSync(join(root, d)) }
  }
  if (r < 0.90) {
    const d = pick(dirs.filter(x => x))
    if (!d) return makeOp(rand, model, counter)
    return { name: `rm -rf ${d}`, run: root => fs.rmSync(join(root, d), { recursive: true }) }
  }
  if (r < 0.94) {
    const p = fresh()
    const target = pick(['../x', 'n1', 'some/where', pick(any)?.path ?? 'z'])!
    return { name: `symlink ${p} -> ${target}`, run: root => fs.symlinkSync(target, join(root, p)) }
  }
  const n = pick(any.filter(x => x.type !== 'l'))
  if (!n) return makeOp(rand, model, counter)
  const mode = n.type === 'd' ? pick([0o755, 0o700, 0o750, 0o2775])! : pick([0o644, 0o600, 0o755, 0o444, 0o4755])!
  return { name: `chmod ${mode.toString(8)} ${n.path}`, run: root => fs.chmodSync(join(root, n.path), mode) }
}

function errCode (fn: () => void): string {
  try {
    fn()
    return 'ok'
  } catch (err: any) {
    return err.code ?? String(err)
  }
}

const LOWER = `
mkdir -p src/lib src/empty docs/deep/er
for i in 1 2 3 4 5; do head -c $((i * 20000)) /dev/urandom > src/lib/f$i; done
echo hello > README && echo guide > docs/deep/er/guide.md && ln -s README readme-link
chmod 600 src/lib/f2
`

if (fuseAvailable(t)) {
  for (let s = 0; s < SEQUENCES; s++) {
    const seed = FIRST_SEED + s
    t.test(`random sequence, seed ${seed}`, async t => {
      const rand = prng(seed)
      const w = workspace(t, LOWER)
      const model = join(w.home, '..', 'model')
      w.run(`cp -a ${w.ws} ${model}`)
      const snaps = join(w.home, '..', 'snaps')
      fs.mkdirSync(snaps)
      const saved = new Map<number, Record<string, ManifestEntry>>()
      const snapshot = (turn: number) => {
        saved.set(turn, manifest(model))
        w.run(`rm -rf ${snaps}/${turn} && cp -a ${model} ${snaps}/${turn}`)
      }
      const counter = { n: 0 }
      const historyFile = join(tmpdir(), `cpfs-model-${seed}.log`)
      const where = (step: string) => {
        fs.writeFileSync(historyFile, history.join('\n') + '\n')
        return `seed ${seed}: ${step} (replay: CPFS_MODEL_SEED=${seed} CPFS_MODEL_SEQUENCES=1; all operations: ${historyFile})`
      }
      let head = Number(w.ok('mount', w.ws))
      snapshot(head)
      const history: string[] = []

      const work = (count: number): boolean => {
        for (let i = 0; i < count; i++) {
          const op = makeOp(rand, model, counter)
          history.push(op.name)
          const want = errCode(() => op.run(model))
          const got = errCode(() => op.run(w.ws))
          if (want !== got) {
            t.fail(where(`"${op.name}" gave ${got} in the mount and ${want} on disk; last ops: ${history.slice(-8).join('; ')}`))
            return false
          }
        }
        return true
      }
      const compare = (what: string): boolean => {
        const got = manifest(w.ws)
        const want = manifest(model)
        const same = JSON.stringify(got) === JSON.stringify(want)
        if (!same) t.same(got, want, where(`${what}; last ops: ${history.slice(-8).join('; ')}`))
        return same
      }

      let ok = true
      const turns = Math.max(2, Math.floor(OPS / 25))
      for (let i = 0; i < turns && ok; i++) {
        ok = work(Math.floor(OPS / turns)) && compare(`after the ops of turn ${head}`)
        head = Number(w.ok('turn', w.ws))
        history.push(`-- turn ${head}`)
        snapshot(head)
        ok = ok && compare(`right after sealing turn ${head - 1}`)
      }
      for (let r = 0; r < 3 && ok; r++) {
        const to = 1 + Math.floor(rand() * head)
        w.ok('rewind', String(to), w.ws)
        head = to
        history.push(`rewind ${to}`)
        ok = JSON.stringify(manifest(w.ws)) === JSON.stringify(saved.get(to))
        if (!ok) t.same(manifest(w.ws), saved.get(to), where(`rewind to ${to}`))
        w.run(`rm -rf ${model} && cp -a ${snaps}/${to} ${model}`)
        ok = ok && work(15) && compare(`work after rewinding to ${to}`)
        head = Number(w.ok('turn', w.ws))
        history.push(`-- turn ${head}`)
        snapshot(head)
      }
      const final = manifest(w.ws)
      w.ok('unmount', w.ws)
      if (ok) t.same(manifest(w.ws), final, where('the unmounted real directory equals the last view'))
      if (ok) {
        w.ok('rewind', '1', w.ws)
        t.same(manifest(w.ws), saved.get(1), where('offline rewind to turn 1 restores the original tree'))
      }
      t.ok(ok, where(`${history.length} operations compared`))
    })
  }
}
