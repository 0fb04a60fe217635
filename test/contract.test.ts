// The filesystem contract (test/contract/cases.ts) run against three filesystems: a plain
// directory (the reference: every case must pass there), the overlay in this process (no FUSE,
// no root), and a real cpfs mount with its daemon in its own process. Each filesystem is made
// once; each case gets a seed tree of its own in a directory of its own (c0, c1, ...).
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cases, kernelChecked } from './contract/cases.js'
import { inProcess, openSession, seed, throughKernel, type Filesystem } from './contract/filesystems.js'
import { fuseAvailable, workspace } from './helpers.js'

const UMASK = 0o022
process.umask(UMASK)
const names = Object.keys(cases)

type Tap = Parameters<Parameters<typeof t.test>[1]>[0]
/** One filesystem per case (null: it cannot run here, and said so), and what ends them. */
type Make = (tf: Tap, seeded: string) => Promise<Array<Filesystem> | null>

/** A directory with the seed tree once per case. */
function seededDir (dir: string): string {
  fs.mkdirSync(dir, { recursive: true })
  names.forEach((_, i) => { fs.mkdirSync(join(dir, `c${i}`)); seed(join(dir, `c${i}`)) })
  return dir
}

const filesystems: Record<string, Make> = {
  'plain directory': async (_tf, base) => {
    const dir = seededDir(join(base, 'plain'))
    return names.map((_, i) => throughKernel('plain directory', join(dir, `c${i}`)))
  },
  'overlay in process': async (tf, base) => {
    const lower = seededDir(join(base, 'lower'))
    const { session, close } = await openSession(lower, join(base, 'store'))
    tf.teardown(close)
    return names.map((_, i) => inProcess(session, `c${i}`, UMASK))
  },
  'cpfs mount': async (tf) => {
    if (!fuseAvailable(tf)) return null
    const e = workspace(tf)
    seededDir(e.ws)
    e.ok('mount', e.ws)
    tf.teardown(() => { e.cpfs('unmount', '--discard', e.ws) })
    return names.map((_, i) => throughKernel('cpfs mount', join(e.ws, `c${i}`)))
  }
}

for (const [fsName, make] of Object.entries(filesystems)) {
  t.test(fsName, async (tf) => {
    const base = fs.mkdtempSync(join(tmpdir(), 'cpfs-contract-'))
    tf.teardown(() => fs.rmSync(base, { recursive: true, force: true }))
    const each = await make(tf, base)
    if (!each) return
    for (const [i, name] of names.entries()) {
      // What the kernel checks before a request reaches a filesystem (a path through a file)
      // never reaches the overlay in process: those cases are the kernel's contract, not its.
      if (fsName === 'overlay in process' && kernelChecked.has(name)) continue
      await tf.test(name, async (tc) => { await cases[name](tc, each[i]) })
    }
  })
}
