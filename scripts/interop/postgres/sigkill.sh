#!/usr/bin/env bash
# A real SIGKILL mid-turn, resumed by another process on the same PostgreSQL.
#
# A loopback OpenAI-compatible server (fake_openai.py: counts requests; the first request of a
# turn answers a `charge` tool call, the second streams a long reply slowly) plays the provider;
# the `agent` harness of examples/sessions runs the turn: model call, `charge` (an effect in the
# payment ledger DIR/ledger.log, deduplicated on the call's idempotency key), model call with
# the long reply. Process A is SIGKILLed, process B resumes the session:
#
# 1. killed mid-stream of the second model request (after the effect and its receipt): the
#    turn completes, `verify` holds, provider calls <= (calls of the same turn without a
#    crash) + 1 (spec agentsessions-writing-a-harness.txt:107, "a cut during a model call
#    costs at most one extra provider call"), and the tool's code ran exactly once (its
#    completed intent/result pair is served, line 158);
# 2. killed after the effect but before its receipt and result are recorded
#    (--effect-pause-ms): B re-drives the intent with its original key (line 158), the tool's
#    code runs a second time and the ledger, deduplicating on session uid + key (line 133),
#    charges once; no extra provider call.
#
# Needs HARNESS_PG_URL (run.sh exports it) and a built target/debug/examples/sessions with the
# postgres feature; bounded: about 15 s (each case under --durability record and turn).
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
: "${HARNESS_PG_URL:?HARNESS_PG_URL is not set (run scripts/interop/postgres/run.sh)}"
tool=target/debug/examples/sessions
[ -x "$tool" ] || { echo "FAIL: build $tool first (--features postgres)"; exit 1; }
work="$(mktemp -d)"
server=""
a_pid=""
cleanup() {
    if [ -n "$a_pid" ]; then kill -9 "$a_pid" 2>/dev/null || true; fi
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.out; do echo "--- $f"; cat "$f"; done; exit 1; }

python3 scripts/interop/postgres/fake_openai.py --port-file "$work/port" --log "$work/requests.log" \
    --chunks 40 --delay 0.05 &
server=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || fail "the fake model server did not start"
export OPENAI_BASE_URL="http://127.0.0.1:$(cat "$work/port")/v1" OPENAI_API_KEY=fake
calls() { wc -l <"$work/requests.log" | tr -d ' '; }
db() { "$tool" --database-url "$HARNESS_PG_URL" --durability "$durability" --dir "$work" --model openai:fake "$@"; }
charged() { grep -c "^charged $1 " "$work/ledger.log" || true; }
attempts() { grep -c "^attempt $1 " "$work/ledger.log" || true; }
wait_for() { # wait_for SECONDS COMMAND...: polls every 20 ms
    local n=$(($1 * 50)); shift
    for _ in $(seq 1 "$n"); do "$@" && return 0; sleep 0.02; done
    return 1
}
calls_at_least() { [ "$(calls)" -ge "$1" ]; }
announced() { [ -n "$(session_of "$1")" ]; }
charged_once() { [ "$(charged "$1")" = 1 ]; }
session_of() { awk '/^session /{print $2; exit}' "$1"; }
passed=0
# Both cases under each durability policy of the journal: a SIGKILLed host loses no
# committed append, whether its commits waited for the WAL flush or not.
run_cases() {
    # The same turn without a crash: how many provider calls it costs.
    before=$(calls)
    db exec --harness agent --input "Charge me 42, then explain." >"$work/clean.out" || fail "clean exec"
    grep -q 'completed: .* 2 provider call(s), 1 tool call(s) run' "$work/clean.out" || fail "clean turn"
    clean=$(( $(calls) - before ))
    s0="$(session_of "$work/clean.out")"
    [ "$(charged "$s0")" = 1 ] && [ "$(attempts "$s0")" = 1 ] || fail "clean turn's ledger"

    # 1. SIGKILL while the second model request streams.
    before=$(calls)
    db exec --harness agent --input "Charge me 42, then explain." >"$work/a1.out" 2>&1 &
    a_pid=$!
    wait_for 20 calls_at_least $((before + 2)) || fail "A never sent its second model request"
    wait_for 5 grep -q word3 "$work/a1.out" || fail "A's reply never streamed"
    kill -9 "$a_pid"; wait "$a_pid" 2>/dev/null || true; a_pid=""
    s1="$(session_of "$work/a1.out")"
    [ -n "$s1" ] || fail "A announced no session"
    grep -q 'completed' "$work/a1.out" && fail "A completed before it was killed"
    db resume --session "$s1" >"$work/b1.out" || fail "B's resume"
    grep -q 'resumed and completed: .* 1 provider call(s), 0 tool call(s) run' "$work/b1.out" || fail "B's resume report"
    used=$(( $(calls) - before ))
    [ "$used" -le $((clean + 1)) ] || fail "$used provider calls, more than $clean + 1"
    [ "$(charged "$s1")" = 1 ] && [ "$(attempts "$s1")" = 1 ] || fail "the charge ran again: $(cat "$work/ledger.log")"
    db verify --session "$s1" >"$work/v1.out" || fail "verify after the kill mid-stream"
    grep -q '^ok: ' "$work/v1.out" || fail "verify"
    db resume --session "$s1" | grep -q '^nothing to resume' || fail "a second resume found work left"
    passed=$((passed + 1))
    echo "[$durability] sigkill mid-stream: provider calls $used (no crash: $clean), charge code ran once"

    # 2. SIGKILL after the effect, before its receipt and result are recorded.
    before=$(calls)
    db --effect-pause-ms 20000 exec --harness agent --input "Charge me 42, then explain." >"$work/a2.out" 2>&1 &
    a_pid=$!
    wait_for 20 announced "$work/a2.out" || fail "A announced no session"
    s2="$(session_of "$work/a2.out")"
    wait_for 20 charged_once "$s2" || fail "A never charged"
    kill -9 "$a_pid"; wait "$a_pid" 2>/dev/null || true; a_pid=""
    db log --session "$s2" >"$work/log2.out"
    grep -q 'TOOL_CALL' "$work/log2.out" || fail "no TOOL_CALL journaled before the effect"
    grep -q 'TOOL_RESULT' "$work/log2.out" && fail "a TOOL_RESULT was journaled before the kill"
    db resume --session "$s2" >"$work/b2.out" || fail "B's resume"
    grep -q 'resumed and completed: .* 1 provider call(s), 1 tool call(s) run' "$work/b2.out" || fail "B's resume report"
    used=$(( $(calls) - before ))
    [ "$used" -le $((clean + 1)) ] || fail "$used provider calls, more than $clean + 1"
    [ "$(attempts "$s2")" = 2 ] || fail "the charge's code should have been re-driven once: $(cat "$work/ledger.log")"
    [ "$(charged "$s2")" = 1 ] || fail "charged twice: $(cat "$work/ledger.log")"
    key1="$(awk -v s="$s2" '$1 == "attempt" && $2 == s {print $3}' "$work/ledger.log" | sort -u)"
    [ "$(echo "$key1" | wc -l)" = 1 ] || fail "the re-drive used another key: $key1"
    db verify --session "$s2" >"$work/v2.out" || fail "verify after the kill before the receipt"
    grep -q '^ok: ' "$work/v2.out" || fail "verify"
    passed=$((passed + 1))
    echo "[$durability] sigkill before the receipt: provider calls $used (no crash: $clean), charge code ran twice with one key, charged once"
}
for durability in record turn; do run_cases; done

echo "interop postgres: SIGKILL mid-turn, resume on another process: $passed passed, 0 failed"
