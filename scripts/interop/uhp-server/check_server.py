"""Our UHP server against real clients.

usage:
  check_server.py streams BASE_URL KEY UHP_INSPECT   the PyPI harnessclientprotocol decoder and
                                                     harness-uhp (uhp_inspect) read the same
                                                     streams from our server identically
  check_server.py remember BASE_URL KEY FILE         runs a task with an Idempotency-Key, notes it
  check_server.py recall BASE_URL KEY FILE           after a restart: the task reads back, and the
                                                     same key gets the same task, never a new run
"""
import json
import os
import sys
import tempfile
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "uhp"))
from differential import KEYS, ours, peer, short  # noqa: E402  (the decoders' comparison, shared)


def call(base, key, method, path, body=None, headers=None, stream=False):
    h = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    h.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers=h)
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.read()


def streams(base, key, inspect):
    tasks = [
        ("Reply with exactly: ok", lambda s: s["text"] == "ok"),
        ("When are you open?", lambda s: len(s["tool_calls"]) == 1 and "open" in s["text"]),
        ("Create a file named report.md containing exactly: # Report",
         lambda s: len(s["annotations"]) == 1 and s["annotations"][0]["filename"] == "report.md"),
        ("Count slowly from 1 to 12, one number per line.",
         lambda s: s["text"] == "".join(f"{i}\n" for i in range(1, 13))),
    ]
    failures = []
    for prompt, expect in tasks:
        status, data = call(base, key, "POST", "/v1/responses", {"input": prompt, "stream": True})
        assert status == 200, status
        with tempfile.NamedTemporaryFile(suffix=".sse", delete=False) as f:
            f.write(data)
            path = f.name
        for how in ["whole", "7", "1", "random:7"]:
            p, o = peer(data, how), ours(inspect, path, how)
            for k in KEYS:
                if p[k] != o[k]:
                    failures.append(f"{prompt!r} [{how}] {k}: ours {short(o[k])} != peer {short(p[k])}")
            if p["status"] != "completed" or not p["sequence"][0]:
                failures.append(f"{prompt!r} [{how}]: peer saw status {p['status']}, sequence {p['sequence']}")
        summary = json.loads(os.popen(f"{inspect} --no-events {path}").read())
        if not expect(summary):
            failures.append(f"{prompt!r}: unexpected task {short(summary)}")
        os.unlink(path)
        print(f"ok   {prompt!r}: {len(data)} bytes decode alike in both clients")
    if failures:
        sys.exit("MISMATCHES:\n" + "\n".join("  " + f for f in failures))


def remember(base, key, file):
    body = {"input": "Reply with exactly: durable"}
    k = {"Idempotency-Key": "uhp-interop-durable-1"}
    _, a = call(base, key, "POST", "/v1/responses", body, k)
    _, b = call(base, key, "POST", "/v1/responses", body, k)
    a, b = json.loads(a), json.loads(b)
    assert a["id"] == b["id"], f"a repeated key ran a second task: {a['id']} != {b['id']}"
    json.dump({"id": a["id"], "status": a["status"], "body": body, "key": k}, open(file, "w"))
    print(f"ok   remembered {a['id']} ({a['status']}); the repeated key got the same task")


def recall(base, key, file):
    m = json.load(open(file))
    _, got = call(base, key, "GET", f"/v1/responses/{m['id']}")
    got = json.loads(got)
    assert got["status"] == m["status"], f"after a restart the task reads {got['status']}"
    _, again = call(base, key, "POST", "/v1/responses", m["body"], m["key"])
    again = json.loads(again)
    assert again["id"] == m["id"], f"after a restart the same key ran a new task {again['id']}"
    print(f"ok   after a restart {m['id']} reads back {got['status']}, and its key still names it")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {"streams": streams, "remember": remember, "recall": recall}[mode](*args)
