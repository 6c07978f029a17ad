#!/usr/bin/env bash
# The PostgreSQL stores against a real server: a throwaway cluster (scripts/pg.sh: Debian's
# packages, a temporary folder, a free port), the `postgres` feature's tests with
# HARNESS_PG_URL set, the cluster stopped and removed on exit whatever happens.
# Bounded: a few seconds to start the cluster, the tests' build, then about a second each.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
start=$SECONDS

dir="$(mktemp -d /tmp/harness-pg.XXXXXX)"
trap 'bash scripts/pg.sh stop "$dir"' EXIT
export HARNESS_PG_URL="$(bash scripts/pg.sh start "$dir")"
echo "postgres: $HARNESS_PG_URL"

cargo test -p harness-sessions --features postgres --test postgres

# Several processes, one database: the sessions tool on --database-url. A turn interrupted in
# one process (records journaled, then the process "dies") is resumed by another with at
# most one extra provider call; an approval decided by a third runs the gated tool once, and
# a fourth finds nothing left to resume. Every process is a new host on the database.
cargo build --quiet --features postgres --example sessions
tool=target/debug/examples/sessions
work="$(mktemp -d)"
trap 'rm -rf "$work"; bash scripts/pg.sh stop "$dir"' EXIT
db() { "$tool" --database-url "$HARNESS_PG_URL" --dir "$work" "$@"; }
expect() { # expect PATTERN FILE
    grep -E -- "$1" "$2" >/dev/null || { echo "FAIL: no /$1/ in:"; cat "$2"; exit 1; }
}
sid="$(db exec --input "Hello" | awk '/^session /{print $2}')"
[ -n "$sid" ] || { echo "FAIL: no session uid"; exit 1; }
db exec --session "$sid" --input "What is a prime number?" --interrupt-after 3 >"$work/a.out"
expect '^interrupted' "$work/a.out"
db resume --session "$sid" >"$work/b.out"
expect 'resumed and completed: .* [01] provider call' "$work/b.out"
db verify --session "$sid" >"$work/c.out"
expect '^ok: 10 records' "$work/c.out"
db sessions >"$work/list.out"
expect "^$sid\$" "$work/list.out"
p="$(db exec --harness publish --input "Give me three examples." | awk '/^session /{print $2}')"
db approve --session "$p" >"$work/approve.out"
expect '1 tool call\(s\) run' "$work/approve.out"
db resume --session "$p" >"$work/again.out"
expect '^nothing to resume' "$work/again.out"
[ "$(grep -c "^$p " "$work/published.log")" = 1 ] || { echo "FAIL: published.log:"; cat "$work/published.log"; exit 1; }
echo "interop postgres: sessions tool across processes: 4 passed, 0 failed"

echo "interop postgres: took $((SECONDS - start)) s"
