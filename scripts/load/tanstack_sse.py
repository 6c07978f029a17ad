#!/usr/bin/env python3
"""The TanStack host's SSE fan-out under load (issue 18, "Speed, end to end"): many
concurrent `GET events` subscribers on one host process (the example `tanstack_host`, which
serves with the library's runtime adapter), over loopback.

1. 10,000 subscribers of one thread: the host's RSS (VmRSS from /proc) must stay under
   200 MiB, and an event sent to the thread reaches every one of them;
2. 1,000 subscribers: the emit-to-socket latency, p50 and p99 over 20 events: from the
   `POST control` that emits `harness.input.accepted` (the host logs it before it answers)
   to its arrival on each subscriber's socket (so the figure includes that request).

Python 3 standard library only (asyncio). Raises its own `ulimit -n` (soft, up to the hard
limit) and the host's. Bounded: about half a minute. Prints the figures; exits non-zero on
a failed check.

    python3 scripts/load/tanstack_sse.py [--no-build] [--release] [--subscribers N]
"""

import argparse
import asyncio
import json
import os
import resource
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
THREAD = "fanout"
RSS_BOUND_MIB = 200
LATENCY_SUBSCRIBERS = 1_000
PROBES = 20

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Subscriber:
    """One `GET events` stream: records when each probe (by its marker) first arrives."""

    def __init__(self):
        self.reader = None
        self.writer = None
        self.seen = {}
        self.tail = b""
        self.task = None

    async def open(self, port):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        self.writer.write(
            f"GET /api/harness/events?threadId={THREAD}&v=2 HTTP/1.1\r\nhost: x\r\n\r\n".encode()
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head[:80])
        self.task = asyncio.ensure_future(self.read())

    async def read(self):
        try:
            while True:
                chunk = await self.reader.read(65536)
                if not chunk:
                    return
                now = time.perf_counter()
                data = self.tail + chunk
                i = data.find(b"probe-")
                while i >= 0:
                    j = i + 6
                    while j < len(data) and 48 <= data[j] <= 57:
                        j += 1
                    if j < len(data):
                        self.seen.setdefault(int(data[i + 6 : j]), now)
                    i = data.find(b"probe-", j)
                self.tail = data[-16:]
        except (ConnectionError, asyncio.CancelledError):
            return

    def close(self):
        if self.task:
            self.task.cancel()
        if self.writer:
            self.writer.close()


async def control(port, text):
    """`POST control` with a prompt; the time it was sent."""
    body = json.dumps({"threadId": THREAD, "input": {"op": "prompt", "message": text}}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = time.perf_counter()
    writer.write(
        b"POST /api/harness/control HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
        b"content-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    answer = await reader.read()
    writer.close()
    if b'"accepted"' not in answer:
        raise RuntimeError(answer[-200:])
    return sent


async def open_all(subs, port, batch=500):
    for i in range(0, len(subs), batch):
        await asyncio.gather(*(s.open(port) for s in subs[i : i + batch]))


async def until_all_seen(subs, probe, timeout):
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if all(probe in s.seen for s in subs):
            return True
        await asyncio.sleep(0.01)
    return False


async def run(port, pid, n):
    rss_idle = rss_mib(pid)
    print(f"host RSS before any subscriber: {rss_idle:.1f} MiB", flush=True)
    await control(port, "hello, the thread")
    subs = [Subscriber() for _ in range(n)]
    t0 = time.perf_counter()
    await open_all(subs, port)
    opened = time.perf_counter() - t0
    await asyncio.sleep(1.0)
    rss_n = rss_mib(pid)
    print(f"{n} SSE subscribers open in {opened:.1f} s; host RSS {rss_n:.1f} MiB", flush=True)
    sent = await control(port, "probe-0 to everyone")
    reached = await until_all_seen(subs, 0, 30)
    arrivals = sorted(s.seen[0] - sent for s in subs if 0 in s.seen)
    rss_after = rss_mib(pid)
    check(
        reached,
        f"an event reached all {n} subscribers (the last after {arrivals[-1] * 1000 if arrivals else -1:.0f} ms)",
    )
    check(
        max(rss_n, rss_after) < RSS_BOUND_MIB,
        f"{n} subscribers: host RSS {max(rss_n, rss_after):.1f} MiB < {RSS_BOUND_MIB} MiB "
        f"({(max(rss_n, rss_after) - rss_idle) * 1024 / n:.1f} KiB per subscriber)",
    )

    for s in subs:
        s.close()


def latency(port, n=LATENCY_SUBSCRIBERS, probes=PROBES):
    """`n` subscribers on raw sockets under one epoll (a cheap, exact arrival time per
    socket: asyncio's per-callback cost would be most of the figure), then `probes` events,
    one at a time."""
    subs = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /api/harness/events?threadId={THREAD}&v=2 HTTP/1.1\r\nhost: x\r\n\r\n".encode())
        subs.append(s)
    for s in subs:
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head[:80])
        s.setblocking(False)
    ep = select.epoll()
    by_fd = {s.fileno(): s for s in subs}
    for fd in by_fd:
        ep.register(fd, select.EPOLLIN)

    def drain(timeout):
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            if not ep.poll(0.05):
                return
            for fd, _ in ep.poll(0):
                try:
                    while by_fd[fd].recv(65536):
                        pass
                except BlockingIOError:
                    pass

    drain(1.0)
    lat = []
    for k in range(1, probes + 1):
        marker = f"probe-{k} ".encode()
        body = json.dumps({"threadId": THREAD, "input": {"op": "prompt", "message": f"probe-{k} latency"}}).encode()
        ctl = socket.create_connection(("127.0.0.1", port))
        req = (
            b"POST /api/harness/control HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
            b"content-type: application/json\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body
        )
        waiting = set(by_fd)
        tails = {}
        sent = time.perf_counter()
        ctl.sendall(req)
        deadline = sent + 10
        while waiting and time.perf_counter() < deadline:
            for fd, _ in ep.poll(0.5):
                try:
                    data = by_fd[fd].recv(65536)
                except BlockingIOError:
                    continue
                now = time.perf_counter()
                if fd in waiting:
                    buf = tails.get(fd, b"") + data
                    if marker in buf:
                        waiting.discard(fd)
                        lat.append((now - sent) * 1000)
                    else:
                        tails[fd] = buf[-32:]
        answer = ctl.recv(4096)
        ctl.close()
        if waiting or b"accepted" not in answer:
            check(False, f"probe {k}: {len(waiting)} subscribers did not get it; answer {answer[:120]!r}")
            break
        drain(0.3)  # the turn's reply, which follows the accepted input
    ep.close()
    for s in subs:
        s.close()
    if lat:
        lat.sort()
        p50 = statistics.median(lat)
        p99 = lat[int(len(lat) * 0.99) - 1]
        print(
            f"emit-to-socket latency at {n} subscribers, {probes} events: "
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {lat[-1]:.2f} ms",
            flush=True,
        )
        check(len(lat) == probes * n, f"{len(lat)} arrivals measured")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--release", action="store_true")
    ap.add_argument("--subscribers", type=int, default=10_000)
    args = ap.parse_args()
    profile = "release" if args.release else "debug"
    if not args.no_build:
        cmd = ["cargo", "build", "-q", "--example", "tanstack_host"]
        if args.release:
            cmd.append("--release")
        subprocess.run(cmd, cwd=ROOT, check=True)
    nofile = raise_nofile(args.subscribers + 1024)
    if nofile < args.subscribers + 200:
        print(f"ulimit -n is {nofile}: too low for {args.subscribers} subscribers", file=sys.stderr)
        return 1
    port = free_port()
    log = tempfile.TemporaryFile()
    host = subprocess.Popen(
        [
            os.path.join(ROOT, "target", profile, "examples", "tanstack_host"),
            "--addr",
            f"127.0.0.1:{port}",
            "--memory",
            "--max-connections",
            str(args.subscribers + 1024),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        print(f"tanstack_host ({profile} build), ulimit -n {nofile}", flush=True)
        asyncio.run(asyncio.wait_for(run(port, host.pid, args.subscribers), 90))
        time.sleep(1.0)
        latency(port)
    except Exception as e:  # a load check reports, it does not crash
        check(False, f"the load ran: {e!r}")
        log.seek(0)
        print(log.read().decode(errors="replace")[-2000:], file=sys.stderr)
    finally:
        host.kill()
        host.wait()
    if failures:
        print(f"tanstack SSE load: {len(failures)} failed", flush=True)
        return 1
    print("tanstack SSE load: all passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
