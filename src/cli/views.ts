// `cpfs view TURN [PATH] [DIR]`, `cpfs view --close [PATH] [DIR]`, `cpfs view --list [DIR]`.
// The library part (views-api.ts) is loaded only when one of them runs.
import { resolve } from 'node:path'
import { CpfsError } from '../errors.js'
import type { ViewInfo } from '../views-api.js'
import { displayLine } from '../session/labels.js'
import { realPathOutside } from '../store/locate.js'
import { cpfsMountTable, hasHistory, viewMountTable } from '../workspaces.js'
import { dirStore, json, note, workspaceOf, type Command, type Flags } from './common.js'
import { out } from './output.js'

const viewsLib = async () => await import('../views-api.js')

/** Is `p` a workspace itself (mounted, or with history), rather than a place for a view? */
function isWorkspaceRoot (p: string): boolean {
  const real = realPathOutside(resolve(p))
  return cpfsMountTable().some(m => m.point === real) || hasHistory(real)
}

function isViewMount (p: string): boolean {
  const real = realPathOutside(resolve(p))
  return viewMountTable().some(m => m.point === real)
}

function target (dir: string | undefined, f: Flags): { dir: string, store?: string } {
  return { dir: workspaceOf(dir), store: f.store as string | undefined }
}

function describe (v: ViewInfo): string {
  return `${v.at === 'start' ? 'the start of' : 'the end of'} turn ${v.ref}`
}

export function formatViews (list: ViewInfo[]): string {
  if (list.length === 0) return 'no view is open (cpfs view TURN opens one)'
  const refWidth = Math.max(...list.map(v => v.ref.length))
  return list.map(v => `${v.ref.padEnd(refWidth)}  ${v.at.padEnd(5)}  ${v.path}${v.label ? `  ${displayLine(v.label)}` : ''}`).join('\n')
}

async function list (pos: string[], f: Flags): Promise<number> {
  if (pos.length > 1) throw new CpfsError('USAGE', `unexpected argument "${displayLine(pos[1])}"`, 'usage: cpfs view --list [DIR]')
  const views = await (await viewsLib()).listViews(target(pos[0], f))
  out(f.json ? JSON.stringify(views, null, 2) : formatViews(views))
  return 0
}

async function close (pos: string[], f: Flags): Promise<number> {
  if (pos.length > 2) throw new CpfsError('USAGE', `unexpected argument "${displayLine(pos[2])}"`, 'usage: cpfs view --close [PATH] [DIR]')
  // One argument: the view to close if it is one, else the workspace whose views all close.
  const [path, dir] = pos.length === 2 ? pos : pos.length === 1 && !isViewMount(pos[0]) && isWorkspaceRoot(pos[0]) ? [undefined, pos[0]] : [pos[0], undefined]
  const lib = await viewsLib()
  const t = { path: path === undefined ? undefined : resolve(path), store: f.store as string | undefined, dir: dir !== undefined || path === undefined ? workspaceOf(dir) : undefined }
  // This process must not keep a view busy itself (cpfs view --close run from inside one).
  process.chdir('/')
  const closed = await lib.closeViews(t)
  out(f.json ? JSON.stringify(closed, null, 2) : closed.length === 0 ? 'no view was open' : closed.map(v => `closed ${v.path} (${describe(v)})`).join('\n'))
  return 0
}

async function open (pos: string[], f: Flags): Promise<number> {
  if (pos.length === 0) throw new CpfsError('USAGE', 'missing TURN', 'usage: cpfs view TURN [PATH] [DIR]; cpfs view --list; cpfs view --close [PATH]')
  if (pos.length > 3) throw new CpfsError('USAGE', `unexpected argument "${displayLine(pos[3])}"`, 'usage: cpfs view TURN [PATH] [DIR]')
  const [turn, a, b] = pos
  // TURN X: X is the workspace if it is one, else the view's path (checked by the daemon).
  const [path, dir] = b !== undefined ? [a, b] : a !== undefined && isWorkspaceRoot(a) ? [undefined, a] : [a, undefined]
  const v = await (await viewsLib()).openView(turn, { ...target(dir, f), path, end: Boolean(f.end) })
  if (f.json) out(JSON.stringify(v))
  else {
    out(v.path)
    note(`cpfs: ${describe(v)}${v.label ? ` (${v.label})` : ''}, read-only at ${v.path}; cpfs view --close ${v.path} closes it`)
  }
  return 0
}

export const viewCommands: Record<string, Command> = {
  view: {
    options: { ...dirStore, close: { type: 'boolean' }, list: { type: 'boolean' }, end: { type: 'boolean' }, ...json },
    // Parsed here (run): what the positionals mean depends on --list and --close.
    args: ['TURN?', 'PATH?', 'DIR?', 'MORE?'],
    run: async (pos, f) => {
      const given = [pos.TURN, pos.PATH, pos.DIR, pos.MORE].filter((x): x is string => x !== undefined)
      if (f.list && f.close) throw new CpfsError('USAGE', '--list and --close do not go together', 'see cpfs view --help')
      if (f.list) return await list(given, f)
      if (f.close) return await close(given, f)
      return await open(given, f)
    }
  }
}
