// Shell completion for bash, zsh and fish, generated from the CLI's own table of commands and
// options (so it never falls behind): subcommands, each command's flags, directories where a
// directory goes, and turn numbers and ids where a TURN goes — asked from the workspace at
// completion time with `cpfs completion turns`, which prints one per line.

export interface CommandSpec {
  /** Long option names (without --) and their short letters. */
  options: Array<{ name: string, short?: string, value: boolean }>
  /** Does the first positional argument name a turn? */
  turnFirst: boolean
}

/** What completion needs to know of each command, from the CLI's table of commands (main.ts). */
export function specsOf (commands: Record<string, { options: Record<string, { type: string, short?: string }>, args: string[] }>): Record<string, CommandSpec> {
  const specs: Record<string, CommandSpec> = {}
  for (const [name, cmd] of Object.entries(commands)) {
    specs[name] = {
      options: Object.entries(cmd.options).filter(([o]) => o !== 'json-result').map(([o, d]) => ({ name: o, short: d.short, value: d.type === 'string' })),
      turnFirst: cmd.args[0] === 'TURN' || cmd.args[0] === 'TURN?'
    }
  }
  specs.completion = { options: [], turnFirst: false }
  return specs
}

/** Options whose value is a directory. */
const DIR_VALUES = new Set(['store'])

function flags (spec: CommandSpec): string[] {
  const out = ['--help']
  for (const o of spec.options) {
    out.push('--' + o.name)
    if (o.short) out.push('-' + o.short)
  }
  return out
}

function valueFlags (specs: Record<string, CommandSpec>): { dirs: string[], other: string[] } {
  const dirs = new Set<string>()
  const other = new Set<string>()
  for (const spec of Object.values(specs)) {
    for (const o of spec.options) {
      if (!o.value) continue
      const names = ['--' + o.name, ...(o.short ? ['-' + o.short] : [])]
      for (const n of names) (DIR_VALUES.has(o.name) ? dirs : other).add(n)
    }
  }
  return { dirs: [...dirs].sort(), other: [...other].sort() }
}

export function bashCompletion (specs: Record<string, CommandSpec>): string {
  const names = Object.keys(specs)
  const v = valueFlags(specs)
  const cases = names.map(n => `    ${n}) flags="${flags(specs[n]).join(' ')}" ;;`).join('\n')
  const turnCmds = names.filter(n => specs[n].turnFirst).join('|')
  return `# cpfs completion for bash: eval "$(cpfs completion bash)" (e.g. in ~/.bashrc)
_cpfs () {
  # The word being completed, colons included (turn ids look like session:3).
  local line=\${COMP_LINE:0:$COMP_POINT}
  local cur=\${line##*[[:space:]]}
  local prev=\${COMP_WORDS[COMP_CWORD-1]}
  local cmd=\${COMP_WORDS[1]} flags="" i n=0 w
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "${names.join(' ')} help" -- "$cur") )
    return
  fi
  case "$cmd" in
${cases}
    help) COMPREPLY=( $(compgen -W "${names.join(' ')}" -- "$cur") ); return ;;
    completion) COMPREPLY=( $(compgen -W "bash zsh fish" -- "$cur") ); return ;;
    hook) [ "$COMP_CWORD" -eq 2 ] && { COMPREPLY=( $(compgen -W "claude-code" -- "$cur") ); return; } ;;
  esac
  case "$prev" in
    ${v.dirs.join('|')}) COMPREPLY=( $(compgen -d -- "$cur") ); return ;;
    ${v.other.join('|')}) return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$flags" -- "$cur") )
    return
  fi
  # Positional arguments before this one (values of options do not count).
  for ((i = 2; i < COMP_CWORD; i++)); do
    w=\${COMP_WORDS[i]}
    case "$w" in
      ${[...v.dirs, ...v.other].join('|')}) ((i++)) ;;
      -*) ;;
      *) ((n++)) ;;
    esac
  done
  COMPREPLY=()
  case "$cmd" in
    ${turnCmds})
      if [ "$n" -eq 0 ]; then
        local IFS=$'\\n'
        COMPREPLY=( $(compgen -W "$(cpfs completion turns 2>/dev/null)" -- "$cur") )
        # bash splits words at colons: hand back only what follows the last one typed.
        local colon=\${cur%"\${cur##*:}"}
        [ -n "$colon" ] && COMPREPLY=( "\${COMPREPLY[@]#"$colon"}" )
        unset IFS
      fi ;;
  esac
  COMPREPLY+=( $(compgen -d -- "$cur") )
}
complete -o filenames -F _cpfs cpfs
`
}

export function zshCompletion (specs: Record<string, CommandSpec>): string {
  const names = Object.keys(specs)
  const v = valueFlags(specs)
  const cases = names.map(n => `    ${n}) flags=(${flags(specs[n]).join(' ')}) ;;`).join('\n')
  const turnCmds = names.filter(n => specs[n].turnFirst).join('|')
  return `#compdef cpfs
# cpfs completion for zsh: eval "$(cpfs completion zsh)" after compinit (e.g. in ~/.zshrc)
_cpfs () {
  local cmd=$words[2] w
  local -a flags turns
  local -i i n=0
  if (( CURRENT == 2 )); then
    compadd -- ${names.join(' ')} help
    return
  fi
  case $cmd in
${cases}
    help) compadd -- ${names.join(' ')}; return ;;
    completion) compadd -- bash zsh fish; return ;;
    hook) (( CURRENT == 3 )) && { compadd -- claude-code; return } ;;
  esac
  case $words[CURRENT-1] in
    ${v.dirs.join('|')}) _files -/; return ;;
    ${v.other.join('|')}) return ;;
  esac
  if [[ $PREFIX == -* ]]; then
    compadd -- $flags
    return
  fi
  for (( i = 3; i < CURRENT; i++ )); do
    w=$words[i]
    case $w in
      ${[...v.dirs, ...v.other].join('|')}) (( i++ )) ;;
      -*) ;;
      *) (( n++ )) ;;
    esac
  done
  case $cmd in
    ${turnCmds})
      if (( n == 0 )); then
        turns=(\${(f)"$(cpfs completion turns 2>/dev/null)"})
        compadd -- $turns
      fi ;;
  esac
  _files -/
}
compdef _cpfs cpfs
`
}

export function fishCompletion (specs: Record<string, CommandSpec>): string {
  const names = Object.keys(specs)
  const lines = [
    '# cpfs completion for fish: cpfs completion fish | source (e.g. in ~/.config/fish/config.fish)',
    'complete -c cpfs -f',
    `complete -c cpfs -n __fish_use_subcommand -a '${[...names, 'help'].join(' ')}'`,
    `complete -c cpfs -n '__fish_seen_subcommand_from help' -a '${names.join(' ')}'`,
    "complete -c cpfs -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'",
    "complete -c cpfs -n '__fish_seen_subcommand_from hook' -a claude-code"
  ]
  for (const n of names) {
    const when = `'__fish_seen_subcommand_from ${n}'`
    lines.push(`complete -c cpfs -n ${when} -l help`)
    for (const o of specs[n].options) {
      const value = o.value ? (DIR_VALUES.has(o.name) ? " -r -a '(__fish_complete_directories)'" : ' -r') : ''
      lines.push(`complete -c cpfs -n ${when} -l ${o.name}${o.short ? ` -s ${o.short}` : ''}${value}`)
    }
    if (specs[n].turnFirst) lines.push(`complete -c cpfs -n "__fish_seen_subcommand_from ${n}; and test (count (commandline -opc)) -eq 2" -a '(cpfs completion turns 2>/dev/null)'`)
    lines.push(`complete -c cpfs -n ${when} -a '(__fish_complete_directories)'`)
  }
  return lines.join('\n') + '\n'
}
