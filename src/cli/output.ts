// Where the CLI's output goes. A reader that goes away (`cpfs diff | head -2`) ends the command
// quietly with status 141, what a shell reports for a process killed by SIGPIPE — the
// convention `git log | head` follows. On a terminal, long output (diff, log) goes through a
// pager as git does: $CPFS_PAGER, else $PAGER, else less with LESS=FRX (quit at once when it fits
// one screen, keep colours, leave the text on the screen); "" or "cat" turn it off.
import type { ChildProcess } from 'node:child_process'

/** Exit status when stdout was closed by its reader: 128 + SIGPIPE. */
export const EPIPE_STATUS = 141

let pager: ChildProcess | null = null

export function guardPipes (): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    // The pager quit early (q in less): nothing more to show, and nothing went wrong.
    if (pager) process.exit(0)
    process.exit(err.code === 'EPIPE' ? EPIPE_STATUS : 1)
  })
  process.stderr.on('error', () => {})
}

/** Write to stdout, or to the pager once one runs; a trailing newline is added when missing. */
export function out (s: string): void {
  const text = s.endsWith('\n') ? s : s + '\n'
  if (pager?.stdin && !pager.stdin.destroyed) pager.stdin.write(text)
  else process.stdout.write(text)
}

/** The pager command to use now, or null: only when stdout is a terminal. */
export function pagerCommand (env: NodeJS.ProcessEnv = process.env): string | null {
  if (!process.stdout.isTTY) return null
  const cmd = env.CPFS_PAGER ?? env.PAGER ?? 'less'
  return cmd.trim() === '' || cmd.trim() === 'cat' ? null : cmd
}

/** Send what follows through the pager (when there is one to use). */
export async function startPager (): Promise<void> {
  const cmd = pagerCommand()
  if (!cmd || pager) return
  // Loaded only here: most commands never page, and loading costs each of them start-up time.
  const { spawn } = await import('node:child_process')
  const env = { ...process.env }
  env.LESS ??= 'FRX'
  env.LV ??= '-c'
  const child = spawn('sh', ['-c', cmd], { stdio: ['pipe', 'inherit', 'inherit'], env })
  child.on('error', () => { pager = null }) // no sh: write to the terminal directly
  // The user quit the pager before the end: stop quietly.
  child.stdin!.on('error', () => process.exit(0))
  pager = child
  // Ctrl-C is for the pager (less uses it); like git, wait for the pager rather than die under it.
  process.on('SIGINT', () => {})
}

/** Wait until the pager has shown everything and exited (resolves at once without one). */
export function endOutput (): Promise<void> {
  const p = pager
  if (!p) return Promise.resolve()
  return new Promise((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve()
    p.on('exit', () => resolve())
    p.on('error', () => resolve())
    p.stdin!.end()
  })
}
