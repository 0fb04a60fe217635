#!/usr/bin/env node
// The cpfs command: parse arguments, call the library, print. One exit path: every error is
// one line `cpfs: <what> (<how to fix>)` on stderr with a non-zero exit code.
import { parseArgs } from 'node:util'
import { CpfsError, isCpfsError } from '../errors.js'
import * as api from '../api.js'
import { formatAll, formatDiff, formatLog, formatPreview, formatPrune, formatStat, formatStatus, formatSummary } from './format.js'
import { statSync, writeFileSync } from 'node:fs'
import { exec as execCommand } from '../exec.js'
import { serveMcp } from '../mcp.js'
import { claudeCodeHook } from '../hook.js'
import * as hk from '../housekeeping.js'
import { createInterface } from 'node:readline'
import { resolve } from 'node:path'
const resolve2 = resolve
import { findWorkspace, isRegistered } from '../store/locate.js'
import { HELP, usage } from './help.js'
import { showingProgress } from './progress.js'

type Flags = Record<string, string | boolean | undefined>

interface Command {
  options: Record<string, { type: 'string' | 'boolean', short?: string }>
  /** Names of positional arguments, in order; a trailing '?' marks an optional one. */
  args: string[]
  run: (pos: Record<string, string | undefined>, f: Flags, rest: string[]) => Promise<number>
}

const dirStore = { store: { type: 'string' as const } }
const json = { json: { type: 'boolean' as const } }

function out (s: string): void {
  process.stdout.write(s.endsWith('\n') ? s : s + '\n')
}

function note (s: string): void {
  if (process.stderr.isTTY) process.stderr.write(s + '\n')
}

function isDirectory (p: string): boolean {
  try {
    return statSync(p).isDirectory()
  } catch {
    return false
  }
}

function target (pos: Record<string, string | undefined>, f: Flags): api.Target {
  return { dir: pos.DIR ?? '.', store: f.store as string | undefined }
}

const commands: Record<string, Command> = {
  mount: {
    options: { ...dirStore, foreground: { type: 'boolean' }, 'allow-other': { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const info = await api.mount({ ...target(pos, f), foreground: Boolean(f.foreground), allowOther: Boolean(f['allow-other']) })
      if (f.json) out(JSON.stringify(info))
      else {
        out(String(info.head))
        if (info.outside) note(`cpfs: ${info.outside.paths} path${info.outside.paths === 1 ? '' : 's'} changed outside cpfs since it last saw ${info.outside.paths === 1 ? 'it' : 'them'}: recorded as turn ${info.outside.turn} (cpfs diff ${info.outside.turn})`)
        note(`cpfs: mounted ${info.workspace} at turn ${info.head}${info.recovered ? ' (finished an interrupted plan first)' : ''}; cd into it again to see the mount`)
      }
      if (f.foreground) await new Promise(() => {}) // the daemon keeps the process alive until it unmounts
      return 0
    }
  },
  turn: {
    options: { ...dirStore, message: { type: 'string', short: 'm' }, id: { type: 'string' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const head = await api.turn({ ...target(pos, f), message: f.message as string | undefined, id: f.id as string | undefined })
      out(f.json ? JSON.stringify({ head }) : String(head))
      return 0
    }
  },
  log: {
    options: { ...dirStore, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const turns = await api.log({ ...target(pos, f), lines: true })
      out(f.json ? JSON.stringify(turns, null, 2) : formatLog(turns))
      return 0
    }
  },
  rewind: {
    options: { ...dirStore, force: { type: 'boolean' }, 'dry-run': { type: 'boolean' }, ...json },
    args: ['TURN', 'DIR?'],
    run: async (pos, f) => {
      if (f['dry-run']) {
        const p = await api.rewindPreview(pos.TURN!, target(pos, f))
        if (f.json) {
          // Exactly the agent SDKs' rewind_files(dry_run) shape; exit 0 either way.
          const j: Record<string, unknown> = { canRewind: p.canRewind }
          if (p.error !== undefined) j.error = p.error
          Object.assign(j, { filesChanged: p.filesChanged, insertions: p.insertions, deletions: p.deletions })
          out(JSON.stringify(j))
          return 0
        }
        if (!p.canRewind && p.changes.length === 0) throw new CpfsError('UNKNOWN_TURN', p.error ?? 'cannot rewind', 'see cpfs log')
        out(formatPreview(pos.TURN!, p))
        return p.canRewind ? 0 : 1
      }
      const r = await showingProgress(Boolean(f.json), () => api.rewind(pos.TURN!, { ...target(pos, f), force: Boolean(f.force) }))
      if (f.json) out(JSON.stringify(r))
      else out(`rewound to the start of turn ${r.head}${r.summary ? '; ' + formatSummary(r.summary) : ''}`)
      return 0
    }
  },
  diff: {
    options: { ...dirStore, stat: { type: 'boolean' }, ...json },
    args: ['TURN?', 'DIR?'],
    run: async (pos, f) => {
      let spec = pos.TURN
      let dir = pos.DIR
      // One argument: a directory if it names one (and is not a turn number or a range).
      if (spec !== undefined && dir === undefined && !/^\d+$|\.\./.test(spec) && isDirectory(spec)) {
        dir = spec
        spec = undefined
      }
      const r = await api.diff(spec, { dir: dir ?? '.', store: f.store as string | undefined, patches: !f.stat && !f.json })
      if (f.json) out(JSON.stringify(r.changes, null, 2))
      else out(f.stat ? formatStat(r.changes) : formatDiff(r.changes))
      return 0
    }
  },
  restore: {
    options: { ...dirStore, force: { type: 'boolean' }, ...json },
    args: ['TURN', 'PATH...'],
    run: async (pos, f, rest) => {
      let paths = rest.map(p => resolve(p))
      let dir: string | undefined
      // A trailing registered workspace is DIR; otherwise the workspace holding the paths.
      if (paths.length >= 2 && isRegistered(paths[paths.length - 1])) dir = paths.pop()
      dir ??= findWorkspace(paths[0]) ?? undefined
      if (!dir) throw new CpfsError('NO_HISTORY', `${rest[0]} is not inside a workspace with cpfs history`, 'run it inside a mounted workspace, or name the workspace as the last argument')
      const r = await showingProgress(Boolean(f.json), () => api.restore(pos.TURN!, paths, { dir, store: f.store as string | undefined, force: Boolean(f.force) }))
      if (f.json) out(JSON.stringify(r))
      else out(`restored ${r.paths.map(p => p.slice(1) || '.').join(', ')} to the start of turn ${r.turn}${r.summary ? '; ' + formatSummary(r.summary) : ' (as a change in the head turn)'}`)
      return 0
    }
  },
  exec: {
    options: { ...dirStore, discard: { type: 'boolean' }, sandbox: { type: 'boolean' }, 'turn-per-command': { type: 'boolean' }, force: { type: 'boolean' }, 'json-result': { type: 'string' }, ...json },
    args: ['DIR?'],
    run: async (pos, f, rest) => {
      const resultFile = f['json-result'] as string | undefined
      try {
        const r = await execCommand({ ...target(pos, f), command: rest, discard: Boolean(f.discard), sandbox: Boolean(f.sandbox), turnPerCommand: Boolean(f['turn-per-command']), force: Boolean(f.force) })
        if (resultFile) writeFileSync(resultFile, JSON.stringify(r))
        else if (f.json) out(JSON.stringify(r))
        else if (r.applied) note(`cpfs: ${formatSummary(r.summary!)}`)
        else process.stderr.write('cpfs: the real directory was left as it was; the work was set aside (cpfs redo brings it back until the next write)\n')
        return r.code
      } catch (err) {
        // Inside a sandbox the outer cpfs reports the error: hand it over in the result file.
        if (resultFile && isCpfsError(err)) {
          writeFileSync(resultFile, JSON.stringify({ error: { code: err.code, message: err.message, hint: err.hint } }))
          return 1
        }
        throw err
      }
    }
  },
  hook: {
    options: { ...dirStore },
    args: ['AGENT', 'DIR?'],
    run: async (pos) => {
      if (pos.AGENT !== 'claude-code') throw new CpfsError('USAGE', `no hook for "${pos.AGENT}"`, 'supported: claude-code')
      await claudeCodeHook(pos.DIR ? resolve(pos.DIR) : undefined)
      return 0 // never block the user's prompt
    }
  },
  mcp: {
    options: { ...dirStore },
    args: ['DIR?'],
    run: async (pos, f) => {
      // Resolve the workspace now: an MCP client may start us from anywhere.
      const dir = resolve(pos.DIR ?? '.')
      await serveMcp({ dir, store: f.store as string | undefined })
      return 0
    }
  },
  prune: {
    options: { ...dirStore, 'keep-turns': { type: 'string' }, 'older-than': { type: 'string' }, 'max-size': { type: 'string' }, orphans: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const num = (v: unknown, what: string) => {
        if (v === undefined) return undefined
        if (!/^\d+$/.test(String(v))) throw new CpfsError('USAGE', `${what} must be a whole number, not "${v}"`, `see cpfs prune --help`)
        return Number(v)
      }
      const reports: hk.PruneReport[] = []
      if (f.orphans) reports.push(...await hk.pruneOrphans())
      if (!f.orphans || pos.DIR) {
        reports.push(await showingProgress(Boolean(f.json), () => hk.prune({ ...target(pos, f), keepTurns: num(f['keep-turns'], '--keep-turns'), olderThanDays: num(f['older-than'], '--older-than'), maxSize: f['max-size'] as string | undefined })))
      }
      out(f.json ? JSON.stringify(reports, null, 2) : reports.map(formatPrune).join('\n') || 'nothing to prune')
      return 0
    }
  },
  forget: {
    options: { ...dirStore, yes: { type: 'boolean' }, force: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const t = target(pos, f)
      if (!f.yes) {
        if (!process.stdin.isTTY) throw new CpfsError('USAGE', 'forget deletes the whole history and needs confirmation', 'pass --yes')
        const rl = createInterface({ input: process.stdin, output: process.stderr })
        const answer = await new Promise<string>(resolve => rl.question(`Delete every turn of ${resolve2(t.dir!)}? This cannot be undone. [y/N] `, resolve))
        rl.close()
        if (!/^y(es)?$/i.test(answer.trim())) {
          out('kept the history')
          return 1
        }
      }
      const r = await hk.forget({ ...t, force: Boolean(f.force) })
      out(f.json ? JSON.stringify(r) : `forgot the history of ${r.workspace} (the real directory is untouched)`)
      return 0
    }
  },
  fork: {
    options: { ...dirStore, ...json },
    args: ['TURN', 'DEST', 'DIR?'],
    run: async (pos, f) => {
      const r = await showingProgress(Boolean(f.json), () => api.fork(pos.TURN!, pos.DEST!, target(pos, f)))
      if (f.json) out(JSON.stringify(r))
      else out(`forked turn ${r.turn} into ${r.dest} (its own history starts there); ${formatSummary(r.summary)}`)
      return 0
    }
  },
  undo: {
    options: { ...dirStore, force: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const r = await showingProgress(Boolean(f.json), () => api.undo({ ...target(pos, f), force: Boolean(f.force) }))
      if (f.json) out(JSON.stringify(r))
      else out(`undone: back at the start of turn ${r.head}${r.summary ? '; ' + formatSummary(r.summary) : ''}`)
      return 0
    }
  },
  redo: {
    options: { ...dirStore, force: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const r = await showingProgress(Boolean(f.json), () => api.redo({ ...target(pos, f), force: Boolean(f.force) }))
      if (f.json) out(JSON.stringify(r))
      else out(`redone: head is turn ${r.head}${r.summary ? '; ' + formatSummary(r.summary) : ''}`)
      return 0
    }
  },
  status: {
    options: { ...dirStore, stats: { type: 'boolean' }, 'reset-stats': { type: 'boolean' }, all: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      if (f.all) {
        const list = await hk.statusAll()
        out(f.json ? JSON.stringify(list, null, 2) : formatAll(list))
        return 0
      }
      if (f['reset-stats']) {
        await api.resetStats(target(pos, f))
        return 0
      }
      const s = await api.status(target(pos, f))
      if (!f.stats) delete s.ops
      out(f.json ? JSON.stringify(s) : formatStatus(s))
      return 0
    }
  },
  unmount: {
    options: { ...dirStore, discard: { type: 'boolean' }, force: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const r = await showingProgress(Boolean(f.json), () => api.unmount({ ...target(pos, f), discard: Boolean(f.discard), force: Boolean(f.force) }))
      if (f.json) out(JSON.stringify(r))
      else if (!r.applied) out(`unmounted; the real directory was left as it was${r.discarded ? `; ${r.discarded} turn${r.discarded === 1 ? '' : 's'} set aside (cpfs redo brings ${r.discarded === 1 ? 'it' : 'them'} back until the next write)` : ''}`)
      else out(`unmounted; ${formatSummary(r.summary!)}`)
      return 0
    }
  }
}

const COMPLETION = `# cpfs bash completion: eval "$(cpfs completion bash)"
_cpfs () {
  local cur=\${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "${'mount turn log diff rewind undo redo restore fork status unmount exec mcp hook prune forget completion'}" -- "$cur") )
  else
    COMPREPLY=( $(compgen -d -- "$cur") )
  fi
}
complete -F _cpfs cpfs`

async function main (argv: string[]): Promise<number> {
  const [name, ...rest] = argv
  if (name === 'completion') {
    if (rest[0] !== 'bash') throw new CpfsError('USAGE', 'completion is available for bash', 'run: eval "$(cpfs completion bash)"')
    out(COMPLETION)
    return 0
  }
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    out(HELP)
    return name ? 0 : 2
  }
  if (name === '--version' || name === '-V') {
    out('cpfs 0.1.0')
    return 0
  }
  const cmd = commands[name]
  if (!cmd) throw new CpfsError('USAGE', `unknown command "${name}"`, 'run cpfs --help for the list of commands')
  const own = name === 'exec' && rest.includes('--') ? rest.slice(0, rest.indexOf('--')) : rest
  if (own.includes('--help') || own.includes('-h')) {
    out(usage(name))
    return 0
  }
  let parsed
  try {
    parsed = parseArgs({ args: rest, options: cmd.options, allowPositionals: true, strict: true })
  } catch (err: any) {
    throw new CpfsError('USAGE', String(err.message).split(/\.( |$)/)[0], `see cpfs ${name} --help`)
  }
  if (name === 'exec') {
    // cpfs exec [DIR] [flags] -- CMD...: the command is everything after the first '--'.
    const dash = rest.indexOf('--')
    if (dash < 0) throw new CpfsError('USAGE', 'no command given', 'put the command after --, e.g. cpfs exec . -- npm test')
    const before = parseArgs({ args: rest.slice(0, dash), options: cmd.options, allowPositionals: true, strict: true })
    if (before.positionals.length > 1) throw new CpfsError('USAGE', `unexpected argument "${before.positionals[1]}"`, 'see cpfs exec --help')
    return await cmd.run({ DIR: before.positionals[0] }, before.values as Flags, rest.slice(dash + 1))
  }
  const pos: Record<string, string | undefined> = {}
  const required = cmd.args.filter(a => !a.endsWith('?'))
  if (parsed.positionals.length < required.length) {
    throw new CpfsError('USAGE', `missing ${required[parsed.positionals.length]}`, `usage: cpfs ${name} ${cmd.args.map(a => a.endsWith('?') ? `[${a.slice(0, -1)}]` : a).join(' ')}`)
  }
  const variadic = cmd.args.at(-1)?.endsWith('...')
  if (variadic && parsed.positionals.length < cmd.args.length) {
    throw new CpfsError('USAGE', `missing ${cmd.args.at(-1)!.slice(0, -3)}`, `see cpfs ${name} --help`)
  }
  if (!variadic && parsed.positionals.length > cmd.args.length) {
    throw new CpfsError('USAGE', `unexpected argument "${parsed.positionals[cmd.args.length]}"`, `see cpfs ${name} --help`)
  }
  cmd.args.forEach((a, i) => { if (!a.endsWith('...')) pos[a.replace('?', '')] = parsed.positionals[i] })
  return await cmd.run(pos, parsed.values as Flags, variadic ? parsed.positionals.slice(cmd.args.length - 1) : [])
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code },
  (err) => {
    if (isCpfsError(err)) {
      process.stderr.write(err.line() + '\n')
      process.exitCode = err.code === 'USAGE' ? 2 : 1
    } else {
      process.stderr.write(`cpfs: internal error: ${err?.message ?? err} (please report it with the daemon log)\n`)
      if (process.env.CPFS_DEBUG) process.stderr.write(String(err?.stack) + '\n')
      process.exitCode = 70
    }
  }
)
