// Who changed what (issue 22): every change the mount records is attributed to the process
// that made it. The FUSE edge says which thread's request is being served (`caller`); each
// head key that request changes is noted with that thread's process (processes.ts), and every
// batch that stores the key's entry stores the list with it, in the entry's own record (`by`,
// store/codec.ts): no record of its own, so attribution adds no key to LevelDB.
// Changes cpfs makes itself (rewind, restore, plans) are served by no request: the turn
// records say who asked for those.
import { encode } from '../store/codec.js'
import { processKey, type BatchOp } from '../store/keys.js'
import { Processes } from './processes.js'

export class Attribution {
  /** The thread id of the FUSE request being served; 0 between requests. */
  caller = 0
  /** Set by the mount when it tells callers (CPFS_ATTRIBUTION=0 leaves it off): steps then have no owner. */
  recording = false
  /**
   * The head layer's keys changed by a process this session: their processes, in the order
   * they first changed it (one id alone, the common case, is kept without an array).
   */
  private head = new Map<string, string | string[]>()
  /**
   * The keys the head layer held when it became the head (a head turn that a restarted daemon
   * or a redo opened again), whose stored records may name processes: each is read once, when
   * it changes again, and no other key costs a read on the request path.
   */
  private storedKeys: Set<string> | null = null

  /** `stored(key)`: the processes the head layer's stored record of key names. */
  constructor (private readonly stored: (key: string) => string[] | undefined, private readonly processes = new Processes()) {}

  /** Head key `key` changed: by the caller, when a request is being served. */
  note (key: string): void {
    if (this.caller === 0) return
    const id = this.processes.idOf(this.caller)
    if (id === null) return
    const by = this.head.get(key)
    if (by === id) return
    if (by === undefined) {
      const before = this.storedKeys?.delete(key) === true ? this.stored(key) : undefined
      this.head.set(key, before === undefined || before.length === 0 ? id : before.includes(id) ? before : [...before, id])
    } else if (typeof by === 'string') this.head.set(key, [by, id])
    else if (!by.includes(id)) by.push(id)
  }

  /** The id of process `pid` (its record goes with the next batch); null when it is gone. */
  processOf (pid: number): string | null {
    return this.processes.idOf(pid)
  }

  /** The processes that changed head key `key` (for its entry's record), or undefined. */
  byOf (key: string): string[] | undefined {
    const by = this.head.get(key)
    return by === undefined ? undefined : typeof by === 'string' ? [by] : by
  }

  /** The records of processes met since the last batch. */
  processOps (ops: BatchOp[]): void {
    for (const [id, rec] of this.processes.take()) ops.push({ type: 'put', key: processKey(id), value: encode(rec) })
  }

  /**
   * Another layer is the head now (opened, sealed, rewound, redone), holding `keys` already:
   * its processes start over (an empty head, as nearly all are, reads no record ever).
   */
  newHead (keys: Iterable<string>): void {
    this.head = new Map()
    const held = new Set(keys)
    this.storedKeys = held.size > 0 ? held : null
  }
}
