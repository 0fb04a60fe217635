// Attribution (src/session/attribution.ts, processes.ts): a change noted while a request of
// this process is served becomes one `a` record with the batch that stores its key, and the
// process (with its parents) one `p` record, once. Real /proc, real child processes.
import t from 'tap'
import { spawn } from 'node:child_process'
import { Attribution } from '../../../src/session/attribution.js'
import { Processes, type ProcessRecord } from '../../../src/session/processes.js'
import { decode } from '../../../src/store/codec.js'
import { type BatchOp } from '../../../src/store/keys.js'
import { decodeEntry, decodeEntryBy, encodeEntry, entryBy } from '../../../src/store/codec.js'
import type { Entry } from '../../../src/store/entries.js'

const records = (ops: BatchOp[]): Map<string, ProcessRecord> => new Map(ops.filter(op => op.key[0] === 'p' && op.type === 'put').map(op => [op.key.slice(1), decode<ProcessRecord>((op as { value: Buffer }).value)]))

t.test('a process id names the process: pid, start, boot; its record has its command line and its parent', async t => {
  const p = new Processes()
  const id = p.idOf(process.pid)
  t.match(id, new RegExp(`^[0-9a-f]{1,8}\\.${process.pid}\\.\\d+$`), 'boot, pid, start ticks')
  t.equal(p.idOf(process.pid), id, 'the same process, the same id')
  const recs = new Map(p.take())
  const mine = recs.get(id!)!
  t.equal(mine.pid, process.pid)
  t.equal(mine.uid, process.getuid!())
  t.match(mine.command, /node/, 'its command line')
  t.ok(Math.abs(mine.started - (Date.now() - process.uptime() * 1000)) < 5000, 'its start time, from /proc')
  t.ok(mine.parent !== null && recs.has(mine.parent), 'its parent recorded with it')
  t.equal(recs.get(mine.parent!)!.pid, process.ppid, 'the parent is the parent process')
  t.same(p.take(), [], 'each record is handed out once')
  t.equal(p.idOf(0), null, 'no caller (0): no process')
  t.equal(p.idOf(2 ** 22 + 12345), null, 'a pid that is not there: no process')
})

t.test('another process: its own id and record; it is gone, its id stays what it was for the rest of the second', async t => {
  const p = new Processes()
  const child = spawn('sleep', ['5'], { stdio: 'ignore' })
  await new Promise(resolve => child.on('spawn', resolve))
  const id = p.idOf(child.pid!)
  t.not(id, p.idOf(process.pid), 'not ours')
  const recs = new Map(p.take())
  t.equal(recs.get(id!)!.command, 'sleep 5')
  t.equal(recs.get(recs.get(id!)!.parent!)!.pid, process.pid, 'its parent is this test')
  child.kill()
  await new Promise(resolve => child.on('close', resolve))
})

t.test('a change is noted only while a request is served; each key keeps its processes in order, once each', async t => {
  const stored = new Map<string, string[]>([['/kept.txt', ['earlier.1.1']]])
  const reads: string[] = []
  const a = new Attribution((key) => { reads.push(key); return stored.get(key) })
  a.newHead(['/kept.txt']) // a head layer that holds a record already (a restarted daemon)
  a.note('/not-served') // caller 0: cpfs itself
  t.equal(a.byOf('/not-served'), undefined, 'nothing for a change no request made')
  a.caller = process.pid
  a.note('/a.txt')
  a.note('/a.txt')
  a.note('/kept.txt')
  a.caller = 0
  const me = a.byOf('/a.txt')
  t.equal(me?.length, 1, 'one process, however many changes')
  t.match(me?.[0], new RegExp(`\\.${process.pid}\\.`), 'this process')
  t.same(a.byOf('/kept.txt'), ['earlier.1.1', me?.[0]], 'a key the stored head named keeps its earlier processes first')
  t.same(reads, ['/kept.txt'], 'only a key the head held is read from the store, once')
  const ops: BatchOp[] = []
  a.processOps(ops)
  t.ok([...records(ops).values()].some(r => r.pid === process.pid), 'the process record goes with the next batch')
  const again: BatchOp[] = []
  a.processOps(again)
  t.same(again, [], 'once')
  a.newHead([])
  t.equal(a.byOf('/a.txt'), undefined, 'a new head starts with no process')
  a.caller = process.pid
  a.note('/kept.txt')
  t.same(a.byOf('/kept.txt'), me, 'and reads no stored record when it is empty')
  t.same(reads, ['/kept.txt'], 'not one')
})

t.test('an entry\'s record carries its processes; decoding the entry leaves them out', async t => {
  const e: Entry = { kind: 'd', mode: 0o755, uid: 0, gid: 0, atime: 1, mtime: 2, ctime: 3, ino: 9 }
  const buf = encodeEntry(e, ['x.1.2', 'x.3.4'])
  t.same(entryBy(buf), ['x.1.2', 'x.3.4'])
  t.same(decodeEntry(buf), e, 'the entry as it was')
  t.equal(entryBy(encodeEntry(e)), undefined, 'none recorded: none read')
  const f: Entry = { kind: 'f', mode: 0o644, uid: 0, gid: 0, atime: 1, mtime: 2, ctime: 3, ino: 10, size: 1, chunks: new Map([[0, Buffer.alloc(32, 1)]]) }
  t.same(entryBy(encodeEntry(f, ['x.5.6'])), ['x.5.6'], 'a file\'s too')
  t.same(decodeEntry(encodeEntry(f, ['x.5.6'])), f)
  t.same(decodeEntryBy(encodeEntry(f, ['x.5.6'])), { entry: f, by: ['x.5.6'] }, 'both from one decoding (gc)')
  t.same(decodeEntryBy(encodeEntry(e)), { entry: e, by: undefined })
})
