// The memory budgets (src/store/memory.ts): the environment wins over config.json, which wins
// over the defaults; a budget below its minimum is refused with the one line that says so; the
// chunk read cache keeps to its budget.
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DEFAULT_BUDGETS, memoryBudgets } from '../../../src/store/memory.js'
import { ChunkStore } from '../../../src/store/chunks.js'
import { Store } from '../../../src/store/store.js'
import { CHUNK_SIZE } from '../../../src/store/entries.js'

const home = fs.mkdtempSync(join(tmpdir(), 'cpfs-memory-'))
t.teardown(() => fs.rmSync(home, { recursive: true, force: true }))

const KEYS = ['CPFS_HOME', 'CPFS_CHUNK_CACHE', 'CPFS_DIRTY_BYTES', 'CPFS_INFLIGHT_BYTES', 'CPFS_LEVEL_CACHE', 'CPFS_HEAP']
function withEnv<T> (env: Record<string, string>, fn: () => T): T {
  const saved = Object.fromEntries(KEYS.map(k => [k, process.env[k]]))
  for (const k of KEYS) delete process.env[k]
  Object.assign(process.env, { CPFS_HOME: home }, env)
  try {
    return fn()
  } finally {
    for (const k of KEYS) {
      if (saved[k] === undefined) delete process.env[k]
      else process.env[k] = saved[k]
    }
  }
}

t.test('defaults, then config.json, then the environment', async t => {
  fs.rmSync(join(home, 'config.json'), { force: true })
  t.same(withEnv({}, memoryBudgets), DEFAULT_BUDGETS, 'no setting: the defaults')
  fs.writeFileSync(join(home, 'config.json'), JSON.stringify({ memory: { chunkCache: '1M', dirty: '4M', heap: '512M' } }))
  t.same(withEnv({}, memoryBudgets), { ...DEFAULT_BUDGETS, chunkCache: 1024 ** 2, dirty: 4 * 1024 ** 2, heap: 512 * 1024 ** 2 }, 'config.json')
  t.same(withEnv({ CPFS_DIRTY_BYTES: '2M', CPFS_LEVEL_CACHE: '0' }, memoryBudgets), { ...DEFAULT_BUDGETS, chunkCache: 1024 ** 2, dirty: 2 * 1024 ** 2, levelCache: 0, heap: 512 * 1024 ** 2 }, 'the environment wins')
  fs.rmSync(join(home, 'config.json'))
})

t.test('a budget below its minimum, or a "memory" that is not an object, is refused', async t => {
  t.throws(() => withEnv({ CPFS_DIRTY_BYTES: '64K' }, memoryBudgets), { code: 'BAD_CONFIG', message: /memory budget dirty \(CPFS_DIRTY_BYTES\) is 65536 bytes, below its minimum/ })
  t.throws(() => withEnv({ CPFS_INFLIGHT_BYTES: 'lots' }, memoryBudgets), { code: 'USAGE' })
  fs.writeFileSync(join(home, 'config.json'), JSON.stringify({ memory: '8M' }))
  t.throws(() => withEnv({}, memoryBudgets), { code: 'BAD_CONFIG', message: /"memory" in config.json is not an object/ })
  fs.rmSync(join(home, 'config.json'))
})

t.test('the chunk read cache keeps to its budget', async t => {
  const s = await Store.open(join(home, 'store'), { workspace: '/w', create: true })
  t.teardown(() => s.close())
  const c = new ChunkStore(s, 3 * CHUNK_SIZE)
  const hashes = []
  for (let i = 0; i < 10; i++) hashes.push(c.put(Buffer.alloc(CHUNK_SIZE, i + 1)))
  const ops: any[] = []
  const { hexes } = c.drain(ops)
  await s.batch(ops, false)
  c.landed(hexes)
  t.ok(c.cachedBytes <= 3 * CHUNK_SIZE, `cached ${c.cachedBytes} bytes`)
  for (let i = 0; i < 10; i++) t.ok(c.get(hashes[i]).equals(Buffer.alloc(CHUNK_SIZE, i + 1)), `chunk ${i} reads back`)
  t.ok(c.cachedBytes <= 3 * CHUNK_SIZE, 'and after reading them all')
})
