"""Feed every fixture stream to the Python peer and to harness-uhp (the uhp_inspect example)
under several chunkings and compare. usage: differential.py UHP_INSPECT FIXTURES_DIR"""
import glob
import json
import os
import random
import subprocess
import sys

from harnessclientprotocol import SseDecoder, TaskAccumulator

KEYS = ["events", "text", "status", "tool_calls", "annotations", "sequence", "reasoning", "error"]


def chunkings(size):
    out = ["whole", "4096", "65536", "random:7"]
    if size < 200_000:
        out += ["1", "7"]
    return out


def split(data, how):
    if how == "whole":
        return [data]
    if how.startswith("random:"):
        rng = random.Random(int(how[7:]))
        out, i = [], 0
        while i < len(data):
            n = rng.randint(1, 4096)
            out.append(data[i:i + n])
            i += n
        return out
    n = int(how)
    return [data[i:i + n] for i in range(0, len(data), n)]


def peer(data, how):
    dec, task = SseDecoder(), TaskAccumulator()
    decoded = []  # what the peer's decoder hands out as events
    for c in split(data, how):
        for ev in dec.push(c):
            decoded.append(ev)
            task.add(ev)
    for ev in dec.flush():
        decoded.append(ev)
        task.add(ev)
    ok, missing = task.sequence
    return {"events": decoded, "text": task.text, "status": task.status,
            "tool_calls": task.tool_calls, "annotations": task.annotations,
            "sequence": [ok, missing], "reasoning": task.reasoning, "error": task.error}


def ours(exe, path, how):
    # The Rust side pushes the same sizes: fixed N, or its own random split (any split must
    # give the same answer, which is the point).
    arg = how if not how.startswith("random:") else how
    out = subprocess.run([exe, "--chunk", arg, path], check=True, capture_output=True).stdout
    s = json.loads(out)
    missing = []
    for m in s["sequence"]["missing"]:
        missing += list(range(m[0], m[1] + 1)) if isinstance(m, list) else [m]
    return {"events": s["events"], "text": s["text"],
            "status": s["status"] if s["terminal"] else None,
            "tool_calls": s["tool_calls"], "annotations": s["annotations"],
            "sequence": [s["sequence"]["ok"], missing], "reasoning": s["reasoning"],
            "error": s["error"]}


def short(v):
    t = json.dumps(v)
    return t if len(t) < 200 else t[:200] + "…"


def main():
    exe, fixtures = sys.argv[1], sys.argv[2]
    corrections = json.load(open(os.path.join(fixtures, "corrections.json")))
    failures, compared, peer_wrong_seen = [], 0, 0
    for path in sorted(glob.glob(os.path.join(fixtures, "*.sse"))):
        name = os.path.basename(path)[:-4]
        expected = json.load(open(path[:-4] + ".expected.json"))
        fix = corrections.get(name, {})
        data = open(path, "rb").read()
        for how in chunkings(len(data)):
            p, o = peer(data, how), ours(exe, path, how)
            for k in KEYS:
                if k in fix:
                    # The peer gives the vector's answer; we give the spec-correct one.
                    if o[k] != fix[k]:
                        failures.append(f"{name} [{how}] {k}: ours {short(o[k])} != spec {short(fix[k])}")
                    if p[k] == fix[k]:
                        print(f"note: {name} [{how}] the peer now agrees with the correction on {k}")
                    continue
                compared += 1
                if o[k] != p[k]:
                    failures.append(f"{name} [{how}] {k}: ours {short(o[k])} != peer {short(p[k])}")
                if k in expected and p[k] != expected[k]:
                    failures.append(f"{name} [{how}] {k}: the peer no longer gives the vector's answer")
        print(f"ok   {name}: agrees with the peer under {', '.join(chunkings(len(data)))}")
    for path in sorted(glob.glob(os.path.join(fixtures, "peer_wrong", "*.sse"))):
        name = os.path.basename(path)[:-4]
        expected = json.load(open(path[:-4] + ".expected.json"))
        data = open(path, "rb").read()
        wrong_keys = set()
        for how in chunkings(len(data)):
            p, o = peer(data, how), ours(exe, path, how)
            for k in KEYS:
                if k not in expected:
                    continue
                compared += 1
                if o[k] != expected[k]:
                    failures.append(f"{name} [{how}] {k}: ours {short(o[k])} != spec {short(expected[k])}")
                if p[k] != expected[k]:
                    wrong_keys.add(k)
        if not wrong_keys:
            failures.append(f"{name}: the peer was expected to be wrong here and was not")
        else:
            peer_wrong_seen += 1
        print(f"ok   {name}: spec-correct; the peer is wrong on {sorted(wrong_keys)}")
    print(f"\n{compared} comparisons, {peer_wrong_seen} peer defects reproduced")
    if failures:
        print("\nMISMATCHES:")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("differential: all agree")


if __name__ == "__main__":
    main()
