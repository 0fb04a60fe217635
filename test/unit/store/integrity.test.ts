// How a store notices damage when it opens (src/store/integrity.ts): a real LevelDB, no mount
// (what cpfs fsck does with damage: fsck.test.ts; the mounted cases: test/integrity.test.ts).
import t from 'tap'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../../../src/store/store.js'
import { INTEGRITY_KEY, WITNESS_FILE, readWitness } from '../../../src/store/integrity.js'
import { fsckStore } from '../../../src/store/fsck.js'
import { encode } from '../../../src/store/codec.js'

const dir = fs.mkdtempSync(join(tmpdir(), 'cpfs-integrity-'))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
const put = (key: string, v: string) => ({ type: 'put' as const, key, value: Buffer.from(v) })

t.test('synced batches are counted inside and outside LevelDB; LevelDB behind the witness is a loss', async t => {
  const d = join(dir, 'a')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.batch([put('x', '1')], true)
  await s.batch([put('x', '2')], false)
  await s.batch([put('x', '3')], true)
  t.equal(readWitness(d)?.n, 2, 'the witness follows synced batches only')
  await s.close()
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.syncCount, 2, 'LevelDB holds the same number')
  await s.db.put(INTEGRITY_KEY, encode(1)) // as if LevelDB had lost the last synced batch
  await s.close()
  await t.rejects(Store.open(d, { workspace: '/w', create: false }), { code: 'STORE_CORRUPT', message: /lost its last 1 synced change/ })
  const r = await fsckStore(d, '/w')
  t.equal(r.clean, false, 'fsck reports it')
  t.match(r.repaired.join('\n'), /accepted the history/)
  t.equal((await fsckStore(d, '/w')).clean, true, 'and the store is clean after')
})

t.test('a store of an earlier version (no counter, no witness) opens as before', async t => {
  const d = join(dir, 'b')
  let s = await Store.open(d, { workspace: '/w', create: true })
  await s.batch([put('x', '1')], true)
  await s.db.del(INTEGRITY_KEY)
  await s.close()
  fs.rmSync(join(d, WITNESS_FILE))
  s = await Store.open(d, { workspace: '/w', create: false })
  t.equal(s.syncCount, 0)
  await s.batch([put('x', '2')], true)
  t.equal(readWitness(d)?.n, 1, 'and starts counting')
  await s.close()
})
