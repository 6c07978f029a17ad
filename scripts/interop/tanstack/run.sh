#!/usr/bin/env bash
# Interop of harness-tanstack against the real AG-UI libraries and real clients:
# the Python ag-ui-protocol models and @ag-ui/core zod schemas validate every event of a
# scripted session; a Node client reads our SSE and WebSocket and resumes exactly once;
# the @ag-ui/client HttpAgent runs a turn against POST run; readers that stop reading are
# slow consumers and lose nothing; the example's FAQ agent waits for an approval, a question
# and a person, and runs its gated refund once when approved, never when denied; the real
# @tanstack/ai-client ChatClient chats, runs a server tool, resolves an approval, joins a
# run mid-way and after its end, and hydrates a thread. Exits non-zero on any mismatch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$here"

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q 'ag-ui-protocol==1.0.0'
if [ ! -d node_modules/@ag-ui/client ] || [ ! -d node_modules/ws ] || [ ! -d node_modules/@tanstack/ai-client ]; then
    npm install --no-audit --no-fund --silent
fi

(cd "$root" && cargo build -q --example tanstack_host)
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$root/target/debug/examples/tanstack_host" --addr "127.0.0.1:$port" --memory --heartbeat-ms 1000 > "${TMPDIR:-/tmp}/tanstack-interop-host.log" 2>&1 &
host_pid=$!
trap 'kill $host_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/api/harness/capabilities" > /dev/null 2>&1 && break
    sleep 0.1
done

events_file="$(mktemp)"
node check.mjs "http://127.0.0.1:$port" "$events_file"
# @tanstack/ai-client (pinned in package.json): chat, tools, approvals, joinRun, hydrate.
node ai_client.mjs "http://127.0.0.1:$port"
.venv/bin/python check.py "$events_file"

# The heartbeat: an idle stream gets `: ping` (1 s here).
idle=$(timeout 3 curl -sN "http://127.0.0.1:$port/api/harness/events?threadId=interop-thread&from=99999&v=2" || true)
if ! grep -q '^: ping$' <<< "$idle"; then
    echo "FAIL: no ': ping' on an idle stream"; exit 1
fi
echo "ok: ': ping' heartbeat on an idle stream"
rm -f "$events_file"

# The two curl commands at the top of the spec, as written, against a host with a token.
port2=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$root/target/debug/examples/tanstack_host" --addr "127.0.0.1:$port2" --token my-token --memory > "${TMPDIR:-/tmp}/tanstack-interop-host2.log" 2>&1 &
host2_pid=$!
trap 'kill $host_pid $host2_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port2/api/harness/capabilities" > /dev/null 2>&1 && break
    sleep 0.1
done
base="http://127.0.0.1:$port2"
receipt=$(curl -s -X POST "$base/api/harness/control" \
  -H 'authorization: Bearer my-token' \
  -H 'content-type: application/json' \
  -d '{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}')
if [ "$receipt" != '{"inputId":"in-1","status":"accepted","operationId":"op-1"}' ]; then
    echo "FAIL: spec curl 1 printed $receipt"; exit 1
fi
echo "ok: spec curl 1 printed the receipt $receipt"
sleep 0.5
stream=$(timeout 2 curl -N -s -H 'authorization: Bearer my-token' \
  "$base/api/harness/events?threadId=thread-1&v=2" || true)
first=$(printf '%s\n' "$stream" | head -1)
if [ "$first" != 'data: {"type":"harness.hello","v":2,"threadId":"thread-1"}' ]; then
    echo "FAIL: spec curl 2 started with $first"; exit 1
fi
if ! grep -q '^id: 4$' <<< "$stream" || ! grep -q '^data: {"type":"harness.event","cursor":"4","threadId":"thread-1","operationId":"op-1","event":{' <<< "$stream"; then
    echo "FAIL: spec curl 2 has no event with id 4"; exit 1
fi
echo "ok: spec curl 2 showed the hello frame, then one SSE event per session event (id: <cursor>)"
resumed=$(timeout 2 curl -N -s -H 'authorization: Bearer my-token' -H 'Last-Event-ID: 4' \
  "$base/api/harness/events?threadId=thread-1&v=2" || true)
if [ "$(printf '%s\n' "$resumed" | sed -n 3p)" != 'id: 5' ]; then
    echo "FAIL: Last-Event-ID: 4 did not resume at 5"; exit 1
fi
echo "ok: the Last-Event-ID curl resumed after cursor 4"
status=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/api/harness/control" -H 'content-type: application/json' \
  -d '{"threadId":"thread-1","input":{"op":"prompt","message":"Hello"}}')
[ "$status" = 401 ] || { echo "FAIL: no token gave $status, not 401"; exit 1; }
echo "ok: no token: 401"
# "Every HTTP answer of the handler sends the id back in the X-Request-Id header."
for req in "-X GET $base/api/harness/control" "$base/api/harness/run?threadId=thread-1&runId=none" \
    "-H Connection:Upgrade -H Upgrade:websocket -H Sec-WebSocket-Version:13 -H Sec-WebSocket-Key:dGhlIHNhbXBsZSBub25jZQ== $base/api/harness/socket?token=my-token"; do
    # shellcheck disable=SC2086
    answer=$(curl -s -i --max-time 1 -H 'authorization: Bearer my-token' -H 'x-request-id: rid-7' $req || true)
    if ! grep -qi '^x-request-id: rid-7' <<< "$answer"; then
        echo "FAIL: no X-Request-Id on the answer to $req"; exit 1
    fi
done
echo "ok: X-Request-Id echoed on a wrong method, a 404 and the WebSocket upgrade"
# A flag that lost its value must not start an open host.
if "$root/target/debug/examples/tanstack_host" --addr "127.0.0.1:0" --token 2> /dev/null; then
    echo "FAIL: --token without a value started a host"; exit 1
fi
echo "ok: --token without a value stops the host"

# Slow consumers over a real network: a reader that stops gets slow_consumer (SSE) or the
# close 4408 (WebSocket), and loses no event when it resumes from its last cursor.
port3=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$root/target/debug/examples/tanstack_host" --addr "127.0.0.1:$port3" --memory --slow-consumer-ms 3000 > "${TMPDIR:-/tmp}/tanstack-interop-host3.log" 2>&1 &
host3_pid=$!
trap 'kill $host_pid $host2_pid $host3_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port3/api/harness/capabilities" > /dev/null 2>&1 && break
    sleep 0.1
done
node slow.mjs "http://127.0.0.1:$port3" 3000
# The stdio worker over real pipes: a bad line (not UTF-8, CRLF) is answered invalid_frame
# and the frames after it still run; it exits when stdin closes, and after
# unsupported_version with stdin still open.
(cd "$root" && cargo build -q --example tanstack_worker)
worker="$root/target/debug/examples/tanstack_worker"
out=$(printf '{"type":"harness.subscribe","threadId":"t","v":2}\r\n\xff\xfe\n{"type":"harness.input","requestId":"r2","input":{"op":"prompt","message":"Hi"}}\n' | timeout 10 "$worker")
if ! grep -q '"code":"invalid_frame"' <<< "$out" || ! grep -q '"requestId":"r2","status":"accepted"' <<< "$out"; then
    echo "FAIL: worker after a non-UTF-8 line: $out"; exit 1
fi
echo "ok: worker answers a non-UTF-8 line invalid_frame and runs the next input"
rc=0
out=$(timeout 5 "$worker" < <(printf '{"type":"harness.subscribe","threadId":"t","v":3}\n'; sleep 6)) || rc=$?
if [ "$rc" != 0 ] || ! grep -q '"code":"unsupported_version"' <<< "$out"; then
    echo "FAIL: worker did not answer unsupported_version and exit (rc $rc): $out"; exit 1
fi
echo "ok: worker exits after unsupported_version"
echo "tanstack interop: all passed"
