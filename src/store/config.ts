// Settings a user can change: environment variables first, then $CPFS_HOME/config.json, e.g.
//   { "reserve": "256M", "prune": { "keepTurns": 50, "olderThanDays": 30, "maxSize": "2G" } }
import * as fs from 'node:fs'
import { join } from 'node:path'
import { CpfsError } from '../errors.js'
import { cpfsHome } from './locate.js'

export function parseSize (s: string | number): number {
  if (typeof s === 'number') return s
  const m = /^(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?$/i.exec(s.trim())
  if (!m) throw new CpfsError('USAGE', `cannot read the size "${s}"`, 'write it like 500M or 2G')
  const mult = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 }[m[2].toUpperCase() as '' | 'K' | 'M' | 'G' | 'T']
  return Math.floor(Number(m[1]) * mult)
}

export function readConfig (): Record<string, any> {
  const file = join(cpfsHome(), 'config.json')
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch (err: any) {
    if (err.code === 'ENOENT') return {}
    throw new CpfsError('BAD_CONFIG', `cannot read ${file}: ${err.message}`, 'fix or remove the file')
  }
}

/**
 * Bytes the store's disk keeps free: below it, writes in the mount fail with ENOSPC (so the
 * store itself never runs out mid-batch) and `cpfs mount` refuses. Default 64 MiB.
 */
export function reserveBytes (): number {
  const env = process.env.CPFS_RESERVE_BYTES
  const r = env !== undefined ? env : readConfig().reserve
  // Never below 1 MiB: LevelDB's log and table files need room beyond the data they hold, and
  // a log write that fails on a full disk leaves its partial record taking space until the
  // next log file (so removing the culprit would not give the space back).
  return Math.max(MIN_RESERVE, r === undefined ? 64 * 1024 * 1024 : parseSize(r))
}

export const MIN_RESERVE = 1024 * 1024
