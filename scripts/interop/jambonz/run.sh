#!/usr/bin/env bash
# Interop of harness-jambonz with real peers on loopback (Node `ws` from npm):
#  1. the spec's "minimal harness without the SDK" in JavaScript (scripted model) must pass
#     our jambonz_call (the simulator over a real socket, the spec's whole call);
#  2. a jambonz client in JavaScript drives our jambonz_server (greeting, speech, a tool
#     call, a barge-in, a cancelled turn, a refund refused without a tool:call, a hang-up
#     command, the 401 and 4000 refusals) and checks every frame;
#  3. a harness that accepts TCP and never answers the upgrade (hostile_harness.mjs
#     tcp_silent): jambonz_call must give up at its connect timeout, not hang.
# Exits non-zero on any mismatch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$here"

command -v node >/dev/null || { echo "node is required" >&2; exit 1; }
if [ ! -d node_modules/ws ]; then
    npm install --no-audit --no-fund --loglevel=error >/dev/null
fi
(cd "$root" && cargo build --quiet --example jambonz_server --example jambonz_call)
bin="$root/target/debug/examples"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Waits for the first line of a log (the URL a server listens on).
url_of() {
    for _ in $(seq 1 100); do
        if [ -s "$1" ]; then grep -o 'ws://[0-9.:]*' "$1" | head -1 && return 0; fi
        sleep 0.1
    done
    echo "no URL in $1" >&2; cat "$1" >&2; return 1
}

echo "== 1. JavaScript minimal harness  <-  our jambonz_call"
node minimal_harness.mjs > harness.log 2>&1 &
pids+=($!)
url="$(url_of harness.log)"
"$bin/jambonz_call" --url "$url"

echo
echo "== 2. our jambonz_server  <-  JavaScript jambonz client"
secret="interop-$RANDOM"
"$bin/jambonz_server" --addr 127.0.0.1:0 --secret "$secret" > server.log 2>&1 &
pids+=($!)
url="$(url_of server.log)"
node jambonz_client.mjs "$url" "$secret"

echo
echo "== 3. a harness that never answers the upgrade  <-  our jambonz_call"
node hostile_harness.mjs tcp_silent > hostile.log 2>&1 &
pids+=($!)
url="$(url_of hostile.log)"
if out="$(timeout 20 "$bin/jambonz_call" --url "$url" --connect-timeout 500 2>&1)"; then
    echo "jambonz_call passed against a harness that never answered" >&2; exit 1
fi
echo "$out"
grep -q "no WebSocket upgrade within 500 ms" <<<"$out" || { echo "unexpected: $out" >&2; exit 1; }

echo
echo "jambonz interop: all passed"
