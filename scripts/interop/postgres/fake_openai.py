#!/usr/bin/env python3
"""A loopback OpenAI-compatible model server for the SIGKILL test (Python stdlib only).

POST /v1/chat/completions streams Chat Completions SSE, as OpenAI does:
- a conversation with no tool result yet: one tool call, `charge {"amount": 42}`;
- otherwise a long reply, CHUNKS text deltas with DELAY seconds between them, so that there
  is a window to kill the client in while the reply streams.
Every request is counted: GET /count answers the number, and each request appends a line to
the file named by --log (`N tool_call` or `N reply`), so the test sees both.

usage: fake_openai.py --port-file FILE --log FILE [--chunks N] [--delay SECONDS]
"""

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
COUNT = 0


def chunk(delta, finish=None):
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return ("data: " + json.dumps(body) + "\n\n").encode()


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: the body ends when the connection closes (no length, no chunking).
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path != "/count":
            self.send_error(404)
            return
        with LOCK:
            n = COUNT
        body = str(n).encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global COUNT
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        length = int(self.headers.get("content-length") or 0)
        req = json.loads(self.rfile.read(length) or b"{}")
        has_result = any(m.get("role") == "tool" for m in req.get("messages", []))
        kind = "reply" if has_result else "tool_call"
        with LOCK:
            COUNT += 1
            n = COUNT
            with open(ARGS.log, "a") as f:
                f.write(f"{n} {kind}\n")
                f.flush()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        try:
            if kind == "tool_call":
                call = {
                    "index": 0,
                    "id": "call_charge_1",
                    "type": "function",
                    "function": {"name": "charge", "arguments": json.dumps({"amount": 42})},
                }
                self.wfile.write(chunk({"role": "assistant", "content": None, "tool_calls": [call]}))
                self.wfile.write(chunk({}, "tool_calls"))
            else:
                self.wfile.write(chunk({"role": "assistant", "content": ""}))
                self.wfile.flush()
                for i in range(ARGS.chunks):
                    self.wfile.write(chunk({"content": f"word{i} "}))
                    self.wfile.flush()
                    threading.Event().wait(ARGS.delay)
                self.wfile.write(chunk({}, "stop"))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client was killed mid-stream


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--chunks", type=int, default=30)
    p.add_argument("--delay", type=float, default=0.05)
    ARGS = p.parse_args()
    open(ARGS.log, "w").close()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
