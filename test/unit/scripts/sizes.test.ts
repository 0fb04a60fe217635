// The house's size rules hold (docs/decisions.md, "Sizes"): no file in src/ over 500 lines, no
// class over 300, no function over 80. An exception must be named in EXCEPTIONS and in
// docs/decisions.md with its reason; there are none today.
import t from 'tap'
import { join } from 'node:path'
// @ts-expect-error: a plain ES module script, without types
import { breaches } from '../../../scripts/sizes.mjs'
import { ROOT } from '../../helpers.js'

const EXCEPTIONS = new Set<string>([])

t.test('no file, class or function in src/ is over its size', async (t) => {
  const cwd = process.cwd()
  process.chdir(ROOT)
  try {
    const found: string[] = breaches(join(ROOT, 'src'))
    t.same(found.filter(line => !EXCEPTIONS.has(line.replace(/ \d+$/, ''))), [], 'breaches (node scripts/sizes.mjs lists them)')
  } finally {
    process.chdir(cwd)
  }
})

t.test('the checker finds a breach when there is one', async (t) => {
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const dir = mkdtempSync(join(tmpdir(), 'cpfs-sizes-'))
  try {
    writeFileSync(join(dir, 'long.ts'), 'export function long (): number {\n' + '  let x = 0\n'.repeat(90) + '  return x\n}\n')
    const found: string[] = breaches(dir)
    t.equal(found.length, 1)
    t.match(found[0], /^function .*long\.ts:long 93$/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
