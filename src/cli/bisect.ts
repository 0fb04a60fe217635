// `cpfs bisect --good T1 [--bad T2] [--write] (--run "CMD" | -- CMD ARGS...) [DIR]`: the first
// bad turn, as `git bisect run` finds the first bad commit. The library part (bisect.ts) is
// loaded only when it runs.
import { CpfsError } from '../errors.js'
import type { BisectResult, BisectTurn, Probe } from '../bisect.js'
import { displayLine } from '../session/labels.js'
import { formatStat } from './format.js'
import { dirStore, json, workspaceOf, type Command } from './common.js'
import { out } from './output.js'

function named (t: BisectTurn): string {
  return `${t.ref}${t.label ? ` (${displayLine(t.label)})` : ''}`
}

function probeLine (p: Probe): string {
  const exit = p.signal !== null ? p.signal : `exit ${p.code}`
  return `cpfs bisect: turn ${p.ref} ${p.verdict} (${exit})${p.label ? `  ${displayLine(p.label)}` : ''}`
}

export function formatBisect (r: BisectResult): string {
  if (r.first) return [`the first bad turn is ${named(r.first)}`, formatStat(r.changes)].join('\n')
  const [a, b] = [r.candidates[0], r.candidates[r.candidates.length - 1]]
  const untested = r.candidates.filter(c => r.probes.some(p => p.turn === c.turn && p.verdict === 'skip')).map(c => c.ref)
  return `the first bad turn is one of ${a.ref}-${b.ref.replace(/^b\d+:/, '')}${untested.length ? ` (${untested.join(', ')} could not be tested: exit 125)` : ''}\n` +
    r.candidates.map(c => `  ${named(c)}`).join('\n')
}

export const bisectCommands: Record<string, Command> = {
  bisect: {
    options: { ...dirStore, good: { type: 'string' }, bad: { type: 'string' }, run: { type: 'string' }, write: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    // What follows `--` is the command (main.ts hands it over as the rest); --run is the other way.
    dashDash: 'paths',
    run: async (pos, f, rest) => {
      if (typeof f.good !== 'string') throw new CpfsError('USAGE', 'bisect needs --good TURN: a turn whose tree is good', 'cpfs bisect --good 3 --run "npm test"')
      if (typeof f.run === 'string' && rest.length) throw new CpfsError('USAGE', 'give the command once: --run "CMD" or -- CMD ARGS...', 'see cpfs bisect --help')
      const command = typeof f.run === 'string' ? ['sh', '-c', f.run] : rest
      if (command.length === 0 || (typeof f.run === 'string' && f.run.trim() === '')) throw new CpfsError('USAGE', 'no command given', 'cpfs bisect --good 3 --run "npm test", or cpfs bisect --good 3 -- npm test')
      const { bisect } = await import('../bisect.js')
      const r = await bisect({
        dir: workspaceOf(pos.DIR),
        store: f.store as string | undefined,
        good: f.good,
        bad: f.bad as string | undefined,
        command,
        write: Boolean(f.write),
        onProbe: (p) => { if (!f.json) process.stderr.write(probeLine(p) + '\n') }
      })
      out(f.json ? JSON.stringify(r, null, 2) : formatBisect(r))
      return 0
    }
  }
}
