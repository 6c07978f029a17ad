#!/usr/bin/env bash
# The README's "several hosts" figures: a throwaway PostgreSQL (scripts/pg.sh), the release
# build of examples/pg_figures against it and the file stores in a temporary folder, one run,
# the cluster stopped on exit. Usage: bash scripts/pg_figures.sh [N]   (N appends per row)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(mktemp -d /tmp/harness-pg.XXXXXX)"
trap 'bash scripts/pg.sh stop "$dir"' EXIT
url="$(bash scripts/pg.sh start "$dir")"
cargo run --quiet --release --features postgres --example pg_figures -- --database-url "$url" --n "${1:-2000}"
