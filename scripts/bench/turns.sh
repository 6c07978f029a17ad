#!/usr/bin/env bash
# Instructions per turn (callgrind) on the hot paths a turn goes through, at this checkout and,
# with --before, at commit 3396fe1 (before issue 12: one tool model, one EventSink, tool rules
# on every host, the renames), so that a regression shows as a % change. Wall time on a shared
# 2-core machine is too noisy for that; instruction counts are not.
#   bash scripts/bench/turns.sh            # this checkout only
#   bash scripts/bench/turns.sh --before   # and 3396fe1, side by side (a second release build)
# Each path runs at N and 2N iterations; (I(2N) - I(N)) / N is one iteration, setup excluded.
# The program is examples/bench_turns.rs; bench_turns_3396fe1.rs.txt beside this script is the
# same program with the API names of 3396fe1 (only its `compat` section differs).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }

cargo build -q --release --example bench_turns
NEW=$PWD/target/release/examples/bench_turns
OLD=
if [ "${1:-}" = "--before" ]; then
    OLD_WT=${OLD_WT:-$PWD/target/bench-turns-3396fe1}
    [ -d "$OLD_WT" ] || git worktree add -q --detach "$OLD_WT" 3396fe1
    cp scripts/bench/bench_turns_3396fe1.rs.txt "$OLD_WT/examples/bench_turns.rs"
    (cd "$OLD_WT" && cargo build -q --release --example bench_turns)
    OLD=$OLD_WT/target/release/examples/bench_turns
    echo "(remove it after: git worktree remove --force $OLD_WT)"
fi

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

if [ -n "$OLD" ]; then
    printf '%-9s %16s %16s %9s\n' path "3396fe1 instr" "this instr" change
else
    printf '%-9s %16s\n' path "instr/iteration"
fi
for spec in "agent 400" "jambonz 100" "tanstack 200" "sessions 200"; do
    set -- $spec
    new=$(per_iter "$NEW" "$1" "$2")
    if [ -n "$OLD" ]; then
        old=$(per_iter "$OLD" "$1" "$2")
        python3 -c "print(f'{\"$1\":<9} {$old:16.0f} {$new:16.0f} {($new / $old - 1) * 100:+8.2f}%')"
    else
        python3 -c "print(f'{\"$1\":<9} {$new:16.0f}')"
    fi
done
