// cpfs fsck's first step: LevelDB's table files, checked block by block against their CRC32C
// (tables.ts) before LevelDB opens the store — opening can start a compaction, which reads
// tables without checking them and would copy a damaged block into a new table under a fresh,
// valid checksum. What is found:
// - a damaged block that one changed byte explains (a bit flip, a byte overwritten) gets that
//   byte back: the checksum proves it, and nothing is lost;
// - any other damaged data block is made unreadable to LevelDB (its compression type set to
//   one LevelDB refuses: "bad block type", with or without verify_checksums), so that
//   LevelDB's repair, which does not check checksums, drops that block while it copies the
//   table; its records are then lost, unless a newer version of a record is elsewhere;
// - a table whose footer or index is damaged is moved into db/lost/ whole;
// - a damaged filter or metaindex block is made unreadable too: LevelDB then does without the
//   filter (it only speeds up lookups), instead of trusting a damaged one to say "not there".
// After LevelDB's repair, the tables are compacted into one consistent set before anything
// reads them (its repair puts every table on level 0, where a lookup asks the tables by file
// number, not by age, and could find an older version first).
import { ClassicLevel } from 'classic-level'
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { decode } from './codec.js'
import { INTEGRITY_KEY } from './integrity.js'
import { META_KEY } from './keys.js'
import { checkTables, isTableFile, newestVersions, type TableProblem } from './tables.js'
import { WAL_SEQ_KEY } from './wal.js'

export interface TablesResult {
  tables: number
  blocks: number
  damage: string[]
  repaired: string[]
  /** Keys whose newest version was in a dropped block: deleted, their paths are lost. */
  lost: string[]
}

/** Records the store cannot open without: kept as read from a dropped block if they decode. */
const KEEP: Record<string, (v: any) => boolean> = {
  [META_KEY]: v => typeof v === 'object' && v !== null && Array.isArray(v.stack),
  [WAL_SEQ_KEY]: v => Number.isSafeInteger(v),
  [INTEGRITY_KEY]: v => Number.isSafeInteger(v)
}

type LevelOp = { type: 'put', key: Buffer, value: Buffer } | { type: 'del', key: Buffer }

const UNREADABLE = 0xff // a compression type LevelDB does not know

const utf8 = (b: Buffer): string => b.toString('utf8')

function writeByte (file: string, at: number, byte: number): void {
  const fd = openSync(file, 'r+')
  try {
    writeSync(fd, Buffer.of(byte), 0, 1, at)
  } finally {
    closeSync(fd)
  }
}

/** The records of a damaged data block, as far as they can be named. */
function keyList (p: TableProblem): string {
  const names = [...new Set(p.keys.map(k => JSON.stringify(utf8(k.key))))]
  const some = names.length <= 12 ? names.join(', ') : `${names.slice(0, 10).join(', ')} … ${names[names.length - 1]}`
  const range = p.range ? `${p.range.from ? `after ${JSON.stringify(utf8(p.range.from))} ` : ''}up to ${JSON.stringify(utf8(p.range.to))}` : ''
  if (!names.length) return `records ${range || 'that cannot be named'}`
  if (p.complete) return `${names.length} record(s): ${some}`
  return `${names.length} record(s) that still read: ${some}; others ${range || 'that cannot be named'}`
}

/** Check every table of the store at `path` and repair what is damaged; LevelDB is not open. */
export async function fsckTables (path: string): Promise<TablesResult> {
  const dir = join(path, 'db')
  const res: TablesResult = { tables: 0, blocks: 0, damage: [], repaired: [], lost: [] }
  if (!existsSync(dir)) return res
  const checks = checkTables(dir)
  res.tables = checks.length
  for (const c of checks) res.blocks += c.blocks
  const candidates = new Map<string, Candidate>()
  let repair = false
  let compact = false
  for (const c of checks) {
    const file = join(dir, c.file)
    // Only what a checksum (or a missing footer) proves damaged is touched: a block that fails
    // only cpfs's reading of it is reported and left to LevelDB.
    const acted = c.problems.filter(p => p.fix || ['BLOCK_CHECKSUM', 'BLOCK_OUTSIDE', 'TABLE_SHORT', 'TABLE_FOOTER'].includes(p.code))
    for (const p of c.problems.filter(p => !acted.includes(p))) res.damage.push(`${p.message} (cpfs cannot read it; left as it is)`)
    const whole = acted.find(p => !p.fix && (p.kind === 'index' || p.kind === 'footer' || p.code === 'BLOCK_OUTSIDE'))
    if (whole) {
      mkdirSync(join(dir, 'lost'), { recursive: true })
      let to = join(dir, 'lost', c.file)
      for (let n = 1; existsSync(to); n++) to = join(dir, 'lost', `${c.file}.${n}`)
      renameSync(file, to)
      repair = true
      res.damage.push(`${whole.message}: the whole table goes, to db/lost/ (which records it held cannot be told; the checks below find what they can)`)
      continue
    }
    for (const p of acted) {
      if (p.fix) {
        writeByte(file, p.fix.at, p.fix.byte)
        const what = p.fixKey ? `, in record ${JSON.stringify(utf8(p.fixKey))}` : p.kind === 'data' ? ` (${keyList(p)})` : ''
        res.damage.push(`${p.message}: one byte, at ${p.fix.at}, differs from what the checksum proves${what}`)
        res.repaired.push(`put back byte ${p.fix.at} of table ${c.file} (the block's checksum holds again)`)
        continue
      }
      writeByte(file, p.offset + p.size, UNREADABLE)
      if (p.kind === 'data') {
        repair = true
        res.damage.push(`${p.message}: no single changed byte explains it, so the block goes (${keyList(p)})`)
        for (const k of p.keys) {
          const name = k.key.toString('latin1')
          if (k.seq >= (candidates.get(name)?.seq ?? -1)) candidates.set(name, { seq: k.seq, deletion: k.deletion, value: k.value })
        }
      } else {
        compact = true
        res.damage.push(`${p.message}: LevelDB now does without the table's filter (it only speeds up lookups; nothing is lost)`)
      }
    }
  }
  if (!repair && !compact) return res
  if (repair) {
    await ClassicLevel.repair(dir)
    res.repaired.push('LevelDB\'s repair rebuilt the database without the damaged blocks (the damaged files are kept in db/lost/)')
  }
  await settleDropped(dir, candidates, res)
  return res
}

type Candidate = { seq: number, deletion: boolean, value?: Buffer }

/**
 * Records of dropped blocks: lost only if no newer version of each is left. Those cpfs cannot
 * do without are kept as read when they decode; the others are deleted, so no older version
 * shows through. Then every table is rewritten.
 */
async function settleDropped (dir: string, candidates: Map<string, Candidate>, res: TablesResult): Promise<void> {
  const newest = new Map<string, number>()
  for (const name of readdirSync(dir).filter(isTableFile)) {
    try {
      newestVersions(name, readFileSync(join(dir, name)), new Set(candidates.keys()), newest)
    } catch {
      // Not a table LevelDB uses: its repair leaves an empty file behind where it copied nothing.
    }
  }
  const ops: LevelOp[] = []
  for (const [name, c] of candidates) {
    if ((newest.get(name) ?? -1) >= c.seq) continue
    const key = Buffer.from(name, 'latin1')
    const keep = KEEP[utf8(key)]
    if (!c.deletion && keep) {
      let ok = false
      try { ok = keep(decode(c.value!)) } catch {}
      if (ok) {
        ops.push({ type: 'put', key, value: c.value! })
        res.damage.push(`record ${JSON.stringify(utf8(key))}, which cpfs cannot do without, was in a dropped block: kept as read from it (it decodes, but may be wrong)`)
        continue
      }
    }
    // Deleted, so that no older version shows through; a deletion was one already.
    ops.push({ type: 'del', key })
    if (!c.deletion) res.lost.push(utf8(key))
  }
  await compactLevel(dir, ops)
  const dels = ops.filter(o => o.type === 'del').length
  res.repaired.push(`LevelDB's tables were compacted${dels ? ` after ${dels} record(s) of dropped blocks were deleted (no older version of them can show through)` : ''}`)
}

/** Apply `ops` and rewrite every table (a full compaction); LevelDB is closed after. */
export async function compactLevel (dir: string, ops: LevelOp[] = []): Promise<void> {
  const db = new ClassicLevel<Buffer, Buffer>(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' })
  await db.open()
  try {
    if (ops.length) await db.batch(ops, { sync: true })
    // Keys are UTF-8, which never holds the byte 0xff: [0xff] is past every key.
    await db.compactRange(Buffer.alloc(0), Buffer.of(0xff))
  } finally {
    await db.close()
  }
}
