// Unit tests mirror src/ (docs/decisions.md, "The house (issue 20)"): the tests of
// src/<folder>/<module>.ts are test/unit/<folder>/<module>.test.ts (scripts/<name>.mjs:
// test/unit/scripts/<name>.test.ts). Every file here must name a module that exists, so a
// module renamed without its test fails this; modules without a unit test are listed, not failed.
import t from 'tap'
import * as fs from 'node:fs'
import { join, relative } from 'node:path'
import { ROOT } from '../helpers.js'

const UNIT = join(ROOT, 'test', 'unit')
/** Files here that test no module of their own. */
const OWN = new Set(['layout.test.ts', 'helpers.ts'])

function files (dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap(d => d.isDirectory() ? files(join(dir, d.name)) : [join(dir, d.name)])
}

/** The module a unit test file is for, relative to the repository, or null when the name does not say. */
export function moduleOf (test: string): string | null {
  const m = /^(.*)\.test\.ts$/.exec(test)
  if (!m) return null
  return m[1].startsWith('scripts/') ? `${m[1]}.mjs` : `src/${m[1]}.ts`
}

t.test('every unit test file is named after a module that exists', async t => {
  const tests = files(UNIT).map(f => relative(UNIT, f)).filter(f => !OWN.has(f))
  t.ok(tests.length > 20, `${tests.length} test files`)
  for (const f of tests) {
    const mod = moduleOf(f)
    t.ok(mod !== null && fs.existsSync(join(ROOT, mod)), `test/unit/${f} tests ${mod ?? '(not a .test.ts file)'}`)
  }
  t.equal(moduleOf('store/wal.test.ts'), 'src/store/wal.ts')
  t.equal(moduleOf('scripts/sizes.test.ts'), 'scripts/sizes.mjs')
  t.equal(moduleOf('store/wal.ts'), null)
})

t.test('modules without a unit test (listed, not failed)', async t => {
  const tested = new Set(files(UNIT).map(f => moduleOf(relative(UNIT, f))))
  const untested = files(join(ROOT, 'src')).filter(f => f.endsWith('.ts')).map(f => relative(ROOT, f)).filter(m => !tested.has(m)).sort()
  t.comment(`${untested.length} modules of src/ have no unit test in test/unit/ (the integration tests in test/ may cover them):\n  ${untested.join('\n  ')}`)
  t.pass('listed')
})
