// A read-only command never forces --force. The rule (README, "Changes made outside cpfs"): a
// path changed outside cpfs is drift, and a plan that would replace it refuses, unless the
// change only refreshed a cache that its tool keeps — today one kind is known: git's index
// after `git status`, `git diff` and the like, which rewrite .git/index with new stat data and
// the same staged content (git-index.ts tells them apart). Such a version is recorded in the
// history first, like every outside change that --force replaces (plans/absorb.ts): nothing is
// lost either way, and the plan goes on without asking.
import * as fs from 'node:fs'
import { openFile } from '../real/nofollow.js'
import { lstatReal } from '../real/read.js'
import type { Session } from '../session/session.js'
import { CHUNK_SIZE } from '../store/entries.js'
import { fingerprintDrift } from '../store/fingerprints.js'
import { absorbOutsideChanges, type Absorbed } from './absorb.js'
import { sameStaged } from './git-index.js'
import { expectOf } from './expect.js'
import { viewOf } from './views.js'

/** Larger indexes are not compared (a repository of a million files has one of ~100 MB). */
const MAX_INDEX_BYTES = 256 * 1024 * 1024

function isGitIndex (p: string): boolean {
  return p === '/.git/index' || p.endsWith('/.git/index')
}

/**
 * Record the outside versions of paths whose change only refreshed a cache as a turn, so that
 * the plan that follows replaces them without --force. Null when there were none.
 */
export async function keepRefreshes (session: Session): Promise<Absorbed | null> {
  const candidates: string[] = []
  for (const [p, f] of session.capture.fingerprints) {
    if (isGitIndex(p) && fingerprintDrift(f, lstatReal(session.lower, p)) !== null) candidates.push(p)
  }
  if (candidates.length === 0) return null
  const applied = await viewOf(session, session.meta.applied)
  const refreshed = new Set<string>()
  for (const p of candidates) {
    const want = expectOf(session, applied, p, new Map(), false)
    if (want.type !== 'f' || want.size === undefined || want.size > MAX_INDEX_BYTES || !want.data) continue
    const was = Buffer.alloc(want.size)
    try {
      for (const [idx, hex] of want.data) session.chunks.get(Buffer.from(hex, 'hex')).copy(was, idx * CHUNK_SIZE)
    } catch {
      continue // content the store does not hold (the real file itself): not comparable
    }
    const now = realBytes(session, p)
    if (now && sameStaged(now, was)) refreshed.add(p)
  }
  if (refreshed.size === 0) return null
  return await absorbOutsideChanges(session, { force: true, only: p => refreshed.has(p) })
}

function realBytes (session: Session, p: string): Buffer | null {
  let fd: number
  try {
    fd = openFile(session.lower.realPath(p), fs.constants.O_RDONLY)
  } catch {
    return null
  }
  try {
    const size = fs.fstatSync(fd).size
    if (size > MAX_INDEX_BYTES) return null
    const buf = Buffer.alloc(size)
    let at = 0
    while (at < size) {
      const n = fs.readSync(fd, buf, at, size - at, at)
      if (n === 0) return null
      at += n
    }
    return buf
  } finally {
    fs.closeSync(fd)
  }
}
