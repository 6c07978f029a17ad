#!/usr/bin/env bash
# Differential test of harness-core's WHATWG SSE decoder against eventsource-parser (npm,
# pinned in package.json; the parser under the Vercel AI SDK): a few thousand seeded random
# byte streams (every line end, CR/LF split over chunks, BOMs, NUL in ids, bad retries,
# multi-byte characters split over chunks, invalid UTF-8, unterminated events) plus
# hand-written ones, randomly chunked, through examples/sse_dump.rs and through the peer.
# gen_and_check.mjs says where the peer departs from the spec and how that is handled.
# SSE_INTEROP_SEED and SSE_INTEROP_CASES override the seed and the count.
# Exits non-zero on any mismatch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$here"

command -v node >/dev/null || { echo "node is required" >&2; exit 1; }
# The exact version in package.json and package-lock.json; reinstalled when it differs.
if ! npm ls --silent eventsource-parser >/dev/null 2>&1; then
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
(cd "$root" && cargo build --quiet --example sse_dump)
node gen_and_check.mjs
