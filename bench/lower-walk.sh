#!/bin/bash
# Reads of untouched real files through a cpfs mount: find+stat, then grep -r cold and warm, on a
# copy of this project's node_modules, page cache dropped first. Usage: bench/lower-walk.sh CLI (as root);
# run it alternately with two builds to compare them. Prints: find+stat, cold grep, warm grep (s).
CLI=$(realpath "${1:?usage: bench/lower-walk.sh CLI}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(mktemp -d /tmp/walk.XXXX); mkdir $B/ws; export CPFS_HOME=$B/home
tar -C "$ROOT" -cf - node_modules | tar -C $B/ws -xf -
sync; echo 3 > /proc/sys/vm/drop_caches
node $CLI mount $B/ws >/dev/null
cd $B/ws
s=$(date +%s.%N); find . -type f | xargs stat >/dev/null; e=$(date +%s.%N); a=$(echo "$e - $s" | bc)
s=$(date +%s.%N); grep -r zzqqxx . >/dev/null; e=$(date +%s.%N); b=$(echo "$e - $s" | bc)
s=$(date +%s.%N); grep -r zzqqxx . >/dev/null; e=$(date +%s.%N); c=$(echo "$e - $s" | bc)
cd /; node $CLI unmount $B/ws --discard >/dev/null 2>&1
echo "$a $b $c"
rm -rf $B
