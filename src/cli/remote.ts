// `cpfs remote add|rm|ls`, `cpfs push`, `cpfs clone`: thin shells over remote-api.ts (loaded
// when one of them runs: the S3 client is big, and `cpfs turn` must start fast).
import { statSync } from 'node:fs'
import { CpfsError } from '../errors.js'
import type { PushResult, RemoteWorkspace } from '../remote-api.js'
import { displayLine } from '../session/labels.js'
import { bytes, age } from './format.js'
import { dirStore, json, workspaceOf, type Command, type Flags } from './common.js'
import { out } from './output.js'
import { showingProgress } from './progress.js'

const remoteLib = async () => await import('../remote-api.js')

const USAGE = 'usage: cpfs remote add NAME s3://BUCKET/PREFIX [--endpoint URL] [--as WORKSPACE]; cpfs remote rm NAME; cpfs remote ls [NAME|s3://BUCKET/PREFIX]; cpfs remote gc [NAME|s3://BUCKET/PREFIX] [--grace HOURS] [--dry-run]; cpfs remote'

function target (f: Flags): { dir: string, store?: string } {
  return { dir: workspaceOf(f.dir as string | undefined), store: f.store as string | undefined }
}

async function remote (pos: string[], f: Flags): Promise<number> {
  const lib = await remoteLib()
  const [action, a, b, ...more] = pos
  if (more.length) throw new CpfsError('USAGE', `unexpected argument "${displayLine(more[0])}"`, USAGE)
  switch (action) {
    case undefined: {
      const list = lib.remotes(target(f))
      if (f.json) out(JSON.stringify(list, null, 2))
      else out(list.length === 0 ? 'no remote (cpfs remote add origin s3://BUCKET/PREFIX adds one)' : list.map(r => `${r.name}\t${r.url}/workspaces/${r.as}${r.endpoint ? `\t(${r.endpoint})` : ''}`).join('\n'))
      return 0
    }
    case 'add': {
      if (a === undefined || b === undefined) throw new CpfsError('USAGE', 'missing NAME or URL', USAGE)
      const r = lib.remoteAdd(a, b, { ...target(f), endpoint: f.endpoint as string | undefined, as: f.as as string | undefined })
      if (f.json) out(JSON.stringify(r))
      else out(`remote ${r.name}: ${r.url}, this workspace as ${r.as}${r.endpoint ? ` (endpoint ${r.endpoint})` : ''}`)
      return 0
    }
    case 'rm': case 'remove': {
      if (a === undefined || b !== undefined) throw new CpfsError('USAGE', a === undefined ? 'missing NAME' : `unexpected argument "${displayLine(b!)}"`, USAGE)
      lib.remoteRemove(a, target(f))
      if (!f.json) out(`removed remote ${a} (what it holds on the remote is untouched)`)
      return 0
    }
    case 'ls': case 'list': {
      if (b !== undefined) throw new CpfsError('USAGE', `unexpected argument "${displayLine(b)}"`, USAGE)
      const list = await lib.remoteList(a, { ...target(f), endpoint: f.endpoint as string | undefined })
      out(f.json ? JSON.stringify(list, null, 2) : formatWorkspaces(list))
      return 0
    }
    case 'gc': {
      if (b !== undefined) throw new CpfsError('USAGE', `unexpected argument "${displayLine(b)}"`, USAGE)
      const grace = f.grace === undefined ? undefined : Number(f.grace)
      if (grace !== undefined && !(grace >= 0)) throw new CpfsError('USAGE', `--grace ${displayLine(String(f.grace))} is not a number of hours`, 'e.g. --grace 24 (the default)')
      const r = await lib.remoteGc(a, { ...target(f), endpoint: f.endpoint as string | undefined, graceHours: grace, dryRun: Boolean(f['dry-run']) })
      if (f.json) out(JSON.stringify(r))
      else out(`${r.dryRun ? 'would delete' : 'deleted'} ${r.deleted} object${r.deleted === 1 ? '' : 's'} (${bytes(r.deletedBytes)}) no ref reaches, marked ${r.marked} more (${bytes(r.markedBytes)}) for the next gc; ${r.workspaces} workspace${r.workspaces === 1 ? '' : 's'}, ${r.reachable} objects reachable`)
      return 0
    }
    default:
      throw new CpfsError('USAGE', `unknown remote action "${displayLine(action)}"`, USAGE)
  }
}

export function formatWorkspaces (list: RemoteWorkspace[]): string {
  if (list.length === 0) return 'no workspace there yet (cpfs push sends one)'
  const rows = list.map(w => [w.name, `${w.turns} turn${w.turns === 1 ? '' : 's'}`, `${w.branches} branch${w.branches === 1 ? '' : 'es'}`, bytes(w.bytes), `pushed ${age(w.pushedAt)} from ${w.host}:${w.from}`])
  const widths = rows[0].map((_, i) => Math.max(...rows.map(r => r[i].length)))
  return rows.map(r => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i])).join('  ')).join('\n')
}

/** One argument to push or pull: a path (remote names have no '/'), or a directory that exists, is the workspace. */
function isPath (s: string): boolean {
  return s.includes('/') || s === '.' || s === '..' || isDirectory(s)
}

function isDirectory (s: string): boolean {
  try {
    return statSync(s).isDirectory()
  } catch {
    return false
  }
}

function formatPush (r: PushResult): string {
  if (r.upToDate) return `${r.url} is up to date (${r.turns} turns, ${r.branches} branches)`
  return `pushed ${r.turns} turn${r.turns === 1 ? '' : 's'} and ${r.branches} branch${r.branches === 1 ? '' : 'es'} to ${r.url}: ${r.trees} tree${r.trees === 1 ? '' : 's'}, ${r.chunks} new chunk${r.chunks === 1 ? '' : 's'} (${bytes(r.bytes)}, ${bytes(r.storedBytes)} compressed), ${r.requests.put} PUTs`
}

export const remoteCommands: Record<string, Command> = {
  remote: {
    options: { ...dirStore, dir: { type: 'string' }, endpoint: { type: 'string' }, as: { type: 'string' }, grace: { type: 'string' }, 'dry-run': { type: 'boolean' }, ...json },
    args: ['ACTION?', 'A?', 'B?', 'MORE?'],
    run: async (pos, f) => await remote([pos.ACTION, pos.A, pos.B, pos.MORE].filter((x): x is string => x !== undefined), f)
  },
  push: {
    options: { ...dirStore, force: { type: 'boolean' }, ...json },
    args: ['NAME?', 'DIR?'],
    run: async (pos, f) => {
      const [name, dir] = pos.DIR === undefined && pos.NAME !== undefined && isPath(pos.NAME) ? [undefined, pos.NAME] : [pos.NAME, pos.DIR]
      const r = await showingProgress(Boolean(f.json), async () => (await remoteLib()).push(name, { dir: workspaceOf(dir), store: f.store as string | undefined, force: Boolean(f.force) }))
      out(f.json ? JSON.stringify(r) : formatPush(r))
      return 0
    }
  },
  pull: {
    options: { ...dirStore, force: { type: 'boolean' }, full: { type: 'boolean' }, ...json },
    args: ['NAME?', 'DIR?'],
    run: async (pos, f) => {
      const [name, dir] = pos.DIR === undefined && pos.NAME !== undefined && isPath(pos.NAME) ? [undefined, pos.NAME] : [pos.NAME, pos.DIR]
      const r = await showingProgress(Boolean(f.json), async () => (await remoteLib()).pull(name, { dir: workspaceOf(dir), store: f.store as string | undefined, force: Boolean(f.force), full: Boolean(f.full) }))
      const filled = r.filled.chunks > 0 ? `\nfetched the ${r.filled.chunks} chunk${r.filled.chunks === 1 ? '' : 's'} of older turns this lazy clone had left on the remote (${bytes(r.filled.bytes)}): its history no longer needs the remote` : ''
      if (f.json) out(JSON.stringify(r))
      else if (r.branch === null) out(`up to date with ${r.url}${filled}`)
      else if (r.moved !== null) out(`pulled ${r.layers} turn${r.layers === 1 ? '' : 's'} from ${r.url} (${bytes(r.bytes)} fetched); head is turn ${r.moved.head}${filled}`)
      else out(`pulled ${r.layers} layer${r.layers === 1 ? '' : 's'} from ${r.url} (${bytes(r.bytes)} fetched) as branch ${r.branch}: this workspace has turns of its own, so nothing moved; cpfs merge ${r.branch} brings their work in, cpfs log --all shows it${filled}`)
      return 0
    }
  },
  clone: {
    options: { endpoint: { type: 'string' }, full: { type: 'boolean' }, ...json },
    args: ['URL', 'DIR'],
    run: async (pos, f) => {
      const r = await showingProgress(Boolean(f.json), async () => (await remoteLib()).clone(pos.URL!, pos.DIR!, { endpoint: f.endpoint as string | undefined, full: Boolean(f.full) }))
      const lazy = r.remoteChunks > 0 ? `; ${r.remoteChunks} chunk${r.remoteChunks === 1 ? '' : 's'} of older turns left on the remote, fetched when read` : ''
      if (f.json) out(JSON.stringify(r))
      else out(`cloned ${r.url} into ${r.dir}: ${r.turns} turn${r.turns === 1 ? '' : 's'}, ${r.branches} branch${r.branches === 1 ? '' : 'es'}, ${bytes(r.bytes)} fetched; ${r.summary.verified} paths verified; remote origin added${lazy}`)
      return 0
    }
  }
}
