#!/usr/bin/env python3
"""The soak (issue 11 item 6): each example server held under many idle, slow and trickling
clients while one normal client keeps working.

For each server, on loopback, release builds:

- `tanstack_host --memory` (TanStack): SSE subscribers (`GET events`) and WebSocket
  subscribers (`GET socket`, `harness.subscribe`) on the normal client's thread, so that its
  every answer fans out to all of them;
- `uhp_server` (UHP): SSE streams of tasks (`POST /v1/responses`, `stream: true`, a slow
  count that lasts the hold). UHP has no WebSocket; every stream is a running task, and the
  host runs at most 256 at once (`max_running_tasks`, more is `503 harness_unavailable`),
  one API key at most 64 (`max_running_tasks_per_principal`, more is `429 rate_limited`
  with `Retry-After`). The hostile key attempts UHP_STREAMS streams: UHP_PER_KEY are served,
  every other one is answered 429 with Retry-After at once; UHP_SLOW slow readers come from
  a second key (under its cap), and the normal client from a third, which keeps working;
- `jambonz_server --agent minimal` (jambonz): WebSocket calls (`session:start` and the
  greeting turn, then idle). jambonz has no SSE.

The hostile clients, held HOLD_S seconds: the subscribers (read and dropped by one thread),
SLOW slow readers (a small receive buffer; they subscribe and never read), TRICKLE
trickling clients (a request head sent one byte every TRICKLE_EVERY_S seconds, never
finished). Meanwhile ONE normal client works in a loop (TanStack: a prompt on
`POST control`, its answer read to `RUN_FINISHED` over its own `GET events`; UHP: a task
`Reply with exactly: ok`, streamed to its end; jambonz: a call, the greeting and one turn,
then `session:end`) and its latency is measured.

Printed per server: RSS and open descriptors of the server (/proc/PID/status, /proc/PID/fd)
before, during and after (every hostile client closed, SETTLE_S seconds later), and the
normal client's latency p50/p99 in each phase. Checked: the normal client never fails, its
p99 during the hold is under P99_DURING_S, RSS after is at most max(2 x start, start +
RSS_SLACK_MIB), descriptors after at most start + FDS_SLACK, and every trickling client was
closed by the server within the hold (no header-read timeout is a defect: a trickler holds a
connection for ever).

Python 3 standard library only. Exits non-zero on a failed check.

    python3 scripts/load/soak.py [--no-build] [--only tanstack|uhp|jambonz] [--hold S]
"""

import argparse
import base64
import json
import os
import resource
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "examples")

SSE = 1000  # SSE subscribers, where the protocol has SSE (UHP: see UHP_STREAMS)
WS = 1000  # WebSocket connections, where it has WebSocket
SLOW = 300  # slow readers
TRICKLE = 100  # trickling clients
TRICKLE_EVERY_S = 2.0
UHP_STREAMS = 1000  # UHP: attempted by one key; UHP_PER_KEY served, the rest 429
UHP_PER_KEY = 64  # uhp_server's default max_running_tasks_per_principal
UHP_SLOW = 50  # slow streams from a second key (under its cap)
HOLD_S = 35  # past the UHP server's 30 s header-read timeout
BEFORE_S = 4
SETTLE_S = 4
AFTER_S = 4

PERIOD_S = 0.1  # the normal client starts at most 10 iterations a second (TanStack: 2, below)
P99_DURING_S = 2.0
RSS_SLACK_MIB = 50
FDS_SLACK = 20

TOKEN = "soak-token"
UHP_SLOW_TOKEN = "soak-slow-token"  # UHP: the slow readers' key
UHP_NORMAL_TOKEN = "soak-normal-token"  # UHP: the normal client's key
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def raise_nofile():
    """Our sockets and the servers' (they inherit the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * (SSE + WS + SLOW + TRICKLE) + 1024
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_status(pid):
    out = {"rss": 0.0, "fds": 0}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["rss"] = int(line.split()[1]) / 1024
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# --- sockets -------------------------------------------------------------------------------


def connect(port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    for attempt in range(50):
        try:
            s.connect(("127.0.0.1", port))
            return s
        except (ConnectionRefusedError, socket.timeout):
            if attempt == 49:
                raise
            time.sleep(0.05)


def http_head(s):
    """Reads a response head: (status, rest of the bytes read)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed before the response head: {buf[:80]!r}")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


def ws_frame(text, opcode=0x1):
    data = text.encode() if isinstance(text, str) else text
    mask = os.urandom(4)
    n = len(data)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def ws_open(port, path, protocol=None, rcvbuf=None):
    """A WebSocket after its 101; the bytes read past the head."""
    s = connect(port, rcvbuf)
    key = base64.b64encode(os.urandom(16)).decode()
    proto = f"Sec-WebSocket-Protocol: {protocol}\r\n" if protocol else ""
    s.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"{proto}\r\n"
        ).encode()
    )
    status, rest = http_head(s)
    if status != 101:
        s.close()
        raise ConnectionError(f"WebSocket upgrade answered {status}")
    return s, rest


class WsReader:
    """Text messages of a WebSocket (the normal client's), pings answered."""

    def __init__(self, s, buf=b""):
        self.s, self.buf = s, buf

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("WebSocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        while True:
            b0, b1 = self._need(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._need(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._need(8))
            payload = self._need(n)
            op = b0 & 0x0F
            if op == 0x9:
                self.s.sendall(ws_frame(payload, 0xA))
            elif op == 0x8:
                raise ConnectionError(f"WebSocket close {payload[:2].hex()}")
            elif op in (0x1, 0x2):
                return payload.decode(errors="replace")


class Drain(threading.Thread):
    """Reads and drops everything the subscribers get; notes the first bytes of each (for
    its status) and which ones the server closed."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.first = {}
        self.closed = 0
        self.bytes = 0
        self.running = True

    def add(self, s, tag):
        s.setblocking(False)
        with self.lock:
            self.sel.register(s, selectors.EVENT_READ, tag)

    def run(self):
        while self.running:
            with self.lock:
                events = self.sel.select(timeout=0) if self.sel.get_map() else []
            if not events:
                time.sleep(0.01)
                continue
            for key, _ in events:
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                self.bytes += len(data)
                if key.data not in self.first and data:
                    self.first[key.data] = data[:1024]
                if not data:
                    with self.lock:
                        self.sel.unregister(s)
                    self.closed += 1

    def statuses(self):
        out = {}
        for v in self.first.values():
            k = v.split(b" ")[1].decode(errors="replace") if v.startswith(b"HTTP/") else "ws"
            out[k] = out.get(k, 0) + 1
        return out

    def with_header(self, status, name):
        """How many first answers of `status` carry the header `name` (lower case)."""
        head = f"HTTP/1.1 {status} ".encode()
        line = f"\r\n{name}:".encode()
        return sum(1 for v in self.first.values() if v.startswith(head) and line in v.lower())

    def stop(self):
        self.running = False
        self.join(5)


class Tricklers(threading.Thread):
    """Each sends a request head one byte every TRICKLE_EVERY_S seconds; notes when the
    server closes it."""

    def __init__(self, port, head):
        super().__init__(daemon=True)
        self.socks = []
        self.head = head
        self.port = port
        self.closed_at = {}
        self.running = True
        self.t0 = time.time()

    def open(self, n):
        for _ in range(n):
            self.socks.append(connect(self.port))

    def run(self):
        i = 0
        while self.running:
            for j, s in enumerate(self.socks):
                if j in self.closed_at:
                    continue
                try:
                    s.setblocking(False)
                    try:
                        if s.recv(4096) == b"":
                            raise ConnectionError
                    except BlockingIOError:
                        pass
                    s.send(self.head[i % len(self.head) : i % len(self.head) + 1])
                except OSError:
                    self.closed_at[j] = time.time() - self.t0
            i += 1
            deadline = time.time() + TRICKLE_EVERY_S
            while self.running and time.time() < deadline:
                time.sleep(0.05)

    def stop(self):
        self.running = False
        self.join(5)


# --- the normal client ---------------------------------------------------------------------


class Normal(threading.Thread):
    """Runs `work()` in a loop; records (phase, seconds, error) per iteration."""

    def __init__(self, work, period):
        super().__init__(daemon=True)
        self.work = work
        self.period = period
        self.phase = "before"
        self.records = []
        self.running = True

    def run(self):
        while self.running:
            phase = self.phase
            t = time.perf_counter()
            try:
                self.work()
                err = None
            except Exception as e:  # noqa: BLE001 (any failure of the normal client counts)
                err = f"{type(e).__name__}: {e}"
            took = time.perf_counter() - t
            self.records.append((phase, took, err))
            time.sleep(0.2 if err else max(0.0, self.period - took))

    def stop(self):
        self.running = False
        self.join(30)


# --- the servers ---------------------------------------------------------------------------


def start(cmd, marker):
    """A server; its port from the first line that has `marker` and a port."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if marker in line:
            tail = line[line.find(marker) + len(marker) :]
            port = "".join(c for c in tail.split(":", 1)[-1].split()[0] if c.isdigit())
            # Keep reading its output so that a chatty server never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, int(port)
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not start")


class TanStack:
    name = "tanstack_host"
    sse, ws = SSE, WS
    slow_sse, slow_ws = SLOW // 2, SLOW - SLOW // 2
    # Every answer goes to the 2,000 subscribers too (about 3 KB each): 2 prompts a second
    # are ~12 MB/s to write, and to read here.
    period = 0.5
    thread = "soak"

    def start(self):
        port = free_port()
        self.proc, _ = start(
            [os.path.join(BIN, "tanstack_host"), "--addr", f"127.0.0.1:{port}", "--token", TOKEN, "--memory"],
            "127.0.0.1:",
        )
        self.port = port
        self.events = None
        self.thread_made = False
        self.cursor = "0"  # the subscribers start after the normal client's last event

    def sse_request(self, i):
        return (
            f"GET /api/harness/events?threadId={self.thread}&v=2&from={self.cursor} HTTP/1.1\r\nHost: x\r\n"
            f"authorization: Bearer {TOKEN}\r\n\r\n"
        ).encode()

    def ws_open(self, rcvbuf=None):
        s, rest = ws_open(self.port, f"/api/harness/socket?token={TOKEN}", rcvbuf=rcvbuf)
        s.sendall(ws_frame(json.dumps({"type": "harness.subscribe", "threadId": self.thread, "v": 2, "from": self.cursor})))
        return s

    trickle_head = (
        b"GET /api/harness/events?threadId=soak&v=2 HTTP/1.1\r\nHost: x\r\nx-pad: " + b"a" * 4000
    )

    def prompt(self):
        """`POST control` with a prompt: its receipt, accepted or queued."""
        c = connect(self.port)
        body = json.dumps({"threadId": self.thread, "input": {"op": "prompt", "message": "Hello"}}).encode()
        c.sendall(
            (
                f"POST /api/harness/control HTTP/1.1\r\nHost: x\r\nauthorization: Bearer {TOKEN}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
            ).encode()
            + body
        )
        status, rest = http_head(c)
        while True:
            more = c.recv(65536)
            if not more:
                break
            rest += more
        c.close()
        receipt = {}
        if status == 200 and b"{" in rest:
            receipt, _ = json.JSONDecoder().raw_decode(rest[rest.find(b"{") :].decode())
        if receipt.get("status") not in ("accepted", "queued"):
            raise RuntimeError(f"POST control: {status} {rest[:200]!r}")
        return receipt

    def work(self):
        if self.events is None:
            if self.thread_made is False:
                self.thread_made = True
                self.prompt()  # the thread, so that it can be subscribed to
            s = connect(self.port)
            s.sendall(self.sse_request(0))
            status, rest = http_head(s)
            if status != 200:
                raise RuntimeError(f"GET events: {status}")
            self.events = (s, s.makefile("rb"))
            self.seen = 0
        s, f = self.events
        receipt = self.prompt()
        # Its answer, over the subscription (chunked SSE: each data line arrives whole), to
        # the input's `harness.input.settled`.
        done = f'"name":"harness.input.settled","value":{{"inputId":"{receipt.get("inputId")}"'.encode()
        s.settimeout(10)
        while True:
            line = f.readline()
            if not line:
                self.events = None
                raise ConnectionError("the events stream ended")
            if line.startswith(b"id: "):
                self.cursor = line[4:].strip().decode()
            if line.startswith(b"data: ") and done in line:
                if b'"outcome":"completed"' not in line:
                    raise RuntimeError(f"the prompt did not complete: {line[:300]!r}")
                return

    def close(self):
        if self.events:
            self.events[0].close()


class Uhp:
    name = "uhp_server"
    sse, ws = UHP_STREAMS, 0
    slow_sse, slow_ws = UHP_SLOW, 0
    # One key's streams past its cap are refused at once (429 with Retry-After), not served.
    expected = {"200": UHP_PER_KEY, "429": UHP_STREAMS - UHP_PER_KEY}

    def start(self):
        keys = [TOKEN, UHP_SLOW_TOKEN, UHP_NORMAL_TOKEN]
        self.proc, self.port = start(
            [os.path.join(BIN, "uhp_server"), "--addr", "127.0.0.1:0",
             "--max-running-per-key", str(UHP_PER_KEY)]
            + [a for k in keys for a in ("--api-key", k)],
            "http://",
        )

    def post(self, body, token=TOKEN):
        data = json.dumps(body).encode()
        return (
            f"POST /v1/responses HTTP/1.1\r\nHost: x\r\nauthorization: Bearer {token}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(data)}\r\nconnection: close\r\n\r\n"
        ).encode() + data

    def sse_request(self, i):
        n = int((HOLD_S + 20) / 0.05)  # one number every 50 ms: it lasts the hold
        return self.post({"input": f"Count slowly from 1 to {n}, one number per line.", "stream": True})

    def slow_request(self, i):
        n = int((HOLD_S + 20) / 0.05)
        return self.post(
            {"input": f"Count slowly from 1 to {n}, one number per line.", "stream": True}, UHP_SLOW_TOKEN
        )

    trickle_head = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nx-pad: " + b"a" * 4000

    def work(self):
        c = connect(self.port)
        c.sendall(self.post({"input": "Reply with exactly: ok", "stream": True}, UHP_NORMAL_TOKEN))
        status, rest = http_head(c)
        c.settimeout(10)
        while b"response.completed" not in rest:
            more = c.recv(65536)
            if not more:
                break
            rest += more
        c.close()
        if status != 200 or b"response.completed" not in rest:
            raise RuntimeError(f"POST /v1/responses: {status} {rest[:200]!r}")

    def close(self):
        pass


class Jambonz:
    name = "jambonz_server"
    sse, ws = 0, WS
    slow_sse, slow_ws = 0, SLOW
    sid = 0

    def start(self):
        self.proc, self.port = start(
            [os.path.join(BIN, "jambonz_server"), "--addr", "127.0.0.1:0", "--agent", "minimal", "--quiet"],
            "ws://",
        )

    def call(self, rcvbuf=None):
        Jambonz.sid += 1
        sid = f"CA-soak-{Jambonz.sid}"
        s, rest = ws_open(self.port, "/", "harness.jambonz.org", rcvbuf)
        send = lambda t, d: s.sendall(ws_frame(json.dumps({"type": t, "call_sid": sid, **d})))
        send("session:start", {"protocol": 1, "from": "+15551234567", "to": "+15557654321",
                               "direction": "inbound", "language": "en-US"})
        send("turn:start", {"turn_id": 1, "input": {"type": "greeting"}})
        return s, rest, send

    def ws_open(self, rcvbuf=None):
        s, _, send = self.call(rcvbuf)
        if rcvbuf:  # a slow reader: more turns, more to not read
            for t in range(2, 12):
                send("turn:start", {"turn_id": t, "input": {"type": "speech", "text": "When are you open", "language": "en-US"}})
        return s

    trickle_head = (
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nx-pad: " + b"a" * 4000
    )

    def work(self):
        s, rest, send = self.call()
        s.settimeout(10)
        r = WsReader(s, rest)

        def until_done():
            while True:
                m = r.recv()
                if m.startswith('{"type":"reply:done"'):
                    return
                if '"error"' in m[:40]:
                    raise RuntimeError(m[:200])

        until_done()
        send("turn:start", {"turn_id": 2, "input": {"type": "speech", "text": "When are you open", "language": "en-US"}})
        until_done()
        send("session:end", {"reason": "caller_hangup", "duration_ms": 1000})
        s.sendall(ws_frame(struct.pack("!H", 1000), 0x8))
        s.close()

    def close(self):
        pass


def closed_by_peer(s):
    """Whether the server closed this socket: what it holds is read (without waiting) up to
    the end of the stream, or to the point where nothing more is there."""
    s.setblocking(False)
    try:
        for _ in range(10_000):
            if not s.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    return False


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- the soak ------------------------------------------------------------------------------


def soak(server):
    print(f"\n== {server.name}", flush=True)
    server.start()
    pid = server.proc.pid
    normal = Normal(server.work, getattr(server, "period", PERIOD_S))
    try:
        normal.start()
        time.sleep(BEFORE_S)
        before = proc_status(pid)

        normal.phase = "opening"
        t0 = time.time()
        drain = Drain()
        drain.start()
        hostile = []
        slow = []
        open_errors = {}

        def note(e):
            k = f"{type(e).__name__}: {e}"[:80]
            open_errors[k] = open_errors.get(k, 0) + 1

        for i in range(server.sse):
            try:
                s = connect(server.port)
                s.sendall(server.sse_request(i))
                drain.add(s, ("sse", i))
                hostile.append(s)
            except OSError as e:
                note(e)
        for i in range(server.ws):
            try:
                s = server.ws_open()
                drain.add(s, ("ws", i))
                hostile.append(s)
            except OSError as e:
                note(e)
        for i in range(server.slow_sse + server.slow_ws):
            try:
                if i < server.slow_sse:
                    s = connect(server.port, rcvbuf=4096)
                    s.sendall(getattr(server, "slow_request", server.sse_request)(i))
                else:
                    s = server.ws_open(rcvbuf=4096)
                hostile.append(s)
                slow.append(s)
            except OSError as e:
                note(e)
        trickle = Tricklers(server.port, server.trickle_head)
        trickle.open(TRICKLE)
        trickle.start()
        opened = time.time() - t0
        normal.phase = "during"
        print(f"opened {len(hostile) + TRICKLE} hostile connections in {opened:.1f} s"
              + (f"; errors {open_errors}" if open_errors else ""), flush=True)
        samples = []
        hold_end = time.time() + HOLD_S
        while time.time() < hold_end:
            time.sleep(2)
            samples.append(proc_status(pid))
        during = {"rss": max(x["rss"] for x in samples), "fds": max(x["fds"] for x in samples)}
        statuses = drain.statuses()
        dropped = drain.closed
        slow_closed = sum(1 for s in slow if closed_by_peer(s))
        trickle.stop()
        tricklers_closed = len(trickle.closed_at)
        last_close = max(trickle.closed_at.values(), default=0)

        normal.phase = "closing"
        drain.stop()
        for s in hostile + trickle.socks:
            try:
                s.close()
            except OSError:
                pass
        time.sleep(SETTLE_S)
        normal.phase = "after"
        time.sleep(AFTER_S)
        normal.stop()
        after = proc_status(pid)
    finally:
        normal.running = False
        server.close()
        server.proc.terminate()
        try:
            server.proc.wait(10)
        except subprocess.TimeoutExpired:
            server.proc.kill()

    lat = {p: [d for ph, d, e in normal.records if ph == p and not e] for p in ("before", "during", "after")}
    errors = [(ph, e) for ph, _, e in normal.records if e]
    print(f"subscribers' first answers: {statuses}; {dropped} closed by the server during the hold; "
          f"{drain.bytes / 1e6:.1f} MB read", flush=True)
    print(f"slow readers closed by the server: {slow_closed} of {len(slow)} (reported, not checked)")
    print(f"tricklers closed by the server: {tricklers_closed} of {TRICKLE} (the last after {last_close:.0f} s)")
    row = {
        "server": server.name,
        "load": f"{server.sse} SSE + {server.ws} WS subscribers, {server.slow_sse} SSE + "
        f"{server.slow_ws} WS slow readers, {TRICKLE} trickling",
        "rss": (before["rss"], during["rss"], after["rss"]),
        "fds": (before["fds"], during["fds"], after["fds"]),
        "lat": {p: (pct(v, 50), pct(v, 99), len(v)) for p, v in lat.items()},
        "errors": len(errors),
    }
    for p in ("before", "during", "after"):
        p50, p99, n = row["lat"][p]
        print(f"normal client {p:6}: {n:4} iterations, p50 {p50 * 1000:7.1f} ms, p99 {p99 * 1000:7.1f} ms", flush=True)
    print(f"RSS MiB {before['rss']:.1f} / {during['rss']:.1f} / {after['rss']:.1f}; "
          f"fds {before['fds']} / {during['fds']} / {after['fds']}  (before / during peak / after)", flush=True)

    n = server.name
    check(not errors, f"{n}: the normal client never failed ({len(errors)} failures: {errors[:3]})")
    check(all(row["lat"][p][2] > 0 for p in lat), f"{n}: the normal client worked in every phase")
    check(row["lat"]["during"][1] < P99_DURING_S, f"{n}: p99 during {row['lat']['during'][1]:.3f} s < {P99_DURING_S} s")
    expected = getattr(server, "expected", None)
    if expected is None:
        expected = server.sse + server.ws
        ok200 = statuses.get("200", 0) + statuses.get("ws", 0)
        check(ok200 == expected and not open_errors, f"{n}: {ok200} of {expected} subscribers served")
    else:
        check(statuses == expected and not open_errors, f"{n}: subscribers answered {statuses}, expected {expected}")
        for status in expected:
            if status == "429":
                with_ra = drain.with_header(status, "retry-after")
                check(with_ra == expected[status], f"{n}: {with_ra} of {expected[status]} 429s carry Retry-After")
    rss_bound = max(2 * before["rss"], before["rss"] + RSS_SLACK_MIB)
    check(after["rss"] <= rss_bound, f"{n}: RSS after {after['rss']:.1f} MiB <= {rss_bound:.1f} MiB")
    check(after["fds"] <= before["fds"] + FDS_SLACK, f"{n}: fds after {after['fds']} <= {before['fds']} + {FDS_SLACK}")
    check(tricklers_closed == TRICKLE, f"{n}: every trickling client closed within the hold ({tricklers_closed})")
    return row


def main():
    global HOLD_S, BIN
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--only", choices=["tanstack", "uhp", "jambonz"])
    ap.add_argument("--hold", type=float, default=HOLD_S)
    ap.add_argument("--bin", help="the folder of the example binaries (default: the release build)")
    a = ap.parse_args()
    HOLD_S = a.hold
    if a.bin:
        BIN = a.bin
    if not a.no_build and not a.bin:
        t0 = time.time()
        subprocess.run(
            ["cargo", "build", "--quiet", "--release", "--example", "tanstack_host",
             "--example", "uhp_server", "--example", "jambonz_server"],
            cwd=ROOT, check=True,
        )
        print(f"release build: {time.time() - t0:.0f} s", flush=True)
    print(f"ulimit -n {raise_nofile()}", flush=True)
    t0 = time.time()
    servers = {"tanstack": TanStack, "uhp": Uhp, "jambonz": Jambonz}
    rows = [soak(cls()) for k, cls in servers.items() if a.only in (None, k)]
    print(f"\nsoak, {HOLD_S:.0f} s hold, loopback, release builds ({time.time() - t0:.0f} s)")
    print(f"{'server':15} {'RSS MiB before/during/after':>28} {'fds before/during/after':>24} "
          f"{'p50/p99 ms before':>18} {'during':>14} {'after':>14}")
    for r in rows:
        lat = lambda p: f"{r['lat'][p][0] * 1000:.0f}/{r['lat'][p][1] * 1000:.0f}"
        rss = "/".join(f"{x:.0f}" for x in r["rss"])
        fds = "/".join(str(x) for x in r["fds"])
        print(f"{r['server']:15} {rss:>28} {fds:>24} {lat('before'):>18} {lat('during'):>14} {lat('after'):>14}")
        print(f"{'':15} ({r['load']})")
    if failures:
        print(f"{len(failures)} failed: {failures}")
        sys.exit(1)
    print("soak: all passed")


if __name__ == "__main__":
    main()
