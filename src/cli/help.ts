// Help texts, one per command, each with an example.
export const HELP = `cpfs — a checkpointing filesystem for coding agents

Usage: cpfs <command> [options]

  mount [DIR]            mount DIR (default .) in place; prints the head turn
  turn [DIR]             seal the head turn, open the next; prints its number
  log [DIR]              turns with time, message, id and what each changed
  diff [TURN|A..B] [DIR] what a turn (default: the head) or a range changed
  rewind TURN [DIR]      make the workspace what it was when TURN began
  blame PATH [DIR]       every turn that changed PATH, and the process that changed it
  restore TURN PATH...   restore files or directories to their state at TURN
  fork TURN DEST [DIR]   write the view at TURN into a new directory with its own history
  view TURN [PATH] [DIR] mount the tree at the start of TURN read-only (--list, --close)
  bisect --good T -- CMD find the first turn CMD fails on, testing views of turns
  undo [DIR]             drop everything since the last cpfs turn (--step ID: one step only)
  redo [DIR]             back to the tip the last rewind or undo left (writes since are kept)
  revert TURN [DIR]      take back one turn's change as a new turn, keeping every later turn
  merge BRANCH [DIR]     bring a branch's work (bN, cpfs log --all) into the head as a new turn
  status [DIR]           mounted or not, head, pending turns, store (--all: every store)
  prune [DIR]            retention: merge old turns, delete unreferenced data
  forget [DIR]           delete a workspace's whole history
  fsck [DIR]             check the store, repair what can be, list what is lost
  exec [DIR] -- CMD...   mount, run CMD inside, unmount (CI agents; --sandbox, --discard)
  mcp [DIR]              an MCP server on stdio: an agent lists, diffs, rewinds its own turns
  hook claude-code [DIR] Claude Code's hooks: a turn per prompt, a step per tool call, feedback
  step begin|end|show|list  steps: one tool call or command inside a turn (see undo --step)
  unmount [DIR]          unmount and apply the result to the real directory, verified
  remote add|rm|ls|gc    S3-compatible remotes a history is pushed to and cloned from
  push [NAME] [DIR]      send every turn and branch to a remote (S3), deduplicated
  pull [NAME] [DIR]      bring the remote's new turns in: fast-forward, or a branch to merge
  clone URL DIR          a new workspace from a pushed history, verified byte-exact
  completion bash|zsh|fish  a completion script for your shell (commands, flags, turns)

TURN is a number (cpfs log), an id (cpfs turn --id), or -N counted back from the head:
-1 is the head turn, so cpfs rewind -1 goes back to the last checkpoint. Turns a rewind
left are kept as branches (cpfs log --all): bN:T is turn T of branch N, bN its tip.
Run cpfs <command> --help for options and an example; eval "$(cpfs completion bash)" completes.
Example session:
  cpfs mount ~/src/app && cd ~/src/app
  ... work ...;  cpfs turn -m "add login form"
  ... work ...;  cpfs rewind 2
  cd ~ && cpfs unmount ~/src/app`

const texts: Record<string, string> = {
  mount: `Usage: cpfs mount [DIR] [--store PATH] [--foreground] [--allow-other] [--json]

Mount DIR (default: .) in place through the cpfs overlay. Every write by any process then
lands in the head turn's layer; the real files are not changed until cpfs unmount.
Returns once the mount is live and prints the head turn. Resumes an existing history.
Processes whose current directory was inside DIR before the mount must cd into it again.

  --store PATH     keep the history in PATH (default: $CPFS_HOME/<name>-<hash>/store)
  --foreground     run the daemon in this process instead of the background
  --allow-other    let other users use the mount (the kernel checks permissions)

Example:  cpfs mount ~/src/app && cd ~/src/app`,
  turn: `Usage: cpfs turn [DIR] [-m MESSAGE] [--prompt TEXT] [--id EXTERNAL_ID] [--json]

Seal the head turn and open the next one; prints the new turn's number. The workspace must
be mounted (not mounted, nothing can change, and it says so).
  -m MESSAGE     what the turn being sealed did (as git commit -m)
  --prompt TEXT  what the new turn is for (an agent host passes the user's message)
  --id ID        names the new turn (the host's message id): cpfs rewind ID later goes back
                 to just before it. Ids are unique, and never a number or a range.

Examples:  cpfs turn -m "refactor the parser"
           cpfs turn --id msg_0142 --prompt "Add a login form"`,
  log: `Usage: cpfs log [DIR] [--all | --graph] [--steps] [--json]

List the turns: number (* marks the head), when it was opened, how many paths, lines (+/-,
text files) and bytes it changed, its external id, its prompt (what it was opened for) and
its message (what it did, from cpfs turn -m). --json adds each turn's changed paths. On a
terminal the list goes through the pager (--no-pager, --color=auto|always|never).
--steps lists the steps instead (tool calls, commands): number, id, turn, paths, label.
--all adds every branch: the turns a rewind, undo, discard or redo left, each with the
turns it shares with the head and its own turns, named bN:T for cpfs rewind. --graph
draws them as git log --graph does; --json prints {"turns", "branches"}.

Examples: cpfs log --json | jq '.[] | select(.files > 0) | .turn'
          cpfs log --graph && cpfs rewind b2:7`,
  diff: `Usage: cpfs diff [TURN | A..B] [DIR] [--stat] [--by-step | --by-command] [--json] [--no-pager] [--color WHEN] [-- PATH...]

Show what TURN changed (default: the head turn, so far), or turns A through B (A.. and ..B
work too), as a git-style patch that git apply and patch -p1 accept: text hunks, binary
files (GIT binary patch), the executable bit, symlinks, additions and deletions. What a
patch cannot carry (directory moves, other mode bits, owners) is listed above it.
--stat prints one line per path with +/- counts, counted as cpfs log counts them.
-- PATH... keeps only the changes at or below those paths (relative to this directory).
--by-step shows each step of those turns (a tool call, a command) with what it changed;
--by-command the changes under each process that made them (its command, the commands above).
On a terminal: coloured (--color=auto|always|never; NO_COLOR turns it off) and paged
($CPFS_PAGER, else $PAGER, else less -FRX; --no-pager).

Examples:  cpfs diff 3 --stat
           cpfs diff 3 -- src/parser.ts | git apply -R`,
  rewind: `Usage: cpfs rewind TURN [DIR] [--dry-run] [--force] [--json]

Make the workspace exactly what it was when TURN (a number, an external id, or -N counted
back from the head: -1 is the head turn, -2 the one before) began. Rewinding to where the
workspace is already changes nothing and adds no redo step.
History is a tree: the turns a rewind leaves are kept as a branch (cpfs log --all), also
after later writes. TURN may name a turn of any branch, bN:T (T as above), and bN alone
goes to branch N's tip, as it was when left.
Mounted: replaces the stack of turns in one atomic step (cpfs redo goes back).
Not mounted: changes the real directory through a drift-checked, journaled, verified plan;
--force replaces paths that were changed outside cpfs (their content stays in the store).
Files open across a live rewind become stale (reads and writes fail with ESTALE); reopen them.
--dry-run prints what would change (paths, +/- lines) and changes nothing; with --json it
prints {"canRewind", "error"?, "filesChanged", "insertions", "deletions"} and exits 0.

Examples:  cpfs rewind 3 --dry-run && cpfs rewind 3
           cpfs rewind -1        # back to the last checkpoint (cpfs turn)`,
  blame: `Usage: cpfs blame PATH [DIR] [--json]

Every turn that changed PATH, oldest first: what it did there (as cpfs diff TURN -- PATH
says: modified +/- lines, added, deleted, mode...), when (the path's last change in that
turn), and who — each process that changed it in the mount (pid and command line), in the
order they first did, with the commands it ran under (its shell, the tool that started it,
the agent), or a process that wrote underneath the mount. Changes
cpfs made itself (restore, a plan) and those of stores older than process records say so.
PATH is relative to this directory; the workspace is the one that holds it, or DIR.

Example:  cpfs blame .env
          cpfs blame src/parser.ts --json | jq '.lines[] | {turn, command: .process.command}'`,
  restore: `Usage: cpfs restore TURN PATH... [DIR] [--force] [--json]

Restore files or directories (and everything below them) to their state at the start of
TURN. Paths are relative to the current directory; the workspace is the one that holds
them, or DIR when given last. Mounted: the restore is a new change in the head turn (undo
takes it back). Not mounted: it is applied to the real directory through a drift-checked,
verified plan. A path that did not exist at TURN is removed. Paths that already are as at
TURN change nothing (not even the history), and it says so.

Example:  cpfs restore 2 src/parser.ts docs/`,
  remote: `Usage: cpfs remote [--dir DIR]
       cpfs remote add NAME s3://BUCKET/PREFIX [--endpoint URL] [--as WORKSPACE] [--dir DIR]
       cpfs remote rm NAME [--dir DIR]
       cpfs remote ls [NAME | s3://BUCKET/PREFIX] [--endpoint URL] [--json]
       cpfs remote gc [NAME | s3://BUCKET/PREFIX] [--grace HOURS] [--dry-run] [--json]

A remote is a prefix in an S3-compatible bucket (AWS S3, R2, MinIO, Ceph's radosgw); one
prefix holds many workspaces and stores each chunk once. The workspace is WORKSPACE there
(default: its directory's name). Credentials and region come from the standard AWS variables
and config files (AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws/...); --endpoint, AWS_ENDPOINT_URL_S3
or AWS_ENDPOINT_URL name a server other than AWS. With no action, lists this workspace's
remotes; ls lists the workspaces a remote holds, with their turns and sizes. gc deletes what no
workspace's ref reaches, in two steps a grace period apart (default 24 hours): each run
deletes what an earlier run marked at least that long ago and that is still unreachable, and
marks what is unreachable now; a push running meanwhile is never robbed.

Example:  cpfs remote add origin s3://team-agents/histories --endpoint http://127.0.0.1:7480`,
  push: `Usage: cpfs push [NAME] [DIR] [--force] [--json]

Send the workspace's history — every turn and branch, mounted or not — to remote NAME (the
only one when omitted). Chunks the remote holds already (from any workspace there) are not
sent again; the rest go in compressed pack objects of ~16 MiB, then the turns, then the
workspace's ref, replaced by compare-and-swap: a push cut anywhere leaves the remote's last
complete history in place. If the remote has turns this workspace does not (another machine
pushed), the push is refused; --force replaces them.
  --json      what was sent: turns, branches, trees, chunks, bytes, storedBytes, requests

Example:  cpfs push origin`,
  pull: `Usage: cpfs pull [NAME] [DIR] [--full] [--force] [--json]

Bring the turns remote NAME has and this workspace lacks (pushed by another machine, a clone
of this history) into the history, mounted or not. Every object is checked against its name
first. What is new arrives as a branch; when this workspace has nothing of its own past the
remote's turns (its head turn is empty), the head moves onto it, as cpfs redo bN does (not
mounted: through a verified plan; --force as for rewind). Otherwise nothing moves: cpfs merge
bN brings their work into the head, then cpfs push sends both.
  --full      in a lazy clone, also fetch the older turns' data it left on the remote (where
              it was cloned from): the history no longer needs the remote
  --json      branch, layers, chunks, bytes, fastForward, moved, filled

Example:  cpfs pull origin && cpfs log --all`,
  clone: `Usage: cpfs clone s3://BUCKET/PREFIX/WORKSPACE DIR [--full] [--endpoint URL] [--json]

Make DIR (new, or empty) a workspace with the history pushed as WORKSPACE: every turn and
branch, the same turn numbers, the head view written into DIR. Every object is checked
against its name and every file verified byte for byte before the history is usable; a
damaged or missing object stops the clone and leaves nothing behind. The remote is added to
the clone as origin.
The clone is lazy: it fetches the data of the head view, and an older turn's data when
something reads it (a rewind, a diff, a file read in a mount), checked against its hash and
kept in the store. Until then the clone needs the remote to reach that history.
  --full      fetch every turn's data now (a clone that never needs the remote again; later,
              cpfs pull --full does the same)
  --json      turns, branches, chunks, bytes, remoteChunks (left on the remote), requests

Example:  cpfs clone s3://team-agents/histories/ci-4711 ./ci-4711 && cpfs log ./ci-4711`,
  fork: `Usage: cpfs fork TURN DEST [DIR] [--json]

Write the workspace as it was at the start of TURN into DEST (a new or empty directory
outside the workspace), verified byte for byte, and give DEST its own cpfs history starting
there. The workspace and its history are untouched: try another direction without losing
the current one.

Example:  cpfs fork 3 ../app-attempt-2 && cpfs mount ../app-attempt-2`,
  revert: `Usage: cpfs revert TURN [DIR] [--dry-run] [--json]

Take back what turn TURN changed, as git revert does: its inverse is merged three-way into
the head (base: the end of TURN, theirs: its start, ours: the head) and sealed as a new turn
labelled "revert turn TURN"; every later turn stays. A path a later turn changed too is
merged line by line when it is text and the changes do not touch the same lines; otherwise
it is a conflict (same lines, binary, type, mode, symlink, modify/delete, something left in
a directory the revert removes, a file with several names). Any conflict changes nothing:
the command fails naming the paths; --dry-run --json shows each side (base, theirs, ours)
and the merged text with git's markers. Pending work is sealed as a turn first. The
workspace must be mounted.
  --dry-run   list what would change, and the conflicts; change nothing (exit 1 on conflicts)
  --json      the result: what, changes, conflicts (path, why, base, theirs, ours, merged)

Examples:  cpfs revert 3 --dry-run && cpfs revert 3
           cpfs revert -2 --dry-run --json | jq '.conflicts[].path'`,
  merge: `Usage: cpfs merge BRANCH [DIR] [--dry-run] [--json]

Bring branch BRANCH's work (bN, from cpfs log --all: what a rewind, undo or sandboxed run
left) into the head, merged three-way (base: the turns the branch shares with the head, or
where a sandboxed run started; theirs: the branch's tip; ours: the head) and sealed as a new
turn labelled "merge bN". The rules and conflicts are revert's; any conflict changes
nothing. Paths a sandboxed run could not be sure of are conflicts. The workspace must be
mounted.
  --dry-run   list what would change, and the conflicts; change nothing (exit 1 on conflicts)
  --json      the result: what, changes, conflicts (path, why, base, theirs, ours, merged)

Example:   cpfs rewind 4 && ... other work ... && cpfs merge b1`,
  undo: `Usage: cpfs undo [DIR] [--force] [--json]
       cpfs undo --step ID [DIR] [--dry-run] [--force] [--json]

Drop everything since the last cpfs turn (a rewind to the start of the head turn). When the
head turn has no changes, step back one more turn.
--step ID takes back one step only (a tool call by its tool_use_id, or a step number): every
path it changed goes back to how it was just before, everything later stays. When a later
change touched the same paths it refuses, naming them; --force takes the step's version back
anyway (the later one stays in the history). --dry-run says what it would do. Mounted or not
(offline, the real directory is changed by a drift-checked, verified plan).

Examples:  cpfs undo
           cpfs undo --step toolu_01A2B3 --dry-run`,
  redo: `Usage: cpfs redo [DIR] [--force] [--json]

Go back to the tip the last rewind, undo or discard left, also after writes: what was
written since is kept as a branch of its own (cpfs log --all), so both stay. Each redo goes
back one rewind. To go to any other branch's tip: cpfs rewind bN.

Example:  cpfs undo && cpfs redo`,
  hook: `Usage: cpfs hook claude-code [DIR] [--context]

Claude Code's UserPromptSubmit hook: reads the hook's JSON on stdin and opens a new turn for
a prompt the user typed, with its prompt_id as the id (else <session>:<n>: the first 8
characters of session_id, and n counting that session's prompts from 1 — never given twice,
also after a rewind) and its first line as the turn's prompt. Input that is not JSON is
reported as such. Other events and prompts not from
the user are ignored. Never blocks a prompt: whatever the input or the daemon does, it exits
0 within seconds, with at most one line on stderr and nothing on stdout — unless --context,
which prints the documented additionalContext JSON telling the model the turn's id.
Example (.claude/settings.json):
  { "hooks": { "UserPromptSubmit": [ { "hooks": [
      { "type": "command", "command": "cpfs hook claude-code" } ] } ] } }
Then: cpfs log shows one turn per prompt; cpfs rewind <session>:<n> goes back to before it.

PreToolUse and PostToolUse (same command) make each tool call a step named by its
tool_use_id: after the call, the hook prints Claude Code's additionalContext JSON saying what
the call created, modified and deleted, and what deserves a second look (deleted tracked
files, secrets and dotfiles, changes outside the paths the call named, large deletions,
processes left running, other processes' changes); nothing for a call that changed nothing.
  "PreToolUse":  [ { "matcher": "*", "hooks": [ { "type": "command", "command": "cpfs hook claude-code" } ] } ],
  "PostToolUse": [ { "matcher": "*", "hooks": [ { "type": "command", "command": "cpfs hook claude-code" } ] } ]
Then: cpfs undo --step <tool_use_id> takes one call back. A call interrupted before its
PostToolUse ends at the session's next prompt, or at its Stop event when that is hooked too.`,
  step: `Usage: cpfs step begin [LABEL] [--id ID] [DIR] [--json]
       cpfs step end [ID] [DIR] [--json]
       cpfs step show ID [DIR] [--json]
       cpfs step list [DIR] [--json]

A step is one tool call or command inside a turn: what changes while it is open, made by
the shell that began it (or the processes that shell starts), belongs to it. begin prints
its number; end prints what it changed and what deserves a second look; show tells it again;
list lists the steps. cpfs undo --step ID takes one back. Steps also come from Claude Code's
PreToolUse/PostToolUse hook, the MCP tools step_begin/step_end, and exec --step-per-command.

Example:  cpfs step begin "regenerate" --id gen1 && ./gen.sh && cpfs step end gen1`,
  mcp: `Usage: cpfs mcp [DIR] [--store PATH]

Serve the Model Context Protocol on stdin/stdout for the workspace DIR (default .), with the
tools list_turns, status, checkpoint, show_diff, blame, rewind_dry_run, rewind, redo,
step_begin, step_end, changes_since and undo_step. Turns may
be numbers or strings; each tool is annotated (readOnlyHint, destructiveHint), and the
read-only ones never change anything (an interrupted plan is reported, not finished).
Answers are JSON of at most 20,000 characters (max_chars changes it): summaries and pages,
paths workspace-relative without a leading "/"; an unknown argument is refused.

Example (an MCP client's configuration):
  { "mcpServers": { "cpfs": { "command": "cpfs", "args": ["mcp", "/path/to/workspace"] } } }`,
  exec: `Usage: cpfs exec [DIR] [--discard] [--sandbox] [--turn-per-command] [--step-per-command] [--force] -- CMD...

Mount DIR (default .), run CMD inside it (its working directory is the mount), then unmount:
apply the result through a verified plan, or with --discard leave the real directory as it
was (the work is kept as a branch: cpfs redo brings it back). Exits with
CMD's exit code. Ctrl-C and SIGTERM are passed on to
CMD, and the mount is always cleaned up.
  --sandbox           run in a private mount namespace: only CMD and its children see the
                      overlay, with a store of its own, so several agents can work on one
                      checkout at once; each applies when it ends, and its work is kept
                      as a branch of DIR's history (cpfs log --all; cpfs merge bN)
  --turn-per-command  each argument after -- is a shell command line with a turn of its own
  --step-per-command  each argument after -- is a shell command line with a step of its own

Examples:  cpfs exec . -- npm test
           cpfs exec . --sandbox --turn-per-command -- "npm ci" "npm run build"`,
  prune: `Usage: cpfs prune [DIR] [--keep-turns N] [--keep-branches N] [--older-than DAYS] [--max-size SIZE] [--orphans] [--json]

Keep the store's disk use bounded. Merges the oldest turns into one (so the original tree
and every kept turn stay rewindable byte-exact; the merged turns in between no longer are),
then deletes layers and chunks that nothing references any more. Turns are renumbered;
external ids stay with their turns. Needs the workspace unmounted and its turns applied.
  --keep-turns N      keep the newest N turns
  --keep-branches N   keep the N branches left most recently (cpfs log --all); drop the others
  --older-than DAYS   merge turns sealed, and drop branches left, more than DAYS ago
  --max-size SIZE     drop the branches left longest ago, then merge the oldest turns,
                      until the store is at most SIZE (e.g. 2G)
  --orphans           delete the history of workspaces that no longer exist
Without options, the "prune" settings of $CPFS_HOME/config.json apply, over the defaults
(olderThanDays 30, maxSize 10G), e.g.
  { "prune": { "keepTurns": 50, "keepBranches": 20, "olderThanDays": 30, "maxSize": "2G" } }
The daemon applies the same settings by itself after an unmount, at most once per
"intervalHours" (default 24; "auto": false turns that off); cpfs status says what goes next.

Example:  cpfs prune ~/src/app --keep-turns 20`,
  forget: `Usage: cpfs forget [DIR] [--yes] [--force] [--json]

Delete the whole cpfs history of DIR (its store and records); the real directory is not
touched. Asks for confirmation (or --yes); refuses while DIR is mounted, or while it has
turns not yet applied to the real directory unless --force.

Example:  cpfs forget ~/src/old-project --yes`,
  fsck: `Usage: cpfs fsck [DIR] [--store PATH] [--json]

Check the store of DIR (not mounted: run cpfs unmount first): every block of LevelDB's table
files matches its CRC32C, every record decodes, every chunk matches its SHA-256 and every
chunk a file needs is there, the turns are all there, cpfs's write-ahead log and LevelDB's log
lost nothing. Repairs what can be rebuilt (puts back a byte a table block's checksum proves,
drops a table block damaged beyond that, applies the write-ahead log up to its damage, deletes
unreadable records and unreferenced chunks, reads a damaged chunk again from a real file that
still holds its bytes) and
lists what is lost: the paths and the turns that hold them. A damaged chunk stays: reading
the files that hold it fails (EIO), never returns wrong bytes. Exit 0 when the store is
clean, 1 when damage was found (a second run shows what remains).

Example:  cpfs fsck ~/src/app`,
  status: `Usage: cpfs status [DIR] [--all] [--json] [--stats] [--reset-stats]

Show whether DIR is mounted (and the daemon's pid), the head turn, the number of turns, the
turns not yet applied to the real directory (pending), redo steps and the store, and whether
a plan to the real directory was interrupted (the next command that changes something finishes
it; status itself never changes anything).
--all lists every workspace with history under CPFS_HOME: mounted or not, turns, size on
disk, last used, and "orphaned" when the workspace no longer exists.
--stats adds, while mounted, every FUSE operation the daemon answered with its count and the
time spent in it; --reset-stats zeroes them (to measure one step).

Example:  cpfs status --json`,
  unmount: `Usage: cpfs unmount [DIR] [--discard] [--force] [--json]

Flush, unmount, then apply the head view to the real directory through a verified plan and
report what was written and verified. The next mount starts a new turn.
  --discard   leave the real directory as it was and set this session's turns aside: the
              next session starts from the real directory; cpfs redo brings them back (until
              the next write), and they stay in the store until pruned
  --force     apply even over paths changed outside cpfs; their outside version is kept in
              the history as a turn of its own first
Refuses, changing nothing, while a process still uses the mount — naming each one (pid,
command, cwd or open file) and saying when it is your own shell — or (without --force) when a
path it would change was changed outside cpfs.
Not mounted: applies the turns a stopped daemon left unapplied (--discard: sets them aside)
and says so; with none, it says DIR is not mounted and exits 1.

Example:  cd ~ && cpfs unmount ~/src/app`
}

texts.view = `Usage: cpfs view TURN [PATH] [DIR] [--end] [--json]
       cpfs view --list [DIR] [--json]
       cpfs view --close [PATH] [DIR] [--json]

Mount the tree as it was at the start of TURN (N, -N, an id, bN:T, or bN: a branch's tip)
read-only at PATH, outside the workspace, and print PATH. Nothing is copied: the view is
served by the workspace's mount daemon from the same store, so the workspace must be
mounted. PATH must be a new or empty directory outside the workspace and outside any cpfs
mount; without it a fresh directory under the workspace's cpfs directory is made (and
removed when the view closes). Several views may be open at once; cpfs unmount closes them.
The workspace itself does not change: git status there stays as it was.
  --end     the tree the turn left (the start of the next; for the head turn, now)
  --list    the open views: turn, start or end, path, label
  --close   close the view at PATH, or every view of the workspace

Examples:  cpfs view 3                       # prints where turn 3's start is mounted
           cd "$(cpfs view b2:4 /tmp/b2-4)" && git log --oneline && npm test
           cpfs view --close /tmp/b2-4`

texts.bisect = `Usage: cpfs bisect --good TURN [--bad TURN] [--write] [--json] (--run "CMD" | -- CMD ARGS...) [DIR]

Find the first bad turn between --good and --bad (default: the head), as git bisect run
does: CMD runs in a read-only view of the tree each turn left (its end: the start of the next
turn; for the head turn, the tree now), with the view's root as its current directory. The
workspace is never touched. CMD's exit code judges the turn: 0 good, 125 cannot be tested
(skipped), 1-127 bad; 128 and above or a signal stop the search with an error. Both ends are
tested first. Prints the first bad turn, its label and what it changed (as cpfs diff T --stat),
or the range skipped turns leave. Turns of a branch: --good b2:1 --bad b2.
  --write   run CMD in a private writable copy of each view (overlayfs in a mount namespace
            of its own, upper layer on a tmpfs, all gone afterwards): for builds that write
  --json    the result as JSON: first, candidates, changes, probes

Examples:  cpfs bisect --good 3 --run "npm test"
           cpfs bisect --good b2:1 --bad b2 --write -- make check`

texts.completion = `Usage: cpfs completion bash|zsh|fish

Print a completion script: commands, each command's flags, directories, and the turn numbers
and ids of the workspace you are in (asked from cpfs when you press Tab).

Examples:  eval "$(cpfs completion bash)"    # in ~/.bashrc
           eval "$(cpfs completion zsh)"     # in ~/.zshrc
           cpfs completion fish | source     # in ~/.config/fish/config.fish`

export function usage (name: string): string {
  return texts[name] ?? HELP
}
