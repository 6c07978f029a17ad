#!/usr/bin/env bash
# Differential test of harness-uhp against the real Python peer (harnessclientprotocol 0.1.0
# from PyPI): every stream in harness-uhp/tests/fixtures, in several chunkings, through
# both; where the peer is right we must agree with it, where it is wrong (peer_wrong/, and the
# keys in corrections.json) we must give the spec-correct answer. Exits non-zero on any mismatch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"

if [ ! -x "$here/.venv/bin/python" ]; then
    python3 -m venv "$here/.venv"
fi
"$here/.venv/bin/pip" install --quiet --disable-pip-version-check \
    "harnessclientprotocol==0.1.0" "unifiedharnessprotocol==0.1.0"

(cd "$root" && cargo build --quiet --example uhp_inspect --example uhp_probe)
exe="$root/target/debug/examples/uhp_inspect"

"$here/.venv/bin/python" "$here/differential.py" "$exe" "$root/harness-uhp/tests/fixtures/streams"
"$here/.venv/bin/python" "$here/mechanics.py" "$root/target/debug/examples/uhp_probe" "$root/harness-uhp/tests/fixtures/streams"
