// "Did you mean ...?" for a mistyped command: the known name closest in edit distance, when
// it is close enough to be a typo rather than another word. Common other names (umount, ls,
// commit, checkout) map to the command a user coming from elsewhere would want.

const ALIASES: Record<string, string> = {
  umount: 'unmount',
  checkpoint: 'turn',
  commit: 'turn',
  history: 'log',
  ls: 'log',
  reset: 'rewind',
  checkout: 'rewind',
  revert: 'rewind',
  show: 'diff',
  st: 'status',
  info: 'status',
  clone: 'fork',
  run: 'exec',
  gc: 'prune',
  rm: 'forget',
  delete: 'forget'
}

function distance (a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
      // A swap of two neighbours (rewnid) counts as one edit.
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  }
  return d[a.length][b.length]
}

/** The command `word` was probably meant to be, or null. */
export function suggest (word: string, names: string[]): string | null {
  const w = word.toLowerCase()
  if (ALIASES[w] && names.includes(ALIASES[w])) return ALIASES[w]
  const prefixed = names.filter(n => n.startsWith(w))
  if (w.length >= 2 && prefixed.length === 1) return prefixed[0]
  let best: string | null = null
  let bestD = Infinity
  for (const n of names) {
    const dist = distance(w, n)
    if (dist < bestD) { best = n; bestD = dist }
  }
  return bestD <= Math.max(1, Math.floor(w.length / 3)) ? best : null
}
