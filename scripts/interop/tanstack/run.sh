#!/usr/bin/env bash
# Interop of harness-tanstack against the real AG-UI libraries and real clients:
# the Python ag-ui-protocol models and @ag-ui/core zod schemas validate every event of a
# scripted session; a Node client reads our SSE and WebSocket and resumes exactly once;
# the @ag-ui/client HttpAgent runs a turn against POST run. Exits non-zero on any mismatch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$here"

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q 'ag-ui-protocol==1.0.0'
if [ ! -d node_modules/@ag-ui/client ] || [ ! -d node_modules/ws ]; then npm install --no-audit --no-fund --silent; fi

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
.venv/bin/python check.py "$events_file"

# The heartbeat: an idle stream gets `: ping` (1 s here).
idle=$(timeout 3 curl -sN "http://127.0.0.1:$port/api/harness/events?threadId=interop-thread&from=99999&v=2" || true)
if ! grep -q '^: ping$' <<< "$idle"; then
    echo "FAIL: no ': ping' on an idle stream"; exit 1
fi
echo "ok: ': ping' heartbeat on an idle stream"
rm -f "$events_file"
echo "tanstack interop: all passed"
