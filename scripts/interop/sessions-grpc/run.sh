#!/usr/bin/env bash
# Interop of Harness.Connect (gRPC) with a foreign implementation: Python peers on grpcio,
# their code generated now from harness-rs's own proto (harness-sessions/proto).
#
# (a) a Python harness (py_harness.py) that harness-rs's controller (the `sessions` example)
#     drives through a model call, a controller-mediated tool call and an approval
#     park / approve / resume, then replay and verify, over TCP and over a unix socket;
# (b) a Python host (py_host.py) that drives harness-rs's served harness (`harness_node
#     --harness faq`) the same way and checks every frame it receives;
# (c) bad Python harnesses: one that closes early, one that sends two ENDs, one that answers
#     with another execution id (each INTERNAL, an interrupted turn that resume re-drives), one
#     that never answers Describe (UNAVAILABLE after 10 s, nothing journaled). Nothing already
#     journaled is lost: the log before is a prefix of the log after, and verify holds.
# Bounded: about 20 s, 10 of them the Describe timeout.
. "$(dirname "$0")/../venv.sh" 'grpcio>=1.60' 'grpcio-tools>=1.60'

out="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$out"
}
trap cleanup EXIT

# The peers' code, from our proto, now.
proto_include="$($py -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
mkdir "$out/gen"
$py -m grpc_tools.protoc -I"$root/harness-sessions/proto" -I"$proto_include" \
    --python_out="$out/gen" --grpc_python_out="$out/gen" agentsessions.proto
export PYTHONPATH="$out/gen"

(cd "$root" && cargo build -q --example sessions --example harness_node)
tool="$root/target/debug/examples/sessions"
node="$root/target/debug/examples/harness_node"

fail() {
    echo "sessions-grpc: $*" >&2
    exit 1
}

# ---- (a) our controller drives the Python harness ----
echo good >"$out/mode"
$py py_harness.py "$out/port" "$out/mode" "$out/harness.log" "$out/py.sock" &
pids+=($!)
for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.1; done
[ -s "$out/port" ] || fail "the Python harness did not start"
port="$(cat "$out/port")"
S=("$tool" --dir "$out/j" --harness "py=127.0.0.1:$port" --harness "pyunix=unix:$out/py.sock")

says() { # TEXT COMMAND...: runs the sessions tool (output kept in $out/said), then looks for TEXT
    local text="$1"
    shift
    "${S[@]}" "$@" >"$out/said"
    grep -q -- "$text" "$out/said"
}

turn_log() { # the harness's log line N (1-based) as "mode frames error"
    $py -c 'import json,sys; l=json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])-1]); print(l["mode"], ",".join(l["frames"]), l["error"], l.get("parked") or l.get("decision") or "")' "$out/harness.log" "$1"
}
expect_turn() { # N mode frames
    local got
    got="$(turn_log "$1")"
    case "$got" in
        "$2 $3 None"*) ;;
        *) fail "harness turn $1: got '$got', want '$2 $3'" ;;
    esac
}

"${S[@]}" exec --harness py --input "What is a prime number?" >"$out/exec"
sid="$(awk '/^session/{print $2}' "$out/exec")"
grep -q "parked: tool call .*-publish awaits approval" "$out/exec" || fail "exec did not park: $(cat "$out/exec")"
grep -q "(monday: 8am to 6pm)" "$out/exec" || fail "no get_hours result in the output"
expect_turn 1 good start,model,tool,park
says "publish" pending --session "$sid" || fail "nothing pending"
says "resumed and completed" approve --session "$sid" --reason "looks right" ||
    fail "approve did not complete the turn: $(cat "$out/said")"
grep -q "\[published\]" "$out/said" || fail "not published"
expect_turn 2 good start,model,tool,approval,tool
[ "$(grep -c "$sid" "$out/j/published.log")" = 1 ] || fail "published $(grep -c "$sid" "$out/j/published.log") times"
says " 0 provider calls" replay --session "$sid" || fail "replay called the provider"
expect_turn 3 good start,model,tool,approval,tool
"${S[@]}" verify --session "$sid"
[ "$(grep -c "$sid" "$out/j/published.log")" = 1 ] || fail "replay published again"
echo "(a) python harness over TCP: exec parked, approve resumed and completed, replay 0 provider calls, verify ok"

# The same service over its unix socket.
usid="$("${S[@]}" exec --harness pyunix --input "What is a prime number?" | awk '/^session/{print $2}')"
expect_turn 4 good start,model,tool,park
says "resumed and completed" approve --session "$usid" || fail "unix: approve"
expect_turn 5 good start,model,tool,approval,tool
"${S[@]}" verify --session "$usid" >/dev/null
echo "(a) python harness over a unix socket: parked, approved, completed"

# ---- (c) bad harnesses: the documented status, nothing journaled lost ----
n=5
bad() { # mode status
    "${S[@]}" log --session "$sid" >"$out/before"
    echo "$1" >"$out/mode"
    local start=$SECONDS
    if "${S[@]}" exec --session "$sid" --input "Give me three examples." >"$out/bad.out" 2>"$out/bad.err"; then
        fail "$1: exec succeeded"
    fi
    echo good >"$out/mode"
    grep -q "error $2 " "$out/bad.err" || fail "$1: want $2, got: $(cat "$out/bad.err")"
    "${S[@]}" log --session "$sid" >"$out/after"
    head -n "$(wc -l <"$out/before")" "$out/after" | cmp -s - "$out/before" || fail "$1: journaled records changed"
    "${S[@]}" verify --session "$sid" >/dev/null || fail "$1: verify"
    echo "(c) $1: $(tail -1 "$out/bad.err") [$((SECONDS - start)) s; $(wc -l <"$out/before") -> $(wc -l <"$out/after") records, verify ok]"
}
recover() { # the interrupted turn: resume re-drives it to the gate, approve completes it
    says "parked" resume --session "$sid" || fail "resume after $1 did not reach the gate"
    says "resumed and completed" approve --session "$sid" || fail "approve after $1"
    "${S[@]}" verify --session "$sid" >/dev/null
    n=$((n + 3))
    expect_turn $((n - 1)) good start,model,tool,park
    expect_turn "$n" good start,model,tool,approval,tool
}
bad close-early INTERNAL
expect_turn 6 close-early start,model
recover close-early
bad two-ends INTERNAL
expect_turn 9 two-ends start,model
recover two-ends
bad wrong-exec INTERNAL
expect_turn 12 wrong-exec start
recover wrong-exec
bad mute-describe UNAVAILABLE
cmp -s "$out/before" "$out/after" || fail "mute-describe: something was journaled"
[ "$(wc -l <"$out/harness.log")" = "$n" ] || fail "mute-describe: a Connect was opened"
echo "(c) interrupted turns resumed and approved: $(grep -c "$sid" "$out/j/published.log") publishes for 4 turns"
[ "$(grep -c "$sid" "$out/j/published.log")" = 4 ] || fail "publishes"

# ---- (b) the Python host drives our served harness ----
nport="$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$node" --addr "127.0.0.1:$nport" --harness faq >"$out/node-tcp.log" 2>&1 &
pids+=($!)
"$node" --addr "unix:$out/node.sock" --harness faq >"$out/node-unix.log" 2>&1 &
pids+=($!)
echo "(b) python host -> harness_node faq over TCP"
$py py_host.py "127.0.0.1:$nport"
echo "(b) python host -> harness_node faq over a unix socket (:authority localhost)"
$py py_host.py "unix:$out/node.sock" localhost
echo "sessions-grpc: all checks passed"
