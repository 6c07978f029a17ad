#!/usr/bin/env bash
# What the telemetry costs, in instructions (callgrind), on harness-tanstack's hot paths:
#   on    = the default build: tracing call sites and the `metrics` feature compiled in, no
#           subscriber, no recorder installed (what an application that installs none runs);
#   off   = --no-default-features --features tracing/max_level_off: every tracing call site
#           compiled out, no metrics.
# Each mode runs at N and 2N iterations; (I(2N) - I(N)) / N is the cost of one iteration,
# setup excluded. Then the cost of a turn under a fmt subscriber (turn-fmt) against none.
#   bash scripts/bench/telemetry.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }

bin() {
    cargo bench -q -p harness-tanstack --bench telemetry --no-run --message-format=json "$@" \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "telemetry":
        print(m["executable"])' | tail -1
}
ON=$(bin)
OFF=$(bin --no-default-features --features tracing/max_level_off)
[ -x "$ON" ] && [ -x "$OFF" ] || { echo "bench binaries not built"; exit 1; }

count() { # BIN MODE N -> instructions
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" "$3" 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per_iter() { # BIN MODE N
    local a b
    a=$(count "$1" "$2" "$3")
    b=$(count "$1" "$2" $(($3 * 2)))
    python3 -c "print(($b - $a) / $3)"
}

printf '%-8s %16s %16s %9s\n' mode "off instr/iter" "on instr/iter" "on/off"
for spec in "sse 10" "encode 2000" "fanout 200" "turn 40"; do
    set -- $spec
    off=$(per_iter "$OFF" "$1" "$2")
    on=$(per_iter "$ON" "$1" "$2")
    python3 -c "print(f'{\"$1\":<8} {$off:16.0f} {$on:16.0f} {($on / $off - 1) * 100:+8.2f}%')"
done
turn=$(per_iter "$ON" turn 40)
fmt=$(per_iter "$ON" turn-fmt 40)
python3 -c "print(f'a turn with a fmt subscriber: {$fmt:.0f} instructions, {$fmt - $turn:+.0f} ({($fmt / $turn - 1) * 100:+.1f}%) against none')"
