#!/usr/bin/env node
// The cpfs command: parse arguments, call the library, print. One exit path: every error is
// one line `cpfs: <what> (<how to fix>)` on stderr with a non-zero exit code (the hook's is
// always 0: a hook must never block a prompt). A closed stdout ends the command quietly (141).
// Every command that works on a workspace finds it as git finds a repository: from DIR, or the
// current directory, upwards (src/workspaces.ts).
import { parseArgs } from 'node:util'
import { CpfsError, isCpfsError } from '../errors.js'
import type { UnmountResult } from '../api.js'
import { askDaemon, mountedLocation, statusFromDaemon, workspacePaths } from '../control/mounted.js'
import type { ArgsOf, CommandName, ResultOf } from '../control/protocol.js'
import { formatAll, formatBlame, formatDiff, formatLog, formatPreview, formatPrune, formatStat, formatStatus, formatSummary, formatUnmount } from './format.js'
import { writeFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { isRegistered } from '../store/locate.js'
import { displayLine } from '../session/labels.js'
import { HELP, usage } from './help.js'
import { showingProgress } from './progress.js'
import { endOutput, guardPipes, out } from './output.js'
import { suggest } from './suggest.js'
import { claudeCodeHook } from '../hook.js'
import { hideRelativeTurns, unhide } from './relative.js'
import { faultsFromEnv } from '../plans/faults.js'
import { dirStore, holding, isDirectory, json, lib, note, page, paging, target, workspaceOf, type Command, type Flags } from './common.js'
import { diffByCommands, diffBySteps, logSteps, stepCommands, undoStepCommand } from './steps.js'
import { logTree } from './tree.js'
import { mergeCommands } from './merge.js'
import { viewCommands } from './views.js'
import { bisectCommands } from './bisect.js'
import { remoteCommands } from './remote.js'

guardPipes()

// The library is loaded only when a command needs it: on a mounted workspace the commands an
// agent host runs every message (turn, status, log, rewind, diff, undo, redo, the hook) only
// talk to the daemon (control/mounted.ts), and node starting is most of their time. The rule
// the bundle (scripts/bundle-cli.mjs) is built on: what this file imports statically is the
// lean part, bundled into the `cpfs` command; everything imported with import() stays an ES
// module of the library, loaded when needed.

/**
 * The tests drive the real cpfs command: the environment is how they reach the faults they
 * inject into the plans it runs offline (plans/faults.ts), and this is the one place the CLI
 * reads them. None asked for (always, outside the tests): the library is not loaded for it.
 */
async function injectFaultsFromEnv (): Promise<void> {
  const faults = faultsFromEnv(process.env)
  if (faults) (await lib()).injectFaults(faults)
}

/** The daemon's answer when DIR (or the current directory) is in a mounted workspace; else undefined. */
async function viaMount<C extends CommandName> (pos: Record<string, string | undefined>, f: Flags, cmd: C, args?: ArgsOf<C>): Promise<ResultOf<C> | undefined> {
  return await askDaemon(mountedLocation(pos.DIR, f.store as string | undefined), cmd, args)
}

const commands: Record<string, Command> = {
  mount: {
    options: { ...dirStore, foreground: { type: 'boolean' }, 'allow-other': { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      // The directory itself: mounting never picks a workspace above (that would nest).
      const info = await (await lib()).mount({ dir: pos.DIR ?? '.', store: f.store as string | undefined, foreground: Boolean(f.foreground), allowOther: Boolean(f['allow-other']) })
      if (f.json) out(JSON.stringify(info))
      else {
        out(String(info.head))
        if (info.outside) note(`cpfs: ${info.outside.paths} path${info.outside.paths === 1 ? '' : 's'} changed outside cpfs since it last saw ${info.outside.paths === 1 ? 'it' : 'them'}: recorded as turn ${info.outside.turn} (cpfs diff ${info.outside.turn})`)
        note(`cpfs: mounted ${info.workspace} at turn ${info.head}${info.recovered ? ' (finished an interrupted plan first)' : ''}; cd into it again to see the mount`)
        // Said whether or not stderr is a terminal: these are warnings, not chatter.
        const { underneathLines } = await import('../holders.js')
        for (const line of underneathLines(info.underneath, info.workspace)) process.stderr.write(line + '\n')
        // Without the watch: a warning when someone is underneath, else a note for a terminal.
        if (info.watch.state !== 'watching') (info.underneath.length ? (l: string) => process.stderr.write(l + '\n') : note)(`cpfs: ${info.watch.why}`)
      }
      if (f.foreground) await new Promise(() => {}) // the daemon keeps the process alive until it unmounts
      return 0
    }
  },
  turn: {
    options: { ...dirStore, message: { type: 'string', short: 'm' }, prompt: { type: 'string' }, id: { type: 'string' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const labels = { message: f.message as string | undefined, prompt: f.prompt as string | undefined, id: f.id as string | undefined }
      const head = (await viaMount(pos, f, 'turn', labels))?.head ?? await (await lib()).turn({ ...target(pos, f), ...labels })
      out(f.json ? JSON.stringify({ head }) : String(head))
      return 0
    }
  },
  log: {
    options: { ...dirStore, steps: { type: 'boolean' }, all: { type: 'boolean' }, graph: { type: 'boolean' }, ...json, ...paging },
    args: ['DIR?'],
    run: async (pos, f) => {
      if (f.steps) return await logSteps(pos, f)
      const turns = await viaMount(pos, f, 'log', { lines: true }) ?? await (await lib()).log({ ...target(pos, f), lines: true })
      if (f.all || f.graph) return await logTree(turns, pos, f)
      await page(f)
      out(f.json ? JSON.stringify(turns, null, 2) : formatLog(turns))
      return 0
    }
  },
  rewind: {
    options: { ...dirStore, force: { type: 'boolean' }, 'dry-run': { type: 'boolean' }, ...json },
    args: ['TURN', 'DIR?'],
    run: async (pos, f) => {
      if (f['dry-run']) {
        const p = await (await lib()).rewindPreview(pos.TURN!, target(pos, f))
        if (f.json) {
          // Exactly the agent SDKs' rewind_files(dry_run) shape; exit 0 either way.
          const j: Record<string, unknown> = { canRewind: p.canRewind }
          if (p.error !== undefined) j.error = p.error
          Object.assign(j, { filesChanged: p.filesChanged, insertions: p.insertions, deletions: p.deletions })
          out(JSON.stringify(j))
          return 0
        }
        if (!p.canRewind && p.changes.length === 0) throw new CpfsError('UNKNOWN_TURN', p.error ?? 'cannot rewind', 'see cpfs log')
        out(formatPreview(displayLine(pos.TURN!), p))
        return p.canRewind ? 0 : 1
      }
      const fast = await viaMount(pos, f, 'rewind', { turn: pos.TURN! })
      const r = fast ? { ...fast, mounted: true, summary: undefined } : await showingProgress(Boolean(f.json), async () => (await lib()).rewind(pos.TURN!, { ...target(pos, f), force: Boolean(f.force) }))
      if (f.json) out(JSON.stringify(r))
      else if (r.dropped === 0) out(`already at the start of turn ${r.head}: nothing to rewind${r.summary ? `; applied the turns the real directory lacked: ${formatSummary(r.summary)}` : ''}`)
      else out(`rewound to the start of turn ${r.head}${r.summary ? '; ' + formatSummary(r.summary) : ''}`)
      return 0
    }
  },
  diff: {
    options: { ...dirStore, stat: { type: 'boolean' }, 'by-step': { type: 'boolean' }, 'by-command': { type: 'boolean' }, ...json, ...paging },
    args: ['TURN?', 'DIR?'],
    dashDash: 'paths',
    run: async (pos, f, paths) => {
      let spec = pos.TURN
      let dir = pos.DIR
      // One argument: a directory if it names one (and is not a turn number or a range).
      if (spec !== undefined && dir === undefined && !/^-?\d+$|\.\./.test(spec) && isDirectory(spec)) {
        dir = spec
        spec = undefined
      }
      if (f['by-step']) return await diffBySteps(spec, { dir: workspaceOf(dir), store: f.store as string | undefined }, f)
      if (f['by-command']) return await diffByCommands(spec, { dir: workspaceOf(dir), store: f.store as string | undefined }, f)
      const patches = !f.stat && !f.json
      const loc = mountedLocation(dir, f.store as string | undefined)
      const rel = loc && paths.length ? workspacePaths(loc.workspace, paths.map(p => resolve(p))) : undefined
      const r = await askDaemon(loc, 'diff', { spec, patches, paths: rel }) ??
        await (await lib()).diff(spec, { dir: workspaceOf(dir), store: f.store as string | undefined, patches, paths: paths.map(p => resolve(p)) })
      await page(f)
      if (f.json) out(JSON.stringify(r.changes, null, 2))
      else out(f.stat ? formatStat(r.changes) : formatDiff(r.changes))
      return 0
    }
  },
  blame: {
    options: { ...dirStore, ...json },
    args: ['PATH', 'DIR?'],
    run: async (pos, f) => {
      const path = resolve(pos.PATH!)
      const dir = pos.DIR ?? holding(pos.PATH!, path, 'after the path')
      const b = await (await lib()).blame(path, { dir, store: f.store as string | undefined })
      out(f.json ? JSON.stringify(b, null, 2) : formatBlame(b))
      return 0
    }
  },
  restore: {
    options: { ...dirStore, force: { type: 'boolean' }, ...json },
    args: ['TURN', 'PATH...'],
    run: async (pos, f, rest) => {
      const paths = rest.map(p => resolve(p))
      let dir: string | undefined
      // A trailing registered workspace is DIR; otherwise the workspace holding the paths.
      if (paths.length >= 2 && isRegistered(paths[paths.length - 1])) dir = paths.pop()
      dir ??= holding(rest[0], paths[0], 'as the last argument')
      const r = await showingProgress(Boolean(f.json), async () => (await lib()).restore(pos.TURN!, paths, { dir, store: f.store as string | undefined, force: Boolean(f.force) }))
      const names = r.paths.map(p => displayLine(p.slice(1)) || '.').join(', ')
      if (f.json) out(JSON.stringify(r))
      else if (r.unchanged) out(`nothing restored: ${names} ${r.paths.length === 1 ? 'is' : 'are'} already as at the start of turn ${r.turn} (nothing changed)`)
      else out(`restored ${names} to the start of turn ${r.turn}${r.summary ? '; ' + formatSummary(r.summary) : ' (as a change in the head turn)'}`)
      return 0
    }
  },
  exec: {
    options: { ...dirStore, discard: { type: 'boolean' }, sandbox: { type: 'boolean' }, 'turn-per-command': { type: 'boolean' }, 'step-per-command': { type: 'boolean' }, force: { type: 'boolean' }, 'json-result': { type: 'string' }, ...json },
    args: ['DIR?'],
    dashDash: 'command',
    run: async (pos, f, rest) => {
      const { exec: execCommand } = await import('../exec.js')
      const resultFile = f['json-result'] as string | undefined
      try {
        const r = await execCommand({ dir: pos.DIR ?? '.', store: f.store as string | undefined, command: rest, discard: Boolean(f.discard), sandbox: Boolean(f.sandbox), turnPerCommand: Boolean(f['turn-per-command']), stepPerCommand: Boolean(f['step-per-command']), force: Boolean(f.force) })
        if (resultFile) writeFileSync(resultFile, JSON.stringify(r))
        else if (f.json) out(JSON.stringify(r))
        else if (r.applied) note(`cpfs: ${formatSummary(r.summary!)}`)
        else process.stderr.write(`cpfs: the real directory was left as it was; the work was kept as a branch (${r.branch ? `cpfs rewind ${r.branch} or cpfs merge ${r.branch}` : 'cpfs redo'} brings it back)\n`)
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
    options: { ...dirStore, context: { type: 'boolean' } },
    args: ['AGENT', 'DIR?'],
    run: async (pos, f) => {
      if (pos.AGENT !== 'claude-code') throw new CpfsError('USAGE', `no hook for "${displayLine(pos.AGENT)}"`, 'supported: claude-code')
      await claudeCodeHook({ dir: pos.DIR, context: Boolean(f.context) })
      return 0 // never block the user's prompt
    }
  },
  mcp: {
    options: { ...dirStore },
    args: ['DIR?'],
    run: async (pos, f) => {
      // Resolve the workspace now: an MCP client may start us from anywhere.
      const { serveMcp } = await import('../mcp.js')
      await serveMcp({ dir: workspaceOf(pos.DIR), store: f.store as string | undefined })
      return 0
    }
  },
  prune: {
    options: { ...dirStore, 'keep-turns': { type: 'string' }, 'keep-branches': { type: 'string' }, 'older-than': { type: 'string' }, 'max-size': { type: 'string' }, orphans: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const hk = await import('../housekeeping.js')
      const num = (v: unknown, what: string) => {
        if (v === undefined) return undefined
        if (!/^\d+$/.test(String(v))) throw new CpfsError('USAGE', `${what} must be a whole number, not "${displayLine(String(v))}"`, 'see cpfs prune --help')
        return Number(v)
      }
      const reports: Array<import('../housekeeping.js').PruneReport> = []
      if (f.orphans) reports.push(...await hk.pruneOrphans())
      if (!f.orphans || pos.DIR) {
        reports.push(await showingProgress(Boolean(f.json), () => hk.prune({ ...target(pos, f), keepTurns: num(f['keep-turns'], '--keep-turns'), keepBranches: num(f['keep-branches'], '--keep-branches'), olderThanDays: num(f['older-than'], '--older-than'), maxSize: f['max-size'] as string | undefined })))
      }
      out(f.json ? JSON.stringify(reports, null, 2) : reports.map(formatPrune).join('\n') || 'nothing to prune')
      return 0
    }
  },
  forget: {
    options: { ...dirStore, yes: { type: 'boolean' }, force: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const hk = await import('../housekeeping.js')
      const t = target(pos, f)
      if (!f.yes) {
        if (!process.stdin.isTTY) throw new CpfsError('USAGE', 'forget deletes the whole history and needs confirmation', 'pass --yes')
        const { createInterface } = await import('node:readline')
        const rl = createInterface({ input: process.stdin, output: process.stderr })
        const answer = await new Promise<string>(done => rl.question(`Delete every turn of ${t.dir}? This cannot be undone. [y/N] `, done))
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
      const r = await showingProgress(Boolean(f.json), async () => (await lib()).fork(pos.TURN!, pos.DEST!, target(pos, f)))
      if (f.json) out(JSON.stringify(r))
      else out(`forked turn ${r.turn} into ${r.dest} (its own history starts there); ${formatSummary(r.summary)}`)
      return 0
    }
  },
  undo: {
    options: { ...dirStore, force: { type: 'boolean' }, step: { type: 'string' }, 'dry-run': { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      if (typeof f.step === 'string') return await undoStepCommand(f.step, target(pos, f), f)
      if (f['dry-run']) throw new CpfsError('USAGE', '--dry-run goes with --step (for a whole turn: cpfs rewind TURN --dry-run)', 'cpfs undo --step ID --dry-run')
      const fast = await viaMount(pos, f, 'undo')
      const r = fast ? { ...fast, mounted: true, summary: undefined } : await showingProgress(Boolean(f.json), async () => (await lib()).undo({ ...target(pos, f), force: Boolean(f.force) }))
      if (f.json) out(JSON.stringify(r))
      else out(`undone: back at the start of turn ${r.head}${r.summary ? '; ' + formatSummary(r.summary) : ''}`)
      return 0
    }
  },
  redo: {
    options: { ...dirStore, force: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const fast = await viaMount(pos, f, 'redo')
      const r = fast ? { ...fast, mounted: true, summary: undefined } : await showingProgress(Boolean(f.json), async () => (await lib()).redo({ ...target(pos, f), force: Boolean(f.force) }))
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
        const { statusAll } = await import('../housekeeping.js')
        const list = await statusAll()
        out(f.json ? JSON.stringify(list, null, 2) : formatAll(list))
        return 0
      }
      if (f['reset-stats']) {
        await (await lib()).resetStats(target(pos, f))
        return 0
      }
      const loc = mountedLocation(pos.DIR, f.store as string | undefined)
      const fast = await askDaemon(loc, 'status')
      const s = fast ? statusFromDaemon(loc!, fast) : await (await lib()).status(target(pos, f))
      if (!f.stats) delete s.ops
      out(f.json ? JSON.stringify(s) : formatStatus(s))
      return 0
    }
  },
  fsck: {
    options: { ...dirStore, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const r = await (await lib()).fsck(target(pos, f))
      if (f.json) out(JSON.stringify(r))
      else out((await import('./fsck.js')).formatFsck(r))
      return r.clean ? 0 : 1
    }
  },
  unmount: {
    options: { ...dirStore, discard: { type: 'boolean' }, force: { type: 'boolean' }, ...json },
    args: ['DIR?'],
    run: async (pos, f) => {
      const t = target(pos, f)
      // This process must not keep the mount busy itself (the README's flow runs it from inside).
      process.chdir('/')
      let r: UnmountResult
      try {
        r = await showingProgress(Boolean(f.json), async () => (await lib()).unmount({ ...t, discard: Boolean(f.discard), force: Boolean(f.force) }))
      } catch (err) {
        if (!isCpfsError(err) || err.code !== 'MOUNT_BUSY') throw err
        const { holdersOf, describeHolders, busyHint } = await import('../holders.js')
        const holders = holdersOf(t.dir!)
        if (holders.length === 0) throw err
        throw new CpfsError('MOUNT_BUSY', `${t.dir} is busy: ${describeHolders(holders)}`, busyHint(holders, t.dir!))
      }
      if (f.json) out(JSON.stringify(r))
      else out(formatUnmount(r, t.dir!))
      return 0
    }
  },
  ...stepCommands,
  ...mergeCommands,
  ...viewCommands,
  ...bisectCommands,
  ...remoteCommands
}

async function completion (rest: string[]): Promise<number> {
  const c = await import('./completion.js')
  switch (rest[0]) {
    case '--help': case '-h': out(usage('completion')); return 0
    case 'bash': out(c.bashCompletion(c.specsOf(commands))); return 0
    case 'zsh': out(c.zshCompletion(c.specsOf(commands))); return 0
    case 'fish': out(c.fishCompletion(c.specsOf(commands))); return 0
    case 'turns': {
      // For the completion scripts: turn numbers and ids of the workspace here, quietly.
      try {
        const turns = await (await lib()).log({ dir: workspaceOf(rest[1]) })
        out(turns.flatMap(t => [String(t.turn), ...(t.id ? [t.id] : [])]).join('\n'))
      } catch {}
      return 0
    }
    default: throw new CpfsError('USAGE', `no completion for "${displayLine(rest[0] ?? '')}"`, 'run: eval "$(cpfs completion bash)", eval "$(cpfs completion zsh)" or cpfs completion fish | source')
  }
}

/** Split argv at the first `--`: what comes after is a list of paths or a command. */
function splitDashDash (rest: string[]): { own: string[], after: string[] | null } {
  const i = rest.indexOf('--')
  return i < 0 ? { own: rest, after: null } : { own: rest.slice(0, i), after: rest.slice(i + 1) }
}

async function main (argv: string[]): Promise<number> {
  const [name, ...rest] = argv
  if (name === 'completion') return await completion(rest)
  if (!name || name === '--help' || name === '-h') {
    out(HELP)
    return name ? 0 : 2
  }
  if (name === 'help') {
    const topic = rest[0]
    if (topic && !commands[topic] && topic !== 'completion') throw unknownCommand(topic)
    out(topic ? usage(topic) : HELP)
    return 0
  }
  if (name === '--version' || name === '-V') {
    out('cpfs 0.1.0')
    return 0
  }
  const cmd = commands[name]
  if (!cmd) throw unknownCommand(name)
  const { own, after } = cmd.dashDash ? splitDashDash(rest) : { own: rest, after: null }
  if (own.includes('--help') || own.includes('-h')) {
    out(usage(name))
    return 0
  }
  let parsed
  const takesTurn = cmd.args[0]?.startsWith('TURN') || name === 'bisect' // bisect: --good -3, --bad -1
  try {
    parsed = parseArgs({ args: takesTurn ? hideRelativeTurns(own) : own, options: cmd.options, allowPositionals: true, strict: true })
  } catch (err: any) {
    const hint = /^-\d+$/.test(String(err.message).match(/'(-[^']*)'/)?.[1] ?? '') ? 'a turn counted back from the head (-1, -2) is a TURN argument of rewind, diff, restore and fork' : `see cpfs ${name} --help`
    throw new CpfsError('USAGE', displayLine(String(err.message).split(/\.( |$)/)[0]), hint)
  }
  parsed.positionals = parsed.positionals.map(unhide)
  for (const [k, v] of Object.entries(parsed.values)) (parsed.values as Record<string, unknown>)[k] = unhide(v)
  if (cmd.dashDash === 'command' && after === null) throw new CpfsError('USAGE', 'no command given', 'put the command after --, e.g. cpfs exec . -- npm test')
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
    const extra = displayLine(parsed.positionals[cmd.args.length])
    throw new CpfsError('USAGE', `unexpected argument "${extra}"`, cmd.dashDash === 'paths' ? `paths go after --, e.g. cpfs ${name} 3 -- ${extra}` : `see cpfs ${name} --help`)
  }
  cmd.args.forEach((a, i) => { if (!a.endsWith('...')) pos[a.replace('?', '')] = parsed.positionals[i] })
  const tail = variadic ? parsed.positionals.slice(cmd.args.length - 1) : after ?? []
  await injectFaultsFromEnv()
  return await cmd.run(pos, parsed.values as Flags, tail)
}

function unknownCommand (word: string): CpfsError {
  const guess = suggest(word, Object.keys(commands))
  return new CpfsError('USAGE', `unknown command "${displayLine(word)}"${guess ? `; did you mean ${guess}?` : ''}`, guess ? `cpfs ${guess} --help` : 'run cpfs --help for the list of commands')
}

const isHook = process.argv[2] === 'hook'

main(process.argv.slice(2)).then(
  async (code) => {
    await endOutput()
    process.exitCode = code
    // The hook is done: do not wait for anything (a daemon that never answered, stdin).
    if (isHook) process.exit(0)
  },
  async (err) => {
    await endOutput()
    if (isCpfsError(err)) {
      process.stderr.write(displayLine(err.line()) + '\n')
      process.exitCode = err.code === 'USAGE' ? 2 : 1
    } else {
      process.stderr.write(`cpfs: internal error: ${displayLine(String(err?.message ?? err))} (please report it with the daemon log)\n`)
      if (process.env.CPFS_DEBUG) process.stderr.write(String(err?.stack) + '\n')
      process.exitCode = 70
    }
    // A hook must never block the prompt: whatever failed, it exits 0 (the line above says why).
    if (isHook) process.exit(0)
  }
)
