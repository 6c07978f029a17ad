#!/usr/bin/env bash
# The PostgreSQL stores against a real server: a throwaway cluster (scripts/pg.sh: Debian's
# packages, a temporary folder, a free port), the `postgres` feature's tests with
# HARNESS_PG_URL set, the cluster stopped and removed on exit whatever happens.
# Bounded: a few seconds to start the cluster, the tests' build, then about a second each.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
start=$SECONDS

dir="$(mktemp -d /tmp/harness-pg.XXXXXX)"
trap 'bash scripts/pg.sh stop "$dir"' EXIT
export HARNESS_PG_URL="$(bash scripts/pg.sh start "$dir")"
echo "postgres: $HARNESS_PG_URL"

cargo test -p harness-sessions --features postgres --test postgres
cargo test -p harness-uhp --features postgres,axum --test postgres
cargo test -p harness-tanstack --features postgres --test postgres

# Several processes, one database: the sessions tool on --database-url. A turn interrupted in
# one process (records journaled, then the process "dies") is resumed by another with at
# most one extra provider call; an approval decided by a third runs the gated tool once, and
# a fourth finds nothing left to resume. Every process is a new host on the database.
cargo build --quiet --features postgres --example sessions --example uhp_server --example tanstack_host
tool=target/debug/examples/sessions
work="$(mktemp -d)"
uhp_pid=""
hosts=()
stop_all() {
    [ -n "$uhp_pid" ] && kill -9 "$uhp_pid" 2>/dev/null
    for p in "${hosts[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$work"
    bash scripts/pg.sh stop "$dir"
}
trap stop_all EXIT
db() { "$tool" --database-url "$HARNESS_PG_URL" --dir "$work" "$@"; }
expect() { # expect PATTERN FILE
    grep -E -- "$1" "$2" >/dev/null || { echo "FAIL: no /$1/ in:"; cat "$2"; exit 1; }
}
sid="$(db exec --input "Hello" | awk '/^session /{print $2}')"
[ -n "$sid" ] || { echo "FAIL: no session uid"; exit 1; }
db exec --session "$sid" --input "What is a prime number?" --interrupt-after 3 >"$work/a.out"
expect '^interrupted' "$work/a.out"
db resume --session "$sid" >"$work/b.out"
expect 'resumed and completed: .* [01] provider call' "$work/b.out"
db verify --session "$sid" >"$work/c.out"
expect '^ok: 10 records' "$work/c.out"
db sessions >"$work/list.out"
expect "^$sid\$" "$work/list.out"
p="$(db exec --harness publish --input "Give me three examples." | awk '/^session /{print $2}')"
db approve --session "$p" >"$work/approve.out"
expect '1 tool call\(s\) run' "$work/approve.out"
db resume --session "$p" >"$work/again.out"
expect '^nothing to resume' "$work/again.out"
[ "$(grep -c "^$p " "$work/published.log")" = 1 ] || { echo "FAIL: published.log:"; cat "$work/published.log"; exit 1; }
echo "interop postgres: sessions tool across processes: 4 passed, 0 failed"

# A real SIGKILL mid-turn (a loopback OpenAI-compatible server streaming slowly, a tool with an
# effect in a ledger), resumed by another process: about 10 s.
bash scripts/interop/postgres/sigkill.sh

# The UHP server on --database-url: a task posted with an Idempotency-Key on one process, the
# process SIGKILLed, a second process on the database serves the task and the key still names
# it (no second task).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
uhp() {
    target/debug/examples/uhp_server --addr "127.0.0.1:$port" --api-key k \
        --database-url "$HARNESS_PG_URL" >>"$work/uhp.log" 2>&1 &
    uhp_pid=$!
    for _ in $(seq 1 100); do
        curl -fsS "$base/v1/uhp" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "FAIL: uhp_server did not start"; cat "$work/uhp.log"; exit 1
}
post() {
    curl -sS -H 'authorization: Bearer k' -H 'idempotency-key: pg-key-1' \
        -H 'content-type: application/json' -d '{"input":"Reply with exactly: kept"}' "$base/v1/responses"
}
uhp
first="$(post | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
for _ in $(seq 1 50); do
    curl -sS -H 'authorization: Bearer k' "$base/v1/responses/$first" | grep -q '"status":"completed"' && break
    sleep 0.1
done
kill -9 "$uhp_pid"; wait "$uhp_pid" 2>/dev/null || true
uhp
curl -sS -H 'authorization: Bearer k' "$base/v1/responses/$first" >"$work/get.out"
expect '"status":"completed"' "$work/get.out"
post >"$work/again.out"
expect "\"id\":\"$first\"" "$work/again.out"
kill "$uhp_pid"; wait "$uhp_pid" 2>/dev/null || true; uhp_pid=""
echo "interop postgres: uhp_server across a SIGKILL: 2 passed, 0 failed"

# Two uhp_server processes on one database at once: a task created through A with an
# Idempotency-Key is the task B answers for that key (no second task; another body is 422);
# B reads it; a task running on A is cancelled through B (A stops it, B answers `cancelled`)
# and A reads it cancelled.
uhp_at() { # uhp_at PORT: starts a uhp_server there, waits for it
    target/debug/examples/uhp_server --addr "127.0.0.1:$1" --api-key k \
        --database-url "$HARNESS_PG_URL" >>"$work/uhp2.log" 2>&1 &
    hosts+=("$!")
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$1/v1/uhp" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "FAIL: uhp_server on $1 did not start"; cat "$work/uhp2.log"; exit 1
}
ua=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ub=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
uhp_at "$ua"; uhp_at "$ub"
req() { # req PORT METHOD PATH [KEY] [BODY]
    curl -sS -X "$2" -H 'authorization: Bearer k' ${4:+-H "idempotency-key: $4"} \
        -H 'content-type: application/json' ${5:+-d "$5"} "http://127.0.0.1:$1$3"
}
key="two-hosts-$RANDOM$RANDOM"
req "$ua" POST /v1/responses "$key" '{"input":"Reply with exactly: shared"}' >"$work/ua.out"
expect '"status":"completed"' "$work/ua.out"
tid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/ua.out")"
req "$ub" POST /v1/responses "$key" '{"input":"Reply with exactly: shared"}' >"$work/ub.out"
expect "\"id\":\"$tid\"" "$work/ub.out"
req "$ub" POST /v1/responses "$key" '{"input":"Reply with exactly: other"}' >"$work/ub422.out"
expect 'harnessrs_idempotency_key_reused' "$work/ub422.out"
req "$ub" GET "/v1/responses/$tid" >"$work/ubget.out"
expect '"status":"completed"' "$work/ubget.out"
expect '"text":"shared"' "$work/ubget.out"
req "$ua" POST /v1/responses "" '{"input":"Count slowly from 1 to 60","background":true}' >"$work/slow.out"
sid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/slow.out")"
sleep 1
cancel_s="$(curl -sS -o "$work/cancel.out" -w '%{time_total}' -X POST -H 'authorization: Bearer k' \
    "http://127.0.0.1:$ub/v1/responses/$sid/cancel")"
expect '"status":"cancelled"' "$work/cancel.out"
req "$ua" GET "/v1/responses/$sid" >"$work/cancelled.out"
expect '"status":"cancelled"' "$work/cancelled.out"
expect '"text":"1' "$work/cancelled.out"
for p in "${hosts[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
hosts=()
echo "interop postgres: two uhp_server processes on one database: 6 passed, 0 failed (cancel through B of A's task answered in ${cancel_s} s)"

# Two tanstack_host processes on one database: a prompt through host A; host B's stream of
# the thread (opened before the prompt) carries every event live with A's cursors (B is woken
# by LISTEN/NOTIFY), and a reader on B resuming with Last-Event-ID 5 gets 6.. and nothing
# before.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pa=$(free_port); pb=$(free_port)
for p in "$pa" "$pb"; do
    target/debug/examples/tanstack_host --addr "127.0.0.1:$p" --database-url "$HARNESS_PG_URL" >>"$work/tanstack.log" 2>&1 &
    hosts+=("$!")
done
for p in "$pa" "$pb"; do
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$p/api/harness/capabilities" >/dev/null 2>&1 && break
        sleep 0.1
    done
done
thread="shared-thread-$RANDOM"
timeout 8 curl -sN "http://127.0.0.1:$pb/api/harness/events?threadId=$thread&v=2" >"$work/b_live.out" &
live=$!
sleep 0.5
curl -sS -X POST "http://127.0.0.1:$pa/api/harness/control" -H 'content-type: application/json' \
    -d "{\"threadId\":\"$thread\",\"input\":{\"op\":\"prompt\",\"message\":\"When are you open?\"}}" >"$work/prompt.out"
expect '"status":"accepted"' "$work/prompt.out"
for _ in $(seq 1 50); do
    grep -q 'RUN_FINISHED' "$work/b_live.out" 2>/dev/null && break
    sleep 0.1
done
timeout 3 curl -sN "http://127.0.0.1:$pa/api/harness/events?threadId=$thread&v=2" >"$work/a.out" || true
kill "$live" 2>/dev/null || true
a_ids="$(grep '^id: ' "$work/a.out" | tr '\n' ' ')"
b_ids="$(grep '^id: ' "$work/b_live.out" | tr '\n' ' ')"
[ -n "$a_ids" ] && [ "$a_ids" = "$b_ids" ] || { echo "FAIL: A's cursors [$a_ids], B's live stream [$b_ids]"; exit 1; }
expect 'RUN_FINISHED' "$work/b_live.out"
timeout 3 curl -sN -H 'Last-Event-ID: 5' "http://127.0.0.1:$pb/api/harness/events?threadId=$thread&v=2" >"$work/b_resume.out" || true
first="$(grep '^id: ' "$work/b_resume.out" | head -n 1)"
[ "$first" = "id: 6" ] || { echo "FAIL: B resumed at [$first], not id: 6"; cat "$work/b_resume.out"; exit 1; }
echo "interop postgres: two tanstack hosts on one database: 3 passed, 0 failed"
for p in "${hosts[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
hosts=()

# Thread ownership (a lease): host A runs a slow turn, B reads it with A's cursors, an input to
# B while A owns the thread goes to A, A is SIGKILLed mid-turn, and after the lease TTL a
# prompt to B takes the thread over (taken_over), settles A's turn interrupted and runs on B.
timeout 90 python3 scripts/interop/postgres/takeover.py target/debug/examples/tanstack_host "$HARNESS_PG_URL" "$work"

echo "interop postgres: took $((SECONDS - start)) s"
