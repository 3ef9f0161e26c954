#!/usr/bin/env bash
# Golden data directories: what each released delayd left on disk, for
# integration_test's upgrade tests to open with the current binary.
#
#   scripts/golden-datadirs.sh              # every release: 0.1.0 and 0.2.0
#   scripts/golden-datadirs.sh 0.2.0        # one
#   OUT=/tmp/golden scripts/golden-datadirs.sh   # elsewhere than the testdata
#   GOLDEN_ACK_MS=3000 OUT=/tmp/g scripts/golden-datadirs.sh 0.2.0
#                                           # reservations that expire at once: the test's
#                                           # path for a directory older than its deadlines
#
# For each release it builds the binary from its commit (git archive of it,
# then go build: the module cache or proxy must have its modules), runs it
# twice on fresh directories, as a single node (its append-only log, a
# rewrite in the middle) and as a one-node cluster (its Raft log and a Raft
# snapshot), writes jobs in every state and every record kind that release
# wrote, stops it with SIGTERM, and keeps the directory as
# integration_test/testdata/upgrade/<version>-<mode>.tar.gz beside a JSON of
# what the release itself answered for each job, queue, schedule and limit
# before it stopped (<version>-<mode>.json).
#
# Made once per release and committed: CI only reads them. Due times are
# fixed and far in the future (2100), so the data does not age; the one
# thing that does is a reservation, whose ack timeout is at most ~36 days
# (the test knows what an expired one becomes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${OUT:-$root/integration_test/testdata/upgrade}

# The releases (CHANGELOG.md says which commit each is). A new release adds
# itself here once it is cut, runs this script for it alone, and commits its
# two directories: TestUpgradeGoldenDataDirs reads every one it finds.
declare -A commits=([0.1.0]=b57442e [0.2.0]=316f31d)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(0.1.0 0.2.0)

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A python3 with redis-py (a pyenv shim may hide the system's).
py=
for c in ${PYTHON:-} python3 /usr/bin/python3; do
  if "$c" -c 'import redis' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "golden: no python3 with redis-py (pip install redis)" >&2; exit 2; }

port=${BASE_PORT:-16390}
bus=$((port + 1))

# build VERSION: the release's binary, in $work.
build() {
  local v=$1 c=${commits[$1]}
  mkdir -p "$work/src-$v"
  git archive "$c" | tar -x -C "$work/src-$v"
  (cd "$work/src-$v" && go build -o "$work/delayd-$v" .)
}

# run VERSION MODE: one run of the release on a fresh directory.
run() {
  local v=$1 mode=$2 dir=$work/data-$1-$2
  rm -rf "$dir" && mkdir -p "$dir"
  local args=(--bind 127.0.0.1 --port "$port" --dir "$dir" --log-level info --log-format json)
  if [ "$mode" = cluster ]; then
    # A snapshot every 24 entries: the directory holds a Raft snapshot and
    # entries after it, both formats.
    args+=(--cluster-enabled yes --cluster-bootstrap --cluster-bus-addr "127.0.0.1:$bus"
      --cluster-snapshot-entries 24 --auto-rewrite-percentage 0 --cluster-node-id 90140e9a1de0000000000000000000000000d1d0)
  else
    args+=(--appendonly yes --appendfsync always)
  fi
  "$work/delayd-$v" "${args[@]}" >"$work/$v-$mode.log" 2>&1 &
  pid=$!
  "$py" - "$port" "$v" "$mode" "${commits[$v]}" "$out/$v-$mode.json" <<'PY'
import base64, json, os, sys, time
import redis

port, version, mode, commit, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
v2 = version != "0.1.0"
r = redis.Redis(port=port, socket_timeout=10)
for _ in range(200):
    try:
        if mode != "cluster" or r.info("replication").get("role") == "master":
            break
    except redis.RedisError:
        pass
    time.sleep(0.05)
else:
    sys.exit(f"{version} {mode}: no server on {port}")

FAR = 4102444800000      # 2100-01-01, a due time no test outlives
ACK = int(os.environ.get("GOLDEN_ACK_MS", 3153600000))  # the longest ack timeout the releases take (~36 days)
ids = []                 # (queue, id) of every job the JSON describes

def cmd(*a):
    return r.execute_command(*a)

def add(q, due, payload, jid, *opts):
    got = cmd("DELAY.ADDAT", q, due, payload, *(("ID", jid) if jid else ()), *opts)
    ids.append((q, got.decode()))
    return got

def pop(q):
    got = cmd("DELAY.POP", q, 1)
    assert got, f"nothing to pop in {q}"
    return got

# A flush first: its record, then nothing it removed.
cmd("DELAY.ADDAT", "{g}gone", FAR, "x", "ID", "f1")
cmd("FLUSHALL")
# Delayed at fixed times, with and without options, a server id, and a
# payload that is not UTF-8.
add("{g}q", FAR, "p-d1", "d1")
add("{g}q", FAR + 1, "p-d2", "d2", "ACKTIMEOUT", 60000, "RETRY", 3, "DEADLETTER", "{g}dead")
add("{g}q", FAR + 2, "p-server-id", None)
add("{g}q", FAR + 3, b"\x00\xff\xfebin", "d4")
# Ready (due in 1970).
add("{g}r", 1000, "p-r1", "r1")
add("{g}r", 1001, "p-r2", "r2", "RETRY", 5)
# Reserved, then reserved again by TOUCH.
add("{g}w", 1000, "p-w1", "w1", "ACKTIMEOUT", ACK)
pop("{g}w")
add("{g}w", 1001, "p-w2", "w2", "ACKTIMEOUT", ACK)
pop("{g}w")
cmd("DELAY.TOUCH", "{g}w", "w2")
# Cancelled, acked, nacked (ready again, and delayed for a century), and
# dead-lettered by a NACK with no retry left.
cmd("DELAY.ADDAT", "{g}q", FAR, "x", "ID", "c1")
cmd("DELAY.CANCEL", "{g}q", "c1")
cmd("DELAY.ADDAT", "{g}a", 1000, "x", "ID", "a1", "ACKTIMEOUT", 60000)
pop("{g}a")
cmd("DELAY.ACK", "{g}a", "a1")
add("{g}n", 1000, "p-n1", "n1", "ACKTIMEOUT", 60000)
pop("{g}n")
cmd("DELAY.NACK", "{g}n", "n1")
add("{g}n2", 1001, "p-n2", "n2", "ACKTIMEOUT", 60000)
pop("{g}n2")
cmd("DELAY.NACK", "{g}n2", "n2", 100 * 365 * 86400000)
cmd("DELAY.ADDAT", "{g}x", 1000, "p-x1", "ID", "x1", "ACKTIMEOUT", 60000, "RETRY", 0, "DEADLETTER", "{g}dead")
pop("{g}x")
cmd("DELAY.NACK", "{g}x", "x1")
ids.append(("{g}dead", "x1"))
# Lists: a push, a plain pop (no ack timeout), a move; a queue deleted.
cmd("RPUSH", "{g}l", "a", "b", "c")
cmd("LPOP", "{g}l")
cmd("LMOVE", "{g}l", "{g}l2", "LEFT", "RIGHT")
cmd("DELAY.ADDAT", "{g}del", FAR, "x", "ID", "del1")
cmd("DEL", "{g}del")
# A transaction: one unit record.
p = r.pipeline(transaction=True)
p.execute_command("DELAY.ADDAT", "{g}t", FAR, "p-t1", "ID", "t1")
p.execute_command("DELAY.ADDAT", "{g}t", 1000, "p-t2", "ID", "t2")
p.execute()
ids += [("{g}t", "t1"), ("{g}t", "t2")]

if mode == "single":
    # A rewrite: the log then starts with a meta record and the live set,
    # and what follows is appended to it.
    cmd("BGREWRITEAOF")
    for _ in range(200):
        if r.info("persistence").get("aof_rewrite_in_progress") == 0:
            break
        time.sleep(0.05)
    time.sleep(0.2)

add("{g}q", FAR + 4, "p-after", "d5")
cmd("DELAY.ADDAT", "{g}q", FAR, "x", "ID", "c2")
cmd("DELAY.CANCEL", "{g}q", "c2")

if v2:
    # 0.2.0: identity (UNIQUE, its tombstone, DEBOUNCE), lanes, moves in
    # time, limits, schedules.
    add("{g}u", FAR, "p-u1", "u1", "UNIQUE", 10 * 365 * 86400000)
    cmd("DELAY.ADDAT", "{g}u", 1000, "x", "ID", "u2", "UNIQUE", 10 * 365 * 86400000, "ACKTIMEOUT", 60000)
    pop("{g}u")
    cmd("DELAY.ACK", "{g}u", "u2")
    add("{g}b", FAR, "p-b1", "b1", "DEBOUNCE", 100 * 365 * 86400000)  # the wait caps the due time
    add("{g}grp", 1000, "p-g1", "g1", "GROUP", "tenant-a", "PRIORITY", 5)
    add("{g}grp", 1001, "p-g2", "g2", "GROUP", "tenant-b")
    add("{g}m", FAR, "p-m1", "m1")
    cmd("DELAY.RESCHEDULEAT", "{g}m", "m1", FAR + 100)
    add("{g}m", FAR, "p-m2", "m2")
    cmd("DELAY.PROMOTE", "{g}m", "m2")
    cmd("DELAY.LIMIT", "{g}lim", "CONCURRENCY", 5)
    cmd("DELAY.LIMIT", "{g}grp", "RATE", 10, 1000, "GROUPCONCURRENCY", 2)
    cmd("DELAY.SCHEDULE", "{g}s", "nightly", "CRON", "0 3 * * *", "TZ", "Europe/Paris", "p-s",
        "ACKTIMEOUT", 60000, "START", FAR)
    cmd("DELAY.SCHEDULE", "{g}s", "later", "EVERY", 3600000, "p-e", "MISFIRE", "ALL", "START", FAR, "END", FAR + 86400000)
    # One that fires (fire records, jobs named every:T), then goes.
    cmd("DELAY.SCHEDULE", "{g}s2", "every", "EVERY", 200, "p-f")
    time.sleep(0.7)
    cmd("DELAY.UNSCHEDULE", "{g}s2", "every")

if mode == "cluster":
    # Past the snapshot threshold, then a snapshot (Raft's own timer, every
    # 10 s), then entries after it.
    for i in range(30):
        add("{g}bulk", FAR + i, f"p-bulk{i}", f"k{i}")
    time.sleep(12)
    add("{g}q", FAR + 5, "p-after-snapshot", "d6")

def enc(v):
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(v).decode()}
    if isinstance(v, list):
        return [enc(x) for x in v]
    return v

def pairs(v):
    return {enc(v[i]): enc(v[i + 1]) for i in range(0, len(v), 2)}

queues = sorted({q for q, _ in ids} | {"{g}s", "{g}s2", "{g}l", "{g}l2", "{g}lim"})
want = {"version": version, "commit": commit, "mode": mode, "jobs": [], "queues": {}}
for q, jid in ids:
    got = cmd("DELAY.GET", q, jid)
    assert got, f"{q} {jid}: gone before the stop"
    want["jobs"].append(pairs(got))
for q in queues:
    s = pairs(cmd("DELAY.STATS", q))
    qs = {k: s[k] for k in ("delayed", "ready", "reserved")}
    qs["peek"] = enc(cmd("DELAY.PEEK", q, 1000))
    if v2:
        qs["schedules"] = enc(cmd("DELAY.SCHEDULES", q))
        qs["limit"] = pairs(cmd("DELAY.LIMIT", q) or [])
        for k in ("reserved", "tokens"):  # what the moment holds, not the setting
            qs["limit"].pop(k, None)
    want["queues"][q] = qs
with open(out, "w") as f:
    json.dump(want, f, indent=1, sort_keys=True)
    f.write("\n")
PY
  kill -TERM "$pid"
  wait "$pid" || { echo "golden: $v $mode did not stop cleanly:"; cat "$work/$v-$mode.log"; exit 1; } >&2
  pid=
  # The lock file names a pid that is gone; the rest is the release's.
  tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -czf "$out/$v-$mode.tar.gz" .
  echo "golden: $out/$v-$mode.tar.gz ($(du -k "$out/$v-$mode.tar.gz" | cut -f1) KiB): $(tar -tzf "$out/$v-$mode.tar.gz" | tr '\n' ' ')"
}

mkdir -p "$out"
for v in "${versions[@]}"; do
  [ -n "${commits[$v]:-}" ] || { echo "golden: no release $v (know: ${!commits[*]})" >&2; exit 2; }
  build "$v"
  run "$v" single
  run "$v" cluster
done
