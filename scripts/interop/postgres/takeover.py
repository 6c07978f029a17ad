#!/usr/bin/env python3
"""Two tanstack_host processes on one PostgreSQL, one thread, a SIGKILL mid-turn (issue 15).

usage: takeover.py HOST_BINARY DATABASE_URL WORKDIR

Host A runs a slow turn ("wait..." streams, then takes 30 s); host B reads the thread with
A's cursors (Last-Event-ID) and gets the same records, none lost or repeated; an input
POSTed to B while A owns the thread is forwarded to A, which writes it to the log with its
traceparent, and B answers with A's receipt; a POST run (AG-UI) to B
is forwarded to A too (a new run: A's `409 conflict`; A's own run by its runId: B streams
it from the shared log, to the RUN_ERROR `interrupted` of the takeover); A is SIGKILLed
mid-turn; after the lease TTL a prompt to B takes the thread over: B writes
`harness.ownership.changed` reason `taken_over`, A's turn settles `interrupted`
(`RUN_ERROR` code `interrupted`, `harness.operation.finished` status `interrupted`,
`harness.input.settled` outcome `interrupted`), and the new prompt runs to completion on
B. Python stdlib only; bounded (every wait has a deadline, < 60 s in all).
"""
import base64
import http.client
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

TTL_MS = 1500
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
DEADLINE = time.monotonic() + 55


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(binary, url, work, name):
    port = free_port()
    log = open(os.path.join(work, f"takeover-{name}.log"), "w")
    p = subprocess.Popen(
        [binary, "--addr", f"127.0.0.1:{port}", "--database-url", url,
         "--lease-ttl-ms", str(TTL_MS)],
        stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/api/harness/capabilities")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        time.sleep(0.05)
    fail(f"host {name} did not start")


def control(port, thread, inp):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/api/harness/control",
              body=json.dumps({"threadId": thread, "input": inp}),
              headers={"content-type": "application/json",
                       "traceparent": TRACEPARENT})
    r = c.getresponse()
    body = r.read().decode()
    if r.status != 200:
        fail(f"POST control on {port}: {r.status} {body}")
    return json.loads(body)


class Reader:
    """An SSE stream of a thread, in a thread of its own: (cursor, frame) pairs."""

    def __init__(self, port, thread, last_event_id=None):
        self.q = queue.Queue()
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request("GET", f"/api/harness/events?threadId={thread}&v=2", headers=headers)
        self.resp = self.conn.getresponse()
        if self.resp.status != 200:
            fail(f"GET events on {port}: {self.resp.status}")
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        cursor = None
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("id: "):
                    cursor = line[4:]
                elif line.startswith("data: "):
                    self.q.put((cursor, json.loads(line[6:])))
                    cursor = None
        except Exception:
            pass
        self.q.put(None)

    def until(self, pred, what):
        """Frames up to and including the first that pred accepts."""
        got = []
        while True:
            left = DEADLINE - time.monotonic()
            if left <= 0:
                fail(f"timed out waiting for {what}; got {[f for _, f in got][-5:]}")
            try:
                item = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if item is None:
                fail(f"stream ended waiting for {what}")
            got.append(item)
            if pred(item[1]):
                return got


def post_run(port, body):
    """POST run: (status, the connection's response) -- an SSE stream on 200."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/api/harness/run", body=json.dumps(body),
              headers={"content-type": "application/json", "traceparent": TRACEPARENT})
    return c.getresponse()


class RunReader:
    """The plain AG-UI events of a POST run answer, in a thread of its own."""

    def __init__(self, resp):
        self.q = queue.Queue()
        self.resp = resp
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("data: "):
                    self.q.put(json.loads(line[6:]))
        except Exception:
            pass
        self.q.put(None)

    def until(self, pred, what):
        got = []
        while True:
            left = DEADLINE - time.monotonic()
            if left <= 0:
                fail(f"timed out waiting for {what}; got {got[-5:]}")
            try:
                item = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if item is None:
                fail(f"the run's stream ended waiting for {what}; got {got[-5:]}")
            got.append(item)
            if pred(item):
                return got

    def ended(self):
        """Whether the stream ends next (within 5 s)."""
        try:
            return self.q.get(timeout=5) is None
        except queue.Empty:
            return False


class Socket:
    """A WebSocket of the host (stdlib only: the client side of RFC 6455, text frames)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET /api/harness/socket HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self._exact(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            fail(f"socket upgrade on {port}: {head!r}")

    def _exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                fail("the socket closed")
            out += chunk
        return out

    def send(self, obj):
        data = json.dumps(obj).encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = bytes([0x81, 0x80 | n])
        elif n < 65536:
            head = bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
        else:
            head = bytes([0x81, 0x80 | 127]) + n.to_bytes(8, "big")
        self.s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        """The next text frame, as JSON (pings are skipped)."""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._exact(2), "big")
            elif n == 127:
                n = int.from_bytes(self._exact(8), "big")
            mask = self._exact(4) if b1 & 0x80 else None
            payload = self._exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if b0 & 0x0F == 1:
                return json.loads(payload)
            if b0 & 0x0F == 8:
                fail(f"the socket closed: {payload!r}")

    def until(self, pred, what):
        while True:
            if time.monotonic() > DEADLINE:
                fail(f"timed out waiting for {what} on the socket")
            f = self.recv()
            if pred(f):
                return f


def event(frame):
    return frame.get("event", {}) if frame.get("type") == "harness.event" else {}


def custom(frame, name):
    e = event(frame)
    return e.get("value") if e.get("type") == "CUSTOM" and e.get("name") == name else None


def main():
    binary, url, work = sys.argv[1], sys.argv[2], sys.argv[3]
    a, pa = start(binary, url, work, "a")
    b, pb = start(binary, url, work, "b")
    passed = 0
    try:
        thread = f"takeover-{os.getpid()}-{int(time.time())}"
        ra = Reader(pa, thread)
        r = control(pa, thread, {"op": "prompt", "message": "wait for it", "inputId": "in-a1"})
        if r.get("status") != "accepted":
            fail(f"prompt on A: {r}")
        op_a = r["operationId"]
        got_a = ra.until(lambda f: event(f).get("type") == "TEXT_MESSAGE_CONTENT", "A's slow turn streaming")
        a_cursors = [c for c, _ in got_a if c]
        # An input to B while A's lease is live: forwarded to A, which queues it behind its
        # turn and writes it to the log (its traceparent on `harness.input.accepted`); B
        # answers with A's receipt.
        t0 = time.monotonic()
        rb = control(pb, thread, {"op": "prompt", "message": "hello from b", "inputId": "in-b0"})
        fwd_ms = (time.monotonic() - t0) * 1000
        if rb.get("status") != "queued" or rb.get("inputId") != "in-b0":
            fail(f"input on B while A owns the thread: {rb}")
        got = ra.until(lambda f: (custom(f, "harness.input.queued") or {}).get("inputId") == "in-b0",
                       "the forwarded input in A's stream")
        got_a += got
        acc = [custom(f, "harness.input.accepted") for _, f in got
               if (custom(f, "harness.input.accepted") or {}).get("inputId") == "in-b0"]
        if len(acc) != 1 or acc[0].get("traceparent") != TRACEPARENT:
            fail(f"the forwarded input's record in A's log: {acc}")
        if any(custom(f, "harness.ownership.changed") for _, f in got):
            fail("a new owner wrote the forwarded input, not A")
        passed += 1
        # B reads the thread from A's first cursor: the same records after it, in order.
        rb_stream = Reader(pb, thread, last_event_id=a_cursors[0])
        got_b = rb_stream.until(lambda f: (custom(f, "harness.input.queued") or {}).get("inputId") == "in-b0",
                                "B's replay")
        b_frames = [(c, f) for c, f in got_b if c]
        a_after = [(c, f) for c, f in got_a if c][1:]
        if b_frames != a_after:
            fail(f"B's replay after {a_cursors[0]} differs from A's stream:\nA {a_after}\nB {b_frames}")
        passed += 1
        # The same over B's WebSocket: a `harness.input` frame goes to A with its traceparent,
        # and B's socket gets A's receipt.
        ws = Socket(pb)
        ws.send({"type": "harness.subscribe", "threadId": thread, "v": 2})
        t0 = time.monotonic()
        ws.send({"type": "harness.input", "requestId": "ws-1", "traceparent": TRACEPARENT,
                 "input": {"op": "prompt", "message": "hello from b's socket", "inputId": "in-w0"}})
        rw = ws.until(lambda f: f.get("type") in ("harness.receipt", "harness.error")
                      and f.get("requestId") == "ws-1", "the socket input's receipt")
        ws_ms = (time.monotonic() - t0) * 1000
        if rw.get("type") != "harness.receipt" or rw.get("status") != "queued" or rw.get("inputId") != "in-w0":
            fail(f"socket input on B while A owns the thread: {rw}")
        got = ra.until(lambda f: (custom(f, "harness.input.queued") or {}).get("inputId") == "in-w0",
                       "the socket input in A's stream")
        acc = [custom(f, "harness.input.accepted") for _, f in got
               if (custom(f, "harness.input.accepted") or {}).get("inputId") == "in-w0"]
        if len(acc) != 1 or acc[0].get("traceparent") != TRACEPARENT:
            fail(f"the socket input's record in A's log: {acc}")
        passed += 1
        # POST run (AG-UI) to B while A owns the thread: forwarded to A. A new run would cut
        # into A's turn: A's `409 conflict` (not B's `not_owner`). A's own run, by its id (a
        # client that lost its stream and asks again): A starts nothing, and B streams the run
        # from the shared log, from its RUN_STARTED, live.
        resp = post_run(pb, {"threadId": thread, "runId": f"run-b-{os.getpid()}",
                             "messages": [{"id": "u1", "role": "user", "content": "hi"}]})
        body = resp.read().decode()
        if resp.status != 409 or json.loads(body).get("error") != "conflict":
            fail(f"a new POST run on B while A's turn runs: {resp.status} {body}")
        t0 = time.monotonic()
        resp = post_run(pb, {"threadId": thread, "runId": op_a,
                             "messages": [{"id": "u1", "role": "user", "content": "wait for it"}]})
        if resp.status != 200:
            fail(f"POST run of A's run on B: {resp.status} {resp.read()!r}")
        rr = RunReader(resp)
        head = rr.until(lambda e: e.get("type") == "TEXT_MESSAGE_CONTENT", "A's run on B's POST run")
        run_ms = (time.monotonic() - t0) * 1000
        if head[0].get("type") != "RUN_STARTED" or head[0].get("runId") != op_a:
            fail(f"B's POST run stream does not start with A's RUN_STARTED: {head[:2]}")
        passed += 1
        # SIGKILL A mid-turn; past the TTL, a prompt to B takes the thread over.
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        killed = time.monotonic()
        time.sleep(TTL_MS / 1000 + 0.3)
        r = control(pb, thread, {"op": "prompt", "message": "What are your hours on Saturday?", "inputId": "in-b1"})
        if r.get("status") != "accepted":
            fail(f"prompt on B after the TTL: {r}")
        op_b = r["operationId"]
        took = time.monotonic() - killed
        rest = rb_stream.until(
            lambda f: (custom(f, "harness.operation.finished") or {}).get("operationId") == op_b,
            "B's new turn to finish")
        frames = [f for _, f in rest]
        owner = [custom(f, "harness.ownership.changed") for f in frames if custom(f, "harness.ownership.changed")]
        if not owner or owner[0].get("reason") != "taken_over":
            fail(f"no harness.ownership.changed taken_over: {owner}")
        passed += 1
        fin_a = [custom(f, "harness.operation.finished") for f in frames
                 if (custom(f, "harness.operation.finished") or {}).get("operationId") == op_a]
        settled_a = [custom(f, "harness.input.settled") for f in frames
                     if (custom(f, "harness.input.settled") or {}).get("inputId") == "in-a1"]
        run_err = [event(f) for f in frames if event(f).get("type") == "RUN_ERROR"]
        if fin_a != [{"operationId": op_a, "status": "interrupted"}]:
            fail(f"A's operation did not finish interrupted: {fin_a}")
        if len(settled_a) != 1 or settled_a[0].get("outcome") != "interrupted":
            fail(f"A's input did not settle interrupted: {settled_a}")
        settled_q = [custom(f, "harness.input.settled") for f in frames
                     if (custom(f, "harness.input.settled") or {}).get("inputId") == "in-b0"]
        if len(settled_q) != 1 or settled_q[0].get("outcome") != "interrupted":
            fail(f"the input queued behind A's turn did not settle interrupted: {settled_q}")
        if not run_err or run_err[0].get("code") != "interrupted":
            fail(f"A's AG-UI run did not end with RUN_ERROR interrupted: {run_err}")
        passed += 1
        fin_b = custom(frames[-1], "harness.operation.finished")
        texts = "".join(event(f).get("delta", "") for f in frames
                        if event(f).get("type") == "TEXT_MESSAGE_CONTENT" and f.get("operationId") == op_b)
        if fin_b.get("status") != "completed" or not texts:
            fail(f"B's turn: {fin_b}, text {texts!r}")
        passed += 1
        # B's POST run answer: A's run to its end, RUN_ERROR `interrupted` (written by B's
        # takeover), the same events as the thread's log has for it, then the end.
        tail = rr.until(lambda e: e.get("type") in ("RUN_FINISHED", "RUN_ERROR"), "the end of A's run")
        run_events = head + tail
        if run_events[-1].get("type") != "RUN_ERROR" or run_events[-1].get("code") != "interrupted":
            fail(f"B's POST run of A's run did not end RUN_ERROR interrupted: {run_events[-1]}")
        if not rr.ended():
            fail("B's POST run stream did not end after RUN_ERROR")
        full = Reader(pb, thread).until(
            lambda f: (custom(f, "harness.operation.finished") or {}).get("operationId") == op_b,
            "the whole thread on B")
        logged = [event(f) for _, f in full if f.get("operationId") == op_a]
        end = next(i for i, e in enumerate(logged) if e.get("type") in ("RUN_FINISHED", "RUN_ERROR"))
        if run_events != logged[:end + 1]:
            fail(f"B's POST run answer differs from the log's run:\nPOST {run_events}\nlog  {logged[:end + 1]}")
        starts = [e for e in logged if e.get("type") == "RUN_STARTED"]
        if len(starts) != 1:
            fail(f"A's run started {len(starts)} times")
        passed += 1
        # One cursor space: B's stream has every cursor once, in order, with no gap.
        cursors = [int(c) for c, _ in got_b + rest if c]
        if cursors != list(range(cursors[0], cursors[0] + len(cursors))):
            fail(f"B's cursors are not gapless and unique: {cursors}")
        passed += 1
        print(f"takeover: an input forwarded B -> A answered in {fwd_ms:.0f} ms "
              f"(POST control), {ws_ms:.0f} ms (WebSocket), {run_ms:.0f} ms to A's run's "
              f"first text on B's POST run; A killed, B took "
              f"the thread {took:.1f} s later (TTL {TTL_MS} ms); B answered: {texts.strip()!r}")
        print(f"interop postgres: two tanstack hosts, SIGKILL and takeover: {passed} passed, 0 failed")
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


if __name__ == "__main__":
    main()
