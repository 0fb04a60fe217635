#!/usr/bin/env bash
# The Docker image's entrypoint for sandboxed CI agents (tests run this script directly).
#
#   docker run --device /dev/fuse --cap-add SYS_ADMIN \
#     -v "$PWD:/workspace" -v "$PWD/artifacts:/artifacts" cpfs "npm ci" "npm test"
#
# Mounts the workspace through cpfs, runs the commands inside it, and writes the history as
# artifacts: log.json (every turn), turn-N.diff (what turn N changed), summary.txt. Then it
# unmounts, applying the result to the real directory through a verified plan (or not, with
# CPFS_DISCARD=1), and exits with the first failing command's code. SIGTERM (docker stop)
# ends the running command and all it started, then does the same (exit code 143); so does
# the end of the run for processes a command left running in the background.
#
#   CPFS_WORKSPACE   the directory to mount (default /workspace)
#   CPFS_ARTIFACTS   where the artifacts go (default /artifacts)
#   CPFS_TURNS       "command" (default): each argument is a shell command line with a turn
#                    of its own; "signal": the arguments are one command, and every SIGUSR1
#                    sent to this script seals the current turn and opens the next
#   CPFS_DISCARD=1   leave the real directory as it was (the history stays in the store)
#   CPFS_REMOTE      s3://BUCKET/PREFIX: at the end (also after docker stop: give it time with
#                    docker run --stop-timeout) the run's history is pushed there, so it
#                    outlives the container (cpfs clone on a laptop);
#                    AWS credentials from the usual AWS_* variables. The exit code stays the
#                    commands'; a failed push is reported on stderr and in summary.txt.
#   CPFS_REMOTE_AS   the workspace's name there (default: the container's hostname)
#   CPFS_REMOTE_ENDPOINT  an S3 endpoint other than AWS's (e.g. http://minio:9000)
set -uo pipefail

ws=${CPFS_WORKSPACE:-/workspace}
out=${CPFS_ARTIFACTS:-/artifacts}
mode=${CPFS_TURNS:-command}
[ $# -gt 0 ] || { echo "cpfs-agent: no command given (pass the commands to run as arguments)" >&2; exit 2; }
mkdir -p "$out" || exit 1
cpfs mount "$ws" >/dev/null || exit 1

# Job control puts each command in a process group of its own: a stop (docker stop sends
# SIGTERM) or the end of the run can then end everything a command started, so no leftover
# process keeps the mount busy and the work is still applied.
set -m
# A background process group reading a terminal would stop (SIGTTIN): commands read no input.
if [ -t 0 ]; then exec </dev/null; fi
child=
groups=()
trap '[ -z "$child" ] || kill -TERM -- "-$child" 2>/dev/null' TERM INT
# wait returns early when a trapped signal arrives: keep waiting while the command runs, then
# ask once more for its status (bash remembers it).
await () {
  while kill -0 "$child" 2>/dev/null; do wait "$child"; done
  wait "$child"
}

code=0
if [ "$mode" = signal ]; then
  trap 'cpfs turn "$ws" --prompt "signal at $(date -u +%H:%M:%S)" >/dev/null' USR1
  (cd "$ws" && exec "$@") &
  child=$!
  groups+=("$child")
  await
  code=$?
else
  for cmd in "$@"; do
    cpfs turn "$ws" --prompt "$cmd" >/dev/null
    (cd "$ws" && exec bash -c "$cmd") &
    child=$!
    groups+=("$child")
    await
    code=$?
    [ "$code" -eq 0 ] || break
  done
fi

# What the commands left running in the background ends now (TERM, then KILL after 5 s).
for g in "${groups[@]}"; do
  kill -0 -- "-$g" 2>/dev/null || continue
  echo "cpfs-agent: ending the processes the command left running (process group $g)" >&2
  kill -TERM -- "-$g" 2>/dev/null
  for ((i = 0; i < 50; i++)); do kill -0 -- "-$g" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$g" 2>/dev/null
done
# Killed processes' zombies (children of this script) go once they are waited for.
wait 2>/dev/null

# Artifacts: the history as JSON and one diff per turn.
cpfs log "$ws" --json > "$out/log.json"
head=$(cpfs status "$ws" --json | sed -nE 's/.*"head":([0-9]+).*/\1/p')
for ((t = 1; t <= head; t++)); do cpfs diff "$t" "$ws" > "$out/turn-$t.diff"; done
flags=()
[ "${CPFS_DISCARD:-}" = 1 ] && flags+=(--discard)
if cpfs unmount "$ws" "${flags[@]}" > "$out/summary.txt" 2>&1; then
  echo "exit code $code" >> "$out/summary.txt"
else
  cat "$out/summary.txt" >&2
  [ "$code" -ne 0 ] || code=1
fi

# The history leaves the container: pushed after the unmount (the store holds every turn,
# applied or discarded alike). A failed push changes nothing but what is reported.
if [ -n "${CPFS_REMOTE:-}" ]; then
  as=${CPFS_REMOTE_AS:-$(hostname)}
  cpfs remote rm cpfs-agent --dir "$ws" >/dev/null 2>&1
  endpoint=()
  [ -n "${CPFS_REMOTE_ENDPOINT:-}" ] && endpoint=(--endpoint "$CPFS_REMOTE_ENDPOINT")
  if cpfs remote add cpfs-agent "$CPFS_REMOTE" --as "$as" --dir "$ws" "${endpoint[@]}" >/dev/null 2> "$out/push-error.txt" \
    && cpfs push cpfs-agent "$ws" >> "$out/summary.txt" 2> "$out/push-error.txt"; then
    rm -f "$out/push-error.txt"
  else
    echo "cpfs-agent: the history was not pushed to $CPFS_REMOTE ($(tail -n 1 "$out/push-error.txt" 2>/dev/null)); it is still in the workspace's store" | tee -a "$out/summary.txt" >&2
  fi
fi
exit "$code"
