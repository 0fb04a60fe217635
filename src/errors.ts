// Every failure in cpfs is a CpfsError with a stable string code. The CLI prints
// `cpfs: <message> (<hint>)`; the FUSE edge maps filesystem codes (POSIX names such as
// 'ENOENT') to errno numbers in one place (src/fuse/errno.ts). Tests assert on codes.

export type FsCode =
  | 'ENOENT' | 'EEXIST' | 'ENOTDIR' | 'EISDIR' | 'ENOTEMPTY' | 'EINVAL' | 'EPERM'
  | 'EACCES' | 'ENOSPC' | 'EIO' | 'EBADF' | 'ESTALE' | 'ENAMETOOLONG' | 'EXDEV' | 'EROFS'
  | 'EFBIG' | 'ENODATA' | 'ERANGE' | 'ENOTSUP' | 'E2BIG' | 'ENXIO' | 'EMLINK' | 'EOVERFLOW'

export class CpfsError extends Error {
  readonly code: string
  readonly hint: string | undefined

  constructor (code: string, message: string, hint?: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CpfsError'
    this.code = code
    this.hint = hint
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

export function isCpfsError (e: unknown): e is CpfsError {
  return e instanceof CpfsError
}
