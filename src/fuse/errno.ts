// The one place where error codes become errno numbers (positive, as the FUSE reply header
// wants them negated). Overlay errors carry POSIX names as codes; a full store is ENOSPC;
// anything else is EIO.
import { constants } from 'node:os'
import { isCpfsError } from '../errors.js'

const errno = constants.errno as Record<string, number>

export function toErrno (err: unknown): number {
  let code: string | undefined
  if (isCpfsError(err)) code = err.code
  else if (err && typeof (err as any).code === 'string') code = (err as any).code
  if (code === 'STORE_WRITE') code = 'ENOSPC'
  if (code === 'EOPNOTSUPP') code = 'ENOTSUP'
  const n = code !== undefined ? errno[code] : undefined
  return n ?? errno.EIO
}

/** The errno of a POSIX code name, for replies a handler sends without throwing. */
export function errnoOf (code: string): number {
  return errno[code] ?? errno.EIO
}
