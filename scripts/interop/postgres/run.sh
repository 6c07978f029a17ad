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

echo "interop postgres: took $((SECONDS - start)) s"
