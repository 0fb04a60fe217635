// Random file operations for the model-based tests: a seeded generator, and operations that
// run the same way on a mount and on a plain directory (the model).
import * as fs from 'node:fs'
import { join } from 'node:path'

export function prng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

export interface Node { path: string, type: 'f' | 'd' | 'l' }

export function list (root: string): Node[] {
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

export type Op = { name: string, run: (root: string) => void }

export function makeOp (rand: () => number, model: string, counter: { n: number }): Op {
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
  if (r < 0.92) {
    // A hard link: from then on a write, truncate or chmod through either name is one file's.
    const src = pick(files)
    if (!src) return makeOp(rand, model, counter)
    const p = fresh()
    return { name: `link ${src.path} -> ${p}`, run: root => fs.linkSync(join(root, src.path), join(root, p)) }
  }
  if (r < 0.95) {
    const p = fresh()
    const target = pick(['../x', 'n1', 'some/where', pick(any)?.path ?? 'z'])!
    return { name: `symlink ${p} -> ${target}`, run: root => fs.symlinkSync(target, join(root, p)) }
  }
  const n = pick(any.filter(x => x.type !== 'l'))
  if (!n) return makeOp(rand, model, counter)
  const mode = n.type === 'd' ? pick([0o755, 0o700, 0o750, 0o2775])! : pick([0o644, 0o600, 0o755, 0o444, 0o4755])!
  return { name: `chmod ${mode.toString(8)} ${n.path}`, run: root => fs.chmodSync(join(root, n.path), mode) }
}

export function errCode (fn: () => void): string {
  try {
    fn()
    return 'ok'
  } catch (err: any) {
    return err.code ?? String(err)
  }
}

export const LOWER = `
mkdir -p src/lib src/empty docs/deep/er
for i in 1 2 3 4 5; do head -c $((i * 20000)) /dev/urandom > src/lib/f$i; done
echo hello > README && echo guide > docs/deep/er/guide.md && ln -s README readme-link
chmod 600 src/lib/f2
`

/** LOWER with a real hard link: two names of one real file before the mount. */
export const LOWER_LINKED = LOWER + 'ln src/lib/f3 docs/f3-link\n'
