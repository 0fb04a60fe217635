#!/usr/bin/env bash
# The Docker image's entrypoint for sandboxed CI agents (tests run this script directly).
#
#   docker run --device /dev/fuse --cap-add SYS_ADMIN \
#     -v "$PWD:/workspace" -v "$PWD/artifacts:/artifacts" cpfs "npm ci" "npm test"
#
# Mounts the workspace through cpfs, runs the commands inside it, and writes the history as
# artifacts: log.json (every turn), turn-N.diff (what turn N changed), summary.txt. Then it
# unmounts, applying the result to the real directory through a verified plan (or not, with
# CPFS_DISCARD=1), and exits with the first failing command's code.
#
#   CPFS_WORKSPACE   the directory to mount (default /workspace)
#   CPFS_ARTIFACTS   where the artifacts go (default /artifacts)
#   CPFS_TURNS       "command" (default): each argument is a shell command line with a turn
#                    of its own; "signal": the arguments are one command, and every SIGUSR1
#                    sent to this script seals the current turn and opens the next
#   CPFS_DISCARD=1   leave the real directory as it was (the history stays in the store)
set -uo pipefail

ws=${CPFS_WORKSPACE:-/workspace}
out=${CPFS_ARTIFACTS:-/artifacts}
mode=${CPFS_TURNS:-command}
[ $# -gt 0 ] || { echo "cpfs-agent: no command given (pass the commands to run as arguments)" >&2; exit 2; }
mkdir -p "$out" || exit 1
cpfs mount "$ws" >/dev/null || exit 1

code=0
if [ "$mode" = signal ]; then
  trap 'cpfs turn "$ws" -m "signal at $(date -u +%H:%M:%S)" >/dev/null' USR1
  trap 'kill -TERM "$child" 2>/dev/null' TERM INT
  (cd "$ws" && exec "$@") &
  child=$!
  # wait returns early when a trapped signal arrives: keep waiting while the command runs,
  # then ask once more for its status (bash remembers it).
  while kill -0 "$child" 2>/dev/null; do wait "$child"; done
  wait "$child"
  code=$?
else
  trap 'kill -TERM "$child" 2>/dev/null' TERM INT
  for cmd in "$@"; do
    cpfs turn "$ws" -m "$cmd" >/dev/null
    (cd "$ws" && exec bash -c "$cmd") &
    child=$!
    wait "$child"
    code=$?
    [ "$code" -eq 0 ] || break
  done
fi

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
exit "$code"
