// A workspace's remotes, in `remotes.json` in its store directory (outside the workspace,
// private to the user like the store): what `cpfs remote add` named, the history's lineage
// (which refs on a remote continue this history), and what the last push left there.
import * as fs from 'node:fs'
import { createHash, randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { CpfsError } from '../errors.js'
import { checkWorkspaceName } from './objects.js'
import { parseS3Url, type S3Location } from './s3.js'

export interface Remote {
  name: string
  url: string
  endpoint?: string
  /** The workspace's name on the remote (workspaces/<as>/ref). */
  as: string
}

/** The root tree a push left on a remote: the lower never changes, so it is built once. */
export interface RootInfo {
  tree: string
  packs: string[]
  chunks: number
  bytes: number
}

interface RemotesFile {
  lineage?: string
  /** This store's own name (a clone gets a new one): whose head layer a ref's last layer is. */
  storeId?: string
  /**
   * A cloned or pulled ref's head (`<store id>:<layer id>` of the pusher) → the local layer it
   * became, and the tree it was then: only while the remote's head is still that tree may this
   * store replace it (the pusher may have gone on writing in the same turn).
   */
  adopted?: Record<string, { layer: number, tree: string }>
  remotes: Record<string, { url: string, endpoint?: string, as: string }>
  roots?: Record<string, RootInfo>
  /** Per remote: the tree of this workspace's head turn when it last matched the remote's (push, pull). */
  synced?: Record<string, string>
  /**
   * Where a lazy clone's older chunks are (its R<hex> records name places there): the URL and
   * endpoint it was cloned from, kept apart from the remotes so that `remote rm` cannot cut a
   * history off from its data.
   */
  lazy?: { url: string, endpoint?: string }
}

const FILE = 'remotes.json'

function read (storePath: string): RemotesFile {
  try {
    const f = JSON.parse(fs.readFileSync(join(storePath, FILE), 'utf8')) as RemotesFile
    f.remotes ??= {}
    return f
  } catch (err: any) {
    if (err.code === 'ENOENT') return { remotes: {} }
    throw new CpfsError('REMOTE_CONFIG', `${join(storePath, FILE)} is damaged: ${String(err.message)}`, 'fix or remove it, then add the remotes again')
  }
}

function write (storePath: string, f: RemotesFile): void {
  fs.mkdirSync(storePath, { recursive: true, mode: 0o700 })
  const tmp = join(storePath, FILE + '.tmp')
  fs.writeFileSync(tmp, JSON.stringify(f, null, 2) + '\n', { mode: 0o600 })
  fs.renameSync(tmp, join(storePath, FILE))
}

export function listRemotes (storePath: string): Remote[] {
  return Object.entries(read(storePath).remotes).map(([name, r]) => ({ name, ...r }))
}

export function addRemote (storePath: string, r: Remote): Remote {
  if (!/^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/.test(r.name)) throw new CpfsError('REMOTE_NAME', `${JSON.stringify(r.name)} cannot name a remote`, 'use letters, digits, . _ and -')
  parseS3Url(r.url)
  checkWorkspaceName(r.as)
  if (r.endpoint !== undefined && !/^https?:\/\/[^\s/]+/.test(r.endpoint)) throw new CpfsError('REMOTE_URL', `${r.endpoint} is not an endpoint URL`, 'write it as http://HOST:PORT or https://HOST')
  const f = read(storePath)
  if (f.remotes[r.name] !== undefined) throw new CpfsError('REMOTE_EXISTS', `remote ${r.name} exists already (${f.remotes[r.name].url})`, `cpfs remote rm ${r.name} first, or pick another name`)
  f.remotes[r.name] = { url: r.url, as: r.as, ...(r.endpoint !== undefined ? { endpoint: r.endpoint } : {}) }
  write(storePath, f)
  return r
}

export function removeRemote (storePath: string, name: string): void {
  const f = read(storePath)
  if (f.remotes[name] === undefined) throw unknownRemote(name, f)
  delete f.remotes[name]
  write(storePath, f)
}

/** The remote `name`, or the only one when no name is given. */
export function getRemote (storePath: string, name?: string): Remote {
  const f = read(storePath)
  const names = Object.keys(f.remotes)
  if (name === undefined) {
    if (names.length === 1) name = names[0]
    else if (names.length === 0) throw new CpfsError('NO_REMOTE', 'this workspace has no remote', 'add one: cpfs remote add origin s3://BUCKET/PREFIX')
    else throw new CpfsError('NO_REMOTE', `this workspace has ${names.length} remotes (${names.join(', ')})`, 'name the one to use')
  }
  const r = f.remotes[name]
  if (r === undefined) throw unknownRemote(name, f)
  return { name, ...r }
}

function unknownRemote (name: string, f: RemotesFile): CpfsError {
  const names = Object.keys(f.remotes)
  return new CpfsError('NO_REMOTE', `no remote named ${name}`, names.length ? `the remotes are ${names.join(', ')}` : 'add one: cpfs remote add origin s3://BUCKET/PREFIX')
}

/** Where a remote is: bucket, prefix and endpoint. */
export function locationOf (r: Pick<Remote, 'url' | 'endpoint'>): S3Location {
  return { ...parseS3Url(r.url), ...(r.endpoint !== undefined ? { endpoint: r.endpoint } : {}) }
}

/** This history's lineage: made at its first push (or taken from the ref it was cloned from). */
export function lineageOf (storePath: string): string {
  const f = read(storePath)
  if (f.lineage === undefined) {
    f.lineage = randomBytes(12).toString('hex')
    write(storePath, f)
  }
  return f.lineage
}

/** This store's own random name, made once. */
export function storeIdOf (storePath: string): string {
  const f = read(storePath)
  if (f.storeId === undefined) {
    f.storeId = randomBytes(12).toString('hex')
    write(storePath, f)
  }
  return f.storeId
}

/**
 * Is the remote head `head` one of `layers` of this store: pushed from it, or cloned or pulled
 * into it? Its records may have grown since, its turn been sealed, a rewind have made it a
 * branch's: it is this workspace's continuation either way.
 */
export function isOwnHead (storePath: string, head: string, headTree: string, layers: ReadonlySet<number>): boolean {
  const f = read(storePath)
  const cut = head.lastIndexOf(':')
  const own = head.slice(0, cut) === f.storeId && layers.has(Number(head.slice(cut + 1)))
  const adopted = f.adopted?.[head]
  return own || (typeof adopted === 'object' && adopted.tree === headTree && layers.has(adopted.layer))
}

export function adoptHead (storePath: string, head: string, layer: number, tree: string): void {
  const f = read(storePath)
  f.adopted = { ...f.adopted, [head]: { layer, tree } }
  write(storePath, f)
}

export function setLineage (storePath: string, lineage: string): void {
  const f = read(storePath)
  f.lineage = lineage
  write(storePath, f)
}

function rootKey (loc: S3Location): string {
  return createHash('sha256').update(`${loc.endpoint ?? ''}\n${loc.bucket}\n${loc.prefix}`).digest('hex').slice(0, 16)
}

export function knownRoot (storePath: string, loc: S3Location): RootInfo | undefined {
  return read(storePath).roots?.[rootKey(loc)]
}

export function noteRoot (storePath: string, loc: S3Location, root: RootInfo): void {
  const f = read(storePath)
  f.roots = { ...f.roots, [rootKey(loc)]: root }
  write(storePath, f)
}

export function syncedHead (storePath: string, loc: S3Location): string | undefined {
  return read(storePath).synced?.[rootKey(loc)]
}

export function noteSyncedHead (storePath: string, loc: S3Location, tree: string): void {
  const f = read(storePath)
  f.synced = { ...f.synced, [rootKey(loc)]: tree }
  write(storePath, f)
}

/** The directory that caches a remote's immutable objects (its index objects). */
export function cacheDir (storePath: string, loc: S3Location): string {
  return join(storePath, 'remote-cache', rootKey(loc))
}

/** Where this store's remote-only chunks are, if it is a lazy clone. */
export function lazySource (storePath: string): { url: string, endpoint?: string } | undefined {
  return read(storePath).lazy
}

export function setLazySource (storePath: string, src: { url: string, endpoint?: string }): void {
  const f = read(storePath)
  f.lazy = src
  write(storePath, f)
}
