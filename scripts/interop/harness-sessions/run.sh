#!/usr/bin/env bash
# Real-peer interop for harness-sessions: a journal written by harness-rs is checked by
# Python's `jcs` (RFC 8785, as agentsessions' verify_chain.py uses) and by the protobuf
# runtime with the agentsessions schema compiled by protoc (grpcio-tools): every content_hash
# must recompute and every event must be exactly protobuf's proto3-JSON of itself.
. "$(dirname "$0")/../venv.sh" 'jcs==0.2.1' 'protobuf>=5' 'grpcio-tools>=1.60'
proto_include="$(.venv/bin/python -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
# The crate's own proto (harness-sessions/proto), the one its gRPC feature compiles.
.venv/bin/python -m grpc_tools.protoc -I"$root/harness-sessions/proto" -I"$proto_include" --python_out=. agentsessions.proto

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# A journal with every event kind (approvals, errors, resume, fork, reasoning/file/data parts).
(cd "$root" && HARNESS_SESSIONS_INTEROP_DIR="$out/kinds" cargo test -q -p harness-sessions --test every_kind)
# And one written by the example tool, end to end.
(cd "$root" && cargo build -q --example sessions)
tool="$root/target/debug/examples/sessions"
sid="$("$tool" --dir "$out/cli" exec --input "What is a prime number?" | awk '/^session/{print $2}')"
"$tool" --dir "$out/cli" exec --session "$sid" --input "Give me three examples." >/dev/null
"$tool" --dir "$out/cli" exec --session "$sid" --input "More?" --interrupt-after 3 >/dev/null
"$tool" --dir "$out/cli" resume --session "$sid" >/dev/null
"$tool" --dir "$out/cli" fork --session "$sid" --at 5 >/dev/null
"$tool" --dir "$out/cli" replay --session "$sid"
"$tool" --dir "$out/cli" verify --session "$sid"
# The head a writer prints, kept outside the journal, catches whole records cut off its tail.
head="$("$tool" --dir "$out/cli" exec --session "$sid" --input "Last one." | awk '/^head /{print $2}')"
"$tool" --dir "$out/cli" verify --session "$sid" --head "$head" | grep -q "pinned head $head holds"
mkdir "$out/cut"
head -n -2 "$out/cli/$sid.journal" >"$out/cut/$sid.journal"
"$tool" --dir "$out/cut" verify --session "$sid" >/dev/null
if "$tool" --dir "$out/cut" verify --session "$sid" --head "$head" 2>"$out/cut/err"; then
    echo "verify --head accepted a journal cut below the pinned head" >&2
    exit 1
fi
grep -q "DATA_LOSS" "$out/cut/err"
# An approval-gated turn: exec parks it, approve records the decision and resumes it.
psid="$("$tool" --dir "$out/cli" exec --harness publish --input "What is a prime number?" | awk '/^session/{print $2}')"
"$tool" --dir "$out/cli" approve --session "$psid" --reason "looks right" >/dev/null
"$tool" --dir "$out/cli" replay --session "$psid"
"$tool" --dir "$out/cli" verify --session "$psid"
grep -q "$psid" "$out/cli/published.log"
# verify exits non-zero and names the record when the chain does not hold.
mkdir "$out/bad"
sed 's/Give me three examples/Give me four examples/' "$out/cli/$sid.journal" >"$out/bad/$sid.journal"
if "$tool" --dir "$out/bad" verify --session "$sid" 2>"$out/bad/err"; then
    echo "verify accepted a changed journal" >&2
    exit 1
fi
grep -q "record 7" "$out/bad/err"

cp "$out"/cli/*.journal "$out/kinds/"
.venv/bin/python check_journal.py "$out/kinds" "$root/harness-sessions/tests/fixtures/agentsessions-golden.json"
