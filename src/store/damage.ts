// How cpfs words damage to a store, wherever it is found (store.ts while reading or opening,
// integrity.ts, fsck.ts): one hint that leads to cpfs fsck, and LevelDB's corruption error
// made cpfs's own.
import { CpfsError } from '../errors.js'

export function corruptHint (where: string): string {
  return `run cpfs fsck ${where} to see what is lost and repair what can be`
}

/** A LevelDB corruption error as STORE_CORRUPT naming the store; null for other errors. */
export function levelError (path: string, err: any): CpfsError | null {
  const code = err?.code ?? err?.cause?.code
  if (code !== 'LEVEL_CORRUPTION') return null
  return new CpfsError('STORE_CORRUPT', `store ${path} is damaged: ${err?.cause?.message ?? err?.message}`, corruptHint(path), { cause: err })
}

/** f(), or STORE_CORRUPT naming the record `key` of the store when it does not decode. */
export function decodeStored<T> (store: { path: string, workspaceHint: () => string }, key: string, f: () => T): T {
  try {
    return f()
  } catch (err) {
    throw new CpfsError('STORE_CORRUPT', `record ${JSON.stringify(key)} in store ${store.path} does not decode`, corruptHint(store.workspaceHint()), { cause: err })
  }
}
