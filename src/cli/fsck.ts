// What `cpfs fsck` prints: the damage, what was repaired, what is lost, and a last line.
import type { FsckResult } from '../store/fsck.js'

export function formatFsck (r: FsckResult): string {
  const lines: string[] = []
  for (const d of r.damage) lines.push(`damaged: ${d}`)
  for (const p of r.repaired) lines.push(`repaired: ${p}`)
  for (const l of r.lost) lines.push(`lost: ${l.path} in ${l.where}`)
  lines.push(r.clean
    ? `store ${r.store} is clean (${r.records} records, ${r.chunks} chunks, ${r.blocks} blocks of ${r.tables} LevelDB tables checked)`
    : `store ${r.store}: ${r.damage.length} problem(s) found, ${r.lost.length} path(s) lost (${r.records} records, ${r.chunks} chunks, ${r.blocks} blocks of ${r.tables} LevelDB tables checked)`)
  return lines.join('\n')
}
