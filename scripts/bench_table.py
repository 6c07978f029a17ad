#!/usr/bin/env python3
"""Print a markdown table of one criterion benchmark group, as ratios to a baseline.

usage: scripts/bench_table.py GROUP [BASELINE_ID] [--target DIR]

Reads target/criterion/GROUP/**/new/{benchmark,estimates}.json (written by `cargo bench`).
Each row: the benchmark, its median time, its throughput (MB/s = 10^6 bytes/s, or
elements/s) and the ratio to BASELINE_ID's throughput (>1 means faster than the baseline).
"""
import json
import os
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    target = "target"
    if "--target" in sys.argv:
        target = sys.argv[sys.argv.index("--target") + 1]
        args = [a for a in args if a != target]
    if not args:
        print(__doc__)
        sys.exit(2)
    group = args[0]
    baseline = args[1] if len(args) > 1 else None
    root = os.path.join(target, "criterion", group)
    rows = []
    for dirpath, _, files in os.walk(root):
        if os.path.basename(dirpath) != "new" or "benchmark.json" not in files:
            continue
        bench = json.load(open(os.path.join(dirpath, "benchmark.json")))
        est = json.load(open(os.path.join(dirpath, "estimates.json")))
        ns = est["median"]["point_estimate"]
        tp = bench.get("throughput") or {}
        bench_id = bench["full_id"][len(group) + 1:]
        if "Bytes" in tp:
            rate, unit = tp["Bytes"] / (ns / 1e9) / 1e6, "MB/s"
        elif "BytesDecimal" in tp:
            rate, unit = tp["BytesDecimal"] / (ns / 1e9) / 1e6, "MB/s"
        elif "Elements" in tp:
            rate, unit = tp["Elements"] / (ns / 1e9), "elem/s"
        else:
            rate, unit = 1e9 / ns, "iter/s"
        rows.append((bench_id, ns, rate, unit))
    if not rows:
        print(f"no results under {root}; run cargo bench first", file=sys.stderr)
        sys.exit(1)
    rows.sort()
    base = next((r for r in rows if r[0] == baseline), None)
    print(f"| {group} | median time | throughput | vs {baseline or '-'} |")
    print("| --- | ---: | ---: | ---: |")
    for bench_id, ns, rate, unit in rows:
        t = f"{ns / 1e6:.2f} ms" if ns >= 1e5 else f"{ns:.0f} ns"
        ratio = f"{rate / base[2]:.3f}x" if base else "-"
        r = f"{rate:,.0f} {unit}" if rate >= 100 else f"{rate:.2f} {unit}"
        print(f"| {bench_id} | {t} | {r} | {ratio} |")


if __name__ == "__main__":
    main()
