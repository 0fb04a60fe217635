#!/usr/bin/env bash
# A real S3 server for tests: Ceph's radosgw (Debian's radosgw, ceph-mon, ceph-osd) on one
# monitor and one in-memory OSD, bound to 127.0.0.1 only, run as root without systemd.
#
#   scripts/s3-server.sh start DIR [PORT]   start (PORT: radosgw's; a free one if not given),
#                                           print the env lines below and write them to DIR/env
#   scripts/s3-server.sh stop DIR           stop radosgw, the OSD and the monitor
#   scripts/s3-server.sh kill-gateway DIR   SIGKILL radosgw only ("server killed mid-push")
#   scripts/s3-server.sh start-gateway DIR  start radosgw again on the same port
#
# Everything (config, mon and osd data, logs, pid files) lives under DIR, so several servers
# can run at once, each in its own DIR with its own ports and fsid. Printed on stdout:
#   CPFS_S3_ENDPOINT=http://127.0.0.1:PORT  AWS_ACCESS_KEY_ID=…  AWS_SECRET_ACCESS_KEY=…
#   AWS_REGION=us-east-1
# A failure prints one line "s3-server: <what> (<how to fix>)" and the log's tail on stderr.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:$PATH
# The ceph CLI is Python that imports the rados module of Debian's python3: a python3 found
# earlier on PATH (pyenv's) lacks it.
PY=/usr/bin/python3
INSTALL='apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd'

cmd=${1:-}
dir=${2:-}
fail () { # what, how to fix, [log to show]
  echo "s3-server: $1 ($2)" >&2
  if [ -n "${3:-}" ] && [ -f "$3" ]; then echo "--- last lines of $3:" >&2; tail -n 25 "$3" >&2; fi
  # A start that failed leaves no daemon behind (its logs stay).
  [ "$cmd" != start ] || [ -z "${started:-}" ] || { stop_daemons client.rgw; stop_daemons osd.0 mon.a; }
  exit 1
}
case "$cmd" in start|stop|kill-gateway|start-gateway) ;; *)
  fail "unknown command '${cmd}'" "use: $0 start|stop|kill-gateway|start-gateway DIR [PORT]" ;;
esac
[ -n "$dir" ] || fail "no DIR given" "use: $0 $cmd DIR"
mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || fail "cannot use $dir" "give a writable directory"
conf=$dir/ceph.conf
ceph () { timeout 30 /usr/bin/ceph -c "$conf" "$@"; }

# The pid of a daemon of this DIR, if it runs: the pid file must name a live process started
# with this DIR's ceph.conf (a stale pid file may name a reused pid).
alive () { # name (mon.a, osd.0, client.rgw)
  local pid
  pid=$(cat "$dir/run/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$conf" && echo "$pid"
}

# A process that runs: not a zombie (a dead daemon stays one until PID 1 reaps it, which in
# some containers and VMs takes seconds).
running_pid () { local st; st=$(sed 's/.*) //' 2>/dev/null </proc/"$1"/stat) && [ "${st%% *}" != Z ]; }

# SIGTERM, then SIGKILL after 10 s, and wait until the processes are gone.
stop_daemons () { # names (mon.a, osd.0, client.rgw)
  local name pid pids=() i
  for name in "$@"; do pid=$(alive "$name") && pids+=("$pid"); done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null
  running () { for pid in "${pids[@]}"; do running_pid "$pid" && return 0; done; return 1; }
  for ((i = 0; i < 200; i++)); do running || break; sleep 0.05; done
  kill -KILL "${pids[@]}" 2>/dev/null
  while running; do sleep 0.05; done
  for name in "$@"; do rm -f "$dir/run/$name.pid"; done
}

# Something already listens on 127.0.0.1:PORT (a bind test would not do: radosgw's
# SO_REUSEADDR binds over the TIME_WAIT connections a killed radosgw leaves).
port_taken () { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port () { # one free port on 127.0.0.1 (the kernel picks it)
  $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# radosgw answers any HTTP request (403 or 200 for GET /) once it is up.
answers () { curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/" | grep -qv '^000$'; }

start_gateway () {
  local port i
  port=$(cat "$dir/port")
  alive client.rgw >/dev/null && fail "radosgw already runs in $dir" "stop it first: $0 kill-gateway $dir"
  port_taken "$port" && fail "port $port on 127.0.0.1 is taken" "end what listens there: ss -ltnp 'sport = :$port'"
  radosgw -c "$conf" -n client.rgw || fail "radosgw did not start" "see the log" "$dir/log/client.rgw.log"
  # The first start creates radosgw's pools (seconds); later starts answer within a second.
  for ((i = 0; i < 1200; i++)); do
    answers "$port" && return 0
    sleep 0.1
    if ((i > 20)) && ! alive client.rgw >/dev/null; then
      fail "radosgw exited before answering on 127.0.0.1:$port" "is the port taken? see the log" "$dir/log/client.rgw.log"
    fi
  done
  fail "radosgw did not answer on 127.0.0.1:$port within 120 s" "see the log" "$dir/log/client.rgw.log"
}

case "$cmd" in
stop)
  # One after the other: radosgw hangs in its shutdown while the OSD is gone (until the
  # SIGKILL), and the OSD waits up to 'osd mon shutdown timeout' for a monitor that is gone.
  stop_daemons client.rgw
  stop_daemons osd.0 mon.a
  exit 0 ;;
kill-gateway)
  pid=$(alive client.rgw) || fail "no radosgw runs in $dir" "start it: $0 start-gateway $dir"
  kill -KILL "$pid"
  while running_pid "$pid"; do sleep 0.05; done
  rm -f "$dir/run/client.rgw.pid"
  exit 0 ;;
start-gateway)
  [ -f "$conf" ] && [ -f "$dir/port" ] || fail "no server was started in $dir" "run: $0 start $dir"
  alive mon.a >/dev/null && alive osd.0 >/dev/null || fail "the monitor or OSD of $dir is not running" "restart the server: $0 stop $dir; $0 start $dir"
  start_gateway
  exit 0 ;;
esac

# ---- start
for bin in radosgw ceph-mon ceph-osd radosgw-admin monmaptool; do
  command -v "$bin" >/dev/null || fail "$bin is not installed" "as root: $INSTALL"
done
[ "$(id -u)" -eq 0 ] || fail "not root" "run as root: the daemons are started as root without systemd"
for name in mon.a osd.0 client.rgw; do
  alive "$name" >/dev/null && fail "a server already runs in $dir ($name)" "stop it first: $0 stop $dir"
done
# A stopped server's leftovers: start afresh (only what this script made is removed).
started=1
rm -rf "$dir"/{mon,osd,run,log,rgw,crash} "$dir"/{ceph.conf,monmap,env,port}
mkdir -p "$dir"/{mon,osd,run,log,rgw,crash}

port=${3:-$(free_port)}
[[ "$port" =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || fail "bad PORT '$port'" "give a number from 1 to 65535, or none"
port_taken "$port" && fail "port $port on 127.0.0.1 is taken" "give another PORT, or none to get a free one"
mon_port=$(free_port)
[ "$mon_port" != "$port" ] || mon_port=$(free_port)
fsid=$(cat /proc/sys/kernel/random/uuid)
echo "$port" >"$dir/port"

cat >"$conf" <<EOF
# Written by scripts/s3-server.sh: a throwaway single-node Ceph for tests.
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
# No cephx: nothing leaves 127.0.0.1 and no keyring has to be made or found.
auth cluster required = none
auth service required = none
auth client required = none
# Without these, msgr2 clients (radosgw) loop on "get_initial_auth_request returned -13".
ms mon client mode = crc
ms client mode = crc
ms mon service mode = crc
ms service mode = crc
ms cluster mode = crc
ms mon cluster mode = crc
# One OSD: every pool keeps one copy (one host is enough for that, whatever the CRUSH rule).
osd pool default size = 1
osd pool default min size = 1
# radosgw makes 6 pools, a 7th at the first multipart upload: at the default 32 PGs each, an
# 8th would pass the 250 PGs one OSD takes. Fewer PGs also keep the OSD small.
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
# Data in RAM, up to this many bytes: tests leave nothing behind and need no disk speed.
osd objectstore = memstore
memstore device bytes = 4294967296
# A mostly full /tmp must not stop the monitor (by default it quits below 5 % free).
mon data avail crit = 0
mon data avail warn = 0
# stop ends the OSD and the monitor together: the OSD's wait for the monitor's goodbye is short.
osd mon shutdown timeout = 0.5
# The monitor batches map changes for 1 s each; OSD boot and each pool radosgw creates wait
# for several: start takes 18 s with the default, 3 s with this.
paxos propose interval = 0.05
paxos min wait = 0.01
# Everything under DIR, nothing in /var/lib/ceph, /var/run/ceph, /var/log/ceph or /etc/ceph.
mon data = $dir/mon/\$name
osd data = $dir/osd/\$name
run dir = $dir/run
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
mon cluster log file = $dir/log/cluster.log
crash dir = $dir/crash
keyring = $dir/keyring
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
EOF
: >"$dir/keyring"

monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >"$dir/log/setup.log" 2>&1 ||
  fail "monmaptool failed" "see the log" "$dir/log/setup.log"
ceph-mon -c "$conf" -i a --mkfs --monmap "$dir/monmap" >>"$dir/log/setup.log" 2>&1 ||
  fail "ceph-mon --mkfs failed" "see the log" "$dir/log/setup.log"
ceph-mon -c "$conf" -i a >>"$dir/log/setup.log" 2>&1 ||
  fail "ceph-mon did not start" "is 127.0.0.1:$mon_port taken? see the log" "$dir/log/mon.a.log"

# Register the OSD with the monitor (this also waits for the monitor to answer), make its
# store and start it.
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
osd_id=$(ceph osd new "$osd_uuid" 2>>"$dir/log/setup.log") ||
  fail "the monitor did not register the OSD" "see the logs" "$dir/log/mon.a.log"
[ "$osd_id" = 0 ] || fail "the OSD got id $osd_id, not 0" "start in an empty DIR"
mkdir -p "$dir/osd/osd.0"
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$dir/log/setup.log" 2>&1 ||
  fail "ceph-osd --mkfs failed" "see the log" "$dir/log/osd.0.log"
ceph-osd -c "$conf" -i 0 >>"$dir/log/setup.log" 2>&1 ||
  fail "ceph-osd did not start" "see the log" "$dir/log/osd.0.log"
# radosgw creates its pools at its first start: with no OSD up, it would hang there.
SECONDS=0
until ceph osd stat 2>/dev/null | grep -q '1 up'; do
  ((SECONDS < 60)) || fail "the OSD did not come up within 60 s" "see the log" "$dir/log/osd.0.log"
  sleep 0.2
done

start_gateway

access=$(tr -dc 'A-Z0-9' </dev/urandom | head -c 20)
secret=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 40)
radosgw-admin -c "$conf" -n client.admin user create --uid cpfs-test --display-name 'cpfs tests' \
  --access-key "$access" --secret-key "$secret" >>"$dir/log/setup.log" 2>&1 ||
  fail "radosgw-admin could not create the S3 user" "see the log" "$dir/log/setup.log"

# Warm up: the first bucket and the first PUT create the bucket index and data pools (0.3 s
# each here, 2 s with the default paxos interval); pay that here, not in the first test.
# curl 7.88 signs no payload hash, which S3 requires: send UNSIGNED-PAYLOAD, which curl signs.
s3 () { curl -sS -o /dev/null -w '%{http_code}' -m 60 --aws-sigv4 aws:amz:us-east-1:s3 \
  --user "$access:$secret" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"; }
url=http://127.0.0.1:$port/cpfs-warm-up
for step in "-X PUT $url" "-X PUT --data-binary warm $url/object" "-X DELETE $url/object" "-X DELETE $url"; do
  # shellcheck disable=SC2086 # the step is split into curl's arguments on purpose
  code=$(s3 $step 2>>"$dir/log/setup.log")
  [[ "$code" == 2* ]] || fail "warm-up request failed: curl $step gave HTTP $code" "see the log" "$dir/log/client.rgw.log"
done

cat >"$dir/env" <<EOF
CPFS_S3_ENDPOINT=http://127.0.0.1:$port
AWS_ACCESS_KEY_ID=$access
AWS_SECRET_ACCESS_KEY=$secret
AWS_REGION=us-east-1
EOF
cat "$dir/env"
