// Every failure in cpfs is a CpfsError with a stable string code. The CLI prints
// `cpfs: <message> (<hint>)`; the FUSE edge maps filesystem codes (POSIX names such as
// 'ENOENT') to errno numbers in one place (src/fuse/errno.ts). Tests assert on codes.

export type FsCode =
  | 'ENOENT' | 'EEXIST' | 'ENOTDIR' | 'EISDIR' | 'ENOTEMPTY' | 'EINVAL' | 'EPERM'
  | 'EACCES' | 'ENOSPC' | 'EIO' | 'EBADF' | 'ESTALE' | 'ENAMETOOLONG' | 'EXDEV' | 'EROFS'
  | 'EFBIG' | 'ENODATA' | 'ERANGE' | 'ENOTSUP' | 'E2BIG' | 'ENXIO' | 'EMLINK' | 'EOVERFLOW' | 'EILSEQ'

/**
 * The mark of a CpfsError, shared by every copy of this module in a process: the `cpfs`
 * command is one bundled file (scripts/bundle-cli.mjs) that loads the library as ES modules
 * when it needs it, so a CLI process holds two CpfsError classes and `instanceof` would miss
 * the library's errors.
 */
const MARK = Symbol.for('cpfs.error')

export class CpfsError extends Error {
  readonly code: string
  readonly hint: string | undefined

  constructor (code: string, message: string, hint?: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CpfsError'
    this.code = code
    this.hint = hint
  }

  get [MARK] (): true {
    return true
  }

  /** The one-line form the CLI prints. */
  line (): string {
    return this.hint ? `cpfs: ${this.message} (${this.hint})` : `cpfs: ${this.message}`
  }
}

/** A filesystem-level failure inside the overlay; `code` is a POSIX errno name. */
export class FsError extends CpfsError {
  constructor (code: FsCode, path: string, detail?: string) {
    super(code, `${code}: ${path}${detail ? ': ' + detail : ''}`)
    this.name = 'FsError'
  }
}

/**
 * Filesystem errors are answers (ENOENT for a lookup, ENODATA for an absent attribute), made
 * thousands of times a second: they carry no stack trace, which would cost more than the
 * request itself. Unexpected failures are other errors and keep theirs.
 */
export function fsError (code: FsCode, path: string, detail?: string): FsError {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return new FsError(code, path, detail)
  } finally {
    Error.stackTraceLimit = limit
  }
}

/** Is e a CpfsError (of any copy of this module)? Use this, never `instanceof CpfsError`. */
export function isCpfsError (e: unknown): e is CpfsError {
  return e instanceof CpfsError || (typeof e === 'object' && e !== null && (e as any)[MARK] === true)
}
