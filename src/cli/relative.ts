// `cpfs rewind -1`: a turn counted back from the head (-1 is the head turn, -2 the one before;
// the session resolves it, src/session/session.ts resolveTurn). node's parseArgs takes every
// "-1" for an unknown option, so for the commands that take a TURN such arguments are hidden
// from it behind a mark no real argument can carry (a NUL byte), and given back after.
const MARK = '\u0000turn'

/** The arguments with each "-N" marked as a value (only for commands whose first argument is a TURN). */
export function hideRelativeTurns (args: string[]): string[] {
  return args.map(a => /^-\d+$/.test(a) ? MARK + a : a)
}

/** An argument or option value as the user typed it. */
export function unhide<T> (v: T): T {
  return (typeof v === 'string' && v.startsWith(MARK) ? v.slice(MARK.length) : v) as T
}
