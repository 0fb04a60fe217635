// Loads every installed package (require, or import for ES modules): what a test run or a
// dev server does at start, here for all 410 at once: many small files read and compiled.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const lock = JSON.parse(readFileSync(new URL('../package-lock.json', import.meta.url), 'utf8'))
const names = Object.keys(lock.packages)
  .filter(p => p.startsWith('node_modules/') && !p.slice(13).includes('node_modules/'))
  .map(p => p.slice(13))
// CLIs that start working when loaded, or print to the terminal.
const skip = new Set(['nodemon', 'napi-macros'])

describe('every installed package', () => {
  it('loads', async () => {
    let loaded = 0
    const failed = []
    for (const name of names) {
      if (skip.has(name)) continue
      try {
        require(name)
        loaded++
      } catch (err) {
        try {
          await import(name)
          loaded++
        } catch { failed.push(name) }
      }
    }
    assert.ok(loaded >= 300, `only ${loaded} of ${names.length} loaded; failed: ${failed.join(' ')}`)
  })
})
