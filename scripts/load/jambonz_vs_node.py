#!/usr/bin/env python3
"""Our jambonz server against a Node `ws` server of the spec's minimal-harness shape, under
the same load, on loopback (issue 18).

The servers: `jambonz_server --agent minimal` (harness_jambonz::server::JambonzServer serving the
spec's minimal harness in Rust, release build) and scripts/interop/jambonz/minimal_harness.mjs
(the spec's JavaScript, on `ws`, its model's per-word delay off). Both answer "When are you
open" with the same 7 reply:chunk frames, one a word, and a reply:done.

The load (scripts/load/jambonz_load.mjs, on `ws`, installed here as
scripts/interop/jambonz/run.sh installs it):

1. throughput: CALLS calls at once, turn after turn (TURNS_PER_CALL turns a call, then a new
   call); reply:chunk frames relayed per second of the server process's CPU time (user +
   system, every thread, from /proc/PID/stat) over a MEASURE_S window after a warm-up;
2. memory per idle call: IDLE_CALLS calls opened (session:start and the greeting answered),
   then idle; the server's RSS growth (VmRSS, /proc/PID/status) divided by the calls.

Each figure is the median of 3 runs, the two servers alternating, each run on a fresh server.
Issue 18's targets: at least 5x Node's frames per CPU-second, at most 1/4 of Node's memory
per idle call; the table says whether each is met. The check (exit non-zero) is a floor
against regressions, with room for a shared machine: at least 2.5x Node's frames per
CPU-second and at most 1/2 of its memory per idle call (or a failed run). Python 3 standard
library only, plus node and npm; the release build of jambonz_server (.ci/run builds it in a
step of its own).

    python3 scripts/load/jambonz_vs_node.py [--no-build] [--runs N] [--no-check]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INTEROP = os.path.join(ROOT, "scripts", "interop", "jambonz")
LOAD = os.path.join(ROOT, "scripts", "load", "jambonz_load.mjs")
RUST_BIN = os.path.join(ROOT, "target", "release", "examples", "jambonz_server")

# Node serves on one thread: so does ours here (`--threads 1`), a per-core comparison.
RUST_ARGS = ["--threads", "1"]

CALLS = 32
TURNS_PER_CALL = 20
WARMUP_S = 1.5
MEASURE_S = 4
IDLE_CALLS = 2000

TARGET_THROUGHPUT = 5.0  # ours / Node's, frames per CPU-second (issue 18)
TARGET_MEMORY = 0.25  # ours / Node's, bytes per idle call (issue 18)
FLOOR_THROUGHPUT = 2.5  # the check: below it, a regression
CEILING_MEMORY = 0.5


def clk_tck():
    return os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / clk_tck()


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 4 * IDLE_CALLS + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Server:
    """One server process, started fresh; its URL read from its first line."""

    def __init__(self, kind):
        self.kind = kind
        if kind == "rust":
            cmd = [RUST_BIN, "--addr", "127.0.0.1:0", "--agent", "minimal", "--quiet"] + RUST_ARGS
            # The example's allocator is mimalloc, which asks for transparent huge pages: RSS
            # then grows 2 MiB at a time, 1 KB a call over IDLE_CALLS calls, too coarse for
            # the figure. Without them RSS counts the 4 KiB pages the calls touch.
            env = dict(os.environ, MIMALLOC_ALLOW_THP="0")
        else:
            cmd = ["node", os.path.join(INTEROP, "minimal_harness.mjs")]
            env = dict(os.environ, CHUNK_DELAY_MS="0")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
        )
        line = self.proc.stdout.readline()
        start = line.find("ws://")
        if start < 0:
            self.stop()
            raise RuntimeError(f"{kind} server did not start: {line!r}")
        self.url = line[start:].split()[0]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def load(*args):
    return subprocess.Popen(
        ["node", LOAD, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def expect(proc, prefix, timeout_s):
    """The JSON after `prefix` on the load's next line that starts with it."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            rest = line[len(prefix) :].strip()
            return json.loads(rest) if rest else {}
    proc.kill()
    raise RuntimeError(f"the load did not say {prefix!r} in time")


def throughput(kind):
    server = Server(kind)
    try:
        pid = server.proc.pid
        client = load("turns", server.url, CALLS, WARMUP_S, MEASURE_S, TURNS_PER_CALL)
        expect(client, "measure-start", 30)
        cpu0 = cpu_seconds(pid)
        got = expect(client, "measure-end", MEASURE_S + 30)
        cpu = cpu_seconds(pid) - cpu0
        client.wait(timeout=30)
        if got["errors"] or got["chunks"] == 0:
            raise RuntimeError(f"{kind}: the load failed: {got}")
        return {
            "frames_per_cpu_s": got["chunks"] / cpu,
            "frames_per_s": got["chunks"] / got["seconds"],
            "cpu_share": cpu / got["seconds"],
        }
    finally:
        server.stop()


def idle_memory(kind):
    server = Server(kind)
    try:
        pid = server.proc.pid
        # A few calls first, so that the code and the allocator's first arenas are in.
        warm = load("idle", server.url, 20)
        expect(warm, "idle-ready", 30)
        warm.stdin.close()
        warm.wait(timeout=30)
        time.sleep(0.5)
        before = rss_bytes(pid)
        client = load("idle", server.url, IDLE_CALLS)
        got = expect(client, "idle-ready", 120)
        time.sleep(0.5)
        after = rss_bytes(pid)
        client.stdin.close()
        client.wait(timeout=30)
        if got["errors"] or got["calls"] != IDLE_CALLS:
            raise RuntimeError(f"{kind}: the idle calls failed: {got}")
        return {"bytes_per_call": (after - before) / IDLE_CALLS}
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-build", action="store_true", help="use the release build as it is")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-check", action="store_true", help="print the figures, check no target")
    args = ap.parse_args()

    for tool in ("node", "npm"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            sys.exit(f"{tool} is required")
    if not os.path.isdir(os.path.join(INTEROP, "node_modules", "ws")):
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=INTEROP,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    if not args.no_build:
        t0 = time.time()
        subprocess.run(
            ["cargo", "build", "--quiet", "--release", "--example", "jambonz_server"],
            cwd=ROOT,
            check=True,
        )
        print(f"release build: {time.time() - t0:.0f} s", flush=True)
    raise_nofile()

    t0 = time.time()
    runs = {("rust", "tp"): [], ("node", "tp"): [], ("rust", "mem"): [], ("node", "mem"): []}
    for i in range(args.runs):
        # Alternate which server goes first.
        order = ("rust", "node") if i % 2 == 0 else ("node", "rust")
        for kind in order:
            r = throughput(kind)
            runs[(kind, "tp")].append(r)
            print(
                f"run {i + 1} {kind:4}: {r['frames_per_cpu_s']:>10,.0f} frames/CPU-s "
                f"({r['frames_per_s']:,.0f} frames/s at {r['cpu_share']:.2f} cores)",
                flush=True,
            )
        for kind in order:
            r = idle_memory(kind)
            runs[(kind, "mem")].append(r)
            print(f"run {i + 1} {kind:4}: {r['bytes_per_call'] / 1024:>10.1f} KB per idle call", flush=True)

    med = lambda kind, what, key: statistics.median(r[key] for r in runs[(kind, what)])
    tp = {k: med(k, "tp", "frames_per_cpu_s") for k in ("rust", "node")}
    fps = {k: med(k, "tp", "frames_per_s") for k in ("rust", "node")}
    mem = {k: med(k, "mem", "bytes_per_call") for k in ("rust", "node")}
    tp_ratio = tp["rust"] / tp["node"]
    mem_ratio = mem["rust"] / mem["node"]
    print()
    print(f"jambonz server vs Node ws minimal harness, loopback, medians of {args.runs} runs "
          f"({time.time() - t0:.0f} s)")
    met = lambda ok: "met" if ok else "not met"
    print(f"{'':34} {'harness-jambonz':>16} {'Node ws':>12} {'ratio':>8} {'target':>9}")
    print(f"{'reply:chunk frames / CPU-second':34} {tp['rust']:>16,.0f} {tp['node']:>12,.0f} "
          f"{tp_ratio:>7.1f}x {'>= 5x':>9} {met(tp_ratio >= TARGET_THROUGHPUT)}")
    print(f"{'reply:chunk frames / second':34} {fps['rust']:>16,.0f} {fps['node']:>12,.0f} "
          f"{fps['rust'] / fps['node']:>7.1f}x")
    print(f"{'memory per idle call (KB)':34} {mem['rust'] / 1024:>16.1f} {mem['node'] / 1024:>12.1f} "
          f"{mem_ratio:>7.2f}x {'<= 0.25x':>9} {met(mem_ratio <= TARGET_MEMORY)}")
    print(f"({CALLS} calls at once, {TURNS_PER_CALL} turns a call, 7 chunks a turn; "
          f"{IDLE_CALLS} idle calls)")
    if args.no_check:
        return
    failed = []
    if tp_ratio < FLOOR_THROUGHPUT:
        failed.append(f"frames per CPU-second {tp_ratio:.1f}x Node's, below the floor {FLOOR_THROUGHPUT}x")
    if mem_ratio > CEILING_MEMORY:
        failed.append(f"memory per idle call {mem_ratio:.2f}x Node's, above the ceiling {CEILING_MEMORY}x")
    for f in failed:
        print(f"FAIL: {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
