// What the CLI's commands share: the shape of a command, common options, and how a command
// finds its workspace. Lean (cli/main.ts): nothing here loads the library.
import { statSync } from 'node:fs'
import { resolve } from 'node:path'
import { CpfsError } from '../errors.js'
import type { Target } from '../api.js'
import { findWorkspaceOf } from '../workspaces.js'
import { cpfsMountPoints, realPathOutside } from '../store/locate.js'
import { displayLine } from '../session/labels.js'
import { setColour } from './format.js'
import { startPager } from './output.js'

export const lib = async () => await import('../api.js')

export type Flags = Record<string, string | boolean | undefined>

export interface Command {
  options: Record<string, { type: 'string' | 'boolean', short?: string }>
  /** Names of positional arguments, in order; a trailing '?' marks an optional one. */
  args: string[]
  /** Everything after `--` is a list of paths (diff) or a command (exec). */
  dashDash?: 'paths' | 'command'
  run: (pos: Record<string, string | undefined>, f: Flags, rest: string[]) => Promise<number>
}

export const dirStore = { store: { type: 'string' as const } }
export const json = { json: { type: 'boolean' as const } }
export const paging = { 'no-pager': { type: 'boolean' as const }, color: { type: 'string' as const } }

export function note (s: string): void {
  if (process.stderr.isTTY) process.stderr.write(s + '\n')
}

export function isDirectory (p: string): boolean {
  // A cpfs mount point is a directory, and a stat of it would hang on a stopped daemon.
  if (cpfsMountPoints().has(realPathOutside(p))) return true
  try {
    return statSync(p).isDirectory()
  } catch {
    return false
  }
}

/** The workspace DIR names, or the one the current directory is in: the nearest above with cpfs (else DIR itself). */
export function workspaceOf (dir: string | undefined): string {
  return findWorkspaceOf(dir ?? process.cwd()) ?? resolve(dir ?? '.')
}

/** The workspace that holds `path` (typed as `typed`), or NO_HISTORY saying where DIR goes (`where`). */
export function holding (typed: string, path: string, where: string): string {
  const dir = findWorkspaceOf(path)
  if (dir === null) throw new CpfsError('NO_HISTORY', `${displayLine(typed)} is not inside a workspace with cpfs history`, `run it inside a mounted workspace, or name the workspace ${where}`)
  return dir
}

export function target (pos: Record<string, string | undefined>, f: Flags): Target {
  return { dir: workspaceOf(pos.DIR), store: f.store as string | undefined }
}

/** Long output on a terminal goes through the pager, as git's does. */
export async function page (f: Flags): Promise<void> {
  if (typeof f.color === 'string') setColour(f.color)
  if (!f['no-pager']) await startPager()
}

