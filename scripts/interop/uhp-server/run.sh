#!/usr/bin/env bash
# Our UHP server (examples/uhp_server) against real peers, on loopback:
#   1. the official UHP conformance suite at class full — every check must pass, no skip;
#   2. our own client (examples/uhp_task: HttpTaskClient, the TaskClient over hyper) — streamed and not;
#   3. the PyPI client `harnessclientprotocol` — decodes our streams as harness-uhp does;
#   4. a restart with --data: stored responses and idempotency keys survive it.
#
# The suite is not published on PyPI (`pip download uhp-conformance`: no such distribution)
# and is never vendored here: it is run read-only from `../shared/peers/uhp/conformance`
# beside the repository (CI lays shared/ there). Where that folder is absent the suite's part
# prints a SKIP line and the rest still runs. UHP_CONFORMANCE_DIR points elsewhere (a worktree).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
suite="${UHP_CONFORMANCE_DIR:-$(cd "$root/.." && pwd)/shared/peers/uhp/conformance}"
cd "$here"

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install --quiet --disable-pip-version-check "jsonschema>=4" "harnessclientprotocol==0.1.0"

(cd "$root" && cargo build --quiet --example uhp_server --example uhp_task --example uhp_inspect)
bin="${CARGO_TARGET_DIR:-$root/target}/debug/examples"
key="uhp-interop-$RANDOM$RANDOM"
data="$(mktemp -d)"
log="${TMPDIR:-/tmp}/uhp-server-interop.log"
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
pid=""
start_server() {
    "$bin/uhp_server" --addr "127.0.0.1:$port" --api-key "$key" --data "$data" >> "$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
        curl -fsS "$base/v1/uhp" > /dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "uhp_server did not start; see $log" >&2
    return 1
}
stop_server() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; pid=""; }
trap 'stop_server; rm -rf "$data"' EXIT
start_server

echo "== 1. the official conformance suite, class full"
if [ -d "$suite/uhp_conformance" ]; then
    report="$(mktemp)"
    PYTHONPATH="$suite" .venv/bin/python -m uhp_conformance.cli \
        --base-url "$base" --api-key "$key" --class full --plain --json "$report"
    # A skip is not a pass: the report must say conformant, with nothing unverified.
    .venv/bin/python - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
skipped = r.get("skipped_not_verified") or []
assert r.get("conformant") is True and not skipped, f"not conformant: skipped={skipped}"
print("conformance: class full, every check passed, none skipped")
PY
else
    echo "SKIP: the UHP conformance suite is not at $suite (it is not on PyPI; CI lays shared/ beside the clone)"
fi

echo "== 2. our client, examples/uhp_task"
out="$("$bin/uhp_task" --url "$base" --api-key "$key" --input "Reply with exactly: ok")"
echo "$out" | .venv/bin/python -c 'import json,sys; t=json.load(sys.stdin); assert (t["status"], t["text"], t["sequence"]["ok"]) == ("completed", "ok", True), t; print("ok   streamed task: completed, text ok, sequence gapless")'
out="$("$bin/uhp_task" --url "$base" --api-key "$key" --input "When are you open?" --no-stream)"
echo "$out" | .venv/bin/python -c 'import json,sys; t=json.load(sys.stdin); assert t["status"] == "completed" and len(t["tool_calls"]) == 1, t; print("ok   non-streamed task: completed, one tool call")'

echo "== 3. the PyPI client harnessclientprotocol"
.venv/bin/python check_server.py streams "$base" "$key" "$bin/uhp_inspect"

echo "== 4. a restart keeps responses and idempotency keys"
mem="$(mktemp)"
.venv/bin/python check_server.py remember "$base" "$key" "$mem"
stop_server
start_server
.venv/bin/python check_server.py recall "$base" "$key" "$mem"
rm -f "$mem"
echo "uhp-server interop: all passed"
