"""Differential test of the protocol mechanics (everything the Python peer exports besides the
stream decoder): is_retryable, check_discovery, object_type_for_id, check_sequence,
output_text, artifacts, backoff_seconds, idempotency_key.

Each case is asked of the peer and of harness-uhp (the uhp_probe example). Where the peer is
right we must agree with it; where it is wrong the case carries the spec-correct answer and
the reason. usage: mechanics.py UHP_PROBE FIXTURES_DIR"""
import copy
import glob
import json
import math
import os
import subprocess
import sys

import harnessclientprotocol as hcp
import unifiedharnessprotocol as uhp

FULL = {"object": "uhp.discovery", "protocol": "uhp", "versions": ["2026-08-11"],
        "default_version": "2026-08-11", "conformance_class": "full",
        "capabilities": {"streaming": True, "sessions": True, "cancellation": True,
                         "files_input": True, "files_output": True, "session_listing": True,
                         "harness_management": True, "session_sharing": True, "idempotency": True},
        "implementation": {"name": "HarnessRouter Community Edition", "version": "0.3.0"}}


def variant(**changes):
    d = copy.deepcopy(FULL)
    for k, v in changes.items():
        if k.startswith("cap_"):
            d["capabilities"].pop(k[4:], None) if v is None else d["capabilities"].__setitem__(k[4:], v)
        else:
            d[k] = v
    return d


def cases(fixtures):
    """(query, peer answer, spec-correct answer or None when the peer is right, why)."""
    out = []
    # Retry table: every code with the status it is reported under, every type, statuses.
    for code, status in uhp.ERROR_CODES.items():
        q = {"op": "is_retryable", "code": code, "status": status}
        peer = uhp.is_retryable(code=code, status=status)
        spec, why = None, ""
        if code == "preview_unavailable":
            spec, why = False, "501 is not a server_error status; preview_unavailable is not worth retrying"
        if code == "preview_failed":
            spec = True
        out.append((q, peer, spec, why))
    for code in list(uhp.ERROR_CODES) + ["acme_custom"]:
        q = {"op": "is_retryable", "code": code}
        peer = uhp.is_retryable(code=code)
        spec, why = None, ""
        if code == "preview_failed":
            spec, why = True, "the files chapter: preview_failed (502) is worth retrying"
        out.append((q, peer, spec, why))
    for t in uhp.ERROR_TYPES:
        out.append(({"op": "is_retryable", "type": t}, uhp.is_retryable(type=t),
                     True if t == "rate_limit_error" else None,
                     "a rate_limit_error without a code is rate_limited's class: retry after Retry-After"))
    for status in [200, 400, 401, 403, 404, 409, 413, 422, 429, 500, 501, 502, 503, 504, 505]:
        q = {"op": "is_retryable", "status": status}
        peer = uhp.is_retryable(status=status)
        spec, why = None, ""
        if status == 501:
            spec, why = False, "server_error covers 500, 502, 503, 504 - not 501"
        if status == 429:
            spec, why = True, "the spec leaves a code-less 429 open; 429 means retry later, and the one non-retryable 429 (quota_exhausted) is identified by its code"
        out.append((q, peer, spec, why))
    out.append(({"op": "is_retryable", "code": "quota_exhausted", "type": "rate_limit_error", "status": 429},
                uhp.is_retryable(code="quota_exhausted", type="rate_limit_error", status=429), None, ""))

    # Discovery documents.
    docs = [
        (FULL, None), (variant(conformance_class="core"), None),
        (variant(conformance_class="extended", cap_files_input=None), None),
        (variant(cap_harness_management=False), None),
        (variant(default_version="2026-09-12"), None),
        (variant(versions=[]), None), (variant(protocol="mcp"), None),
        (variant(conformance_class="platinum"), None),
        (variant(object="something.else"), (False, "the schema's object is the constant uhp.discovery")),
        (variant(cap_streaming="yes"), None),
    ]
    for doc, fix in docs:
        ok, _ = uhp.check_discovery(doc)
        out.append(({"op": "check_discovery", "doc": doc}, ok, fix[0] if fix else None, fix[1] if fix else ""))

    for i in ["chrn_1", "resp_7f3a", "hsess7e78", "file_00", "cntr_5b", "msg_1", "", "RESP_1"]:
        out.append(({"op": "object_type_for_id", "id": i}, uhp.object_type_for_id(i), None, ""))

    for seqs, fix in [
        ([0, 1, 2], None), ([], None), ([0, 2], None), ([1, 2, 3], None), ([0, 1, 3, 4, 7], None),
        ([0, 1, 1, 2], ([False, []], "a duplicate is a violation: seqs == range(len(seqs))")),
        ([0, 2, 1, 3], ([False, []], "a reordering is a violation: seqs == range(len(seqs))")),
    ]:
        ok, missing = uhp.check_sequence([{"sequence_number": n} for n in seqs])
        out.append(({"op": "check_sequence", "seqs": seqs}, [ok, missing],
                    fix[0] if fix else None, fix[1] if fix else ""))

    # output_text and artifacts over every terminal response in the fixtures.
    for path in sorted(glob.glob(os.path.join(fixtures, "*.sse")) + glob.glob(os.path.join(fixtures, "peer_wrong", "*.sse"))):
        if os.path.getsize(path) > 100_000:
            continue
        for line in open(path, encoding="utf-8", newline=""):
            line = line.strip("\r\n")
            if line.startswith("data:") and '"response.completed"' in line or '"response.failed"' in line and line.startswith("data:"):
                try:
                    ev = json.loads(line[5:])
                except ValueError:
                    continue
                r = ev.get("response")
                if isinstance(r, dict):
                    out.append(({"op": "output_text", "response": r}, hcp.output_text(r), None, ""))
                    out.append(({"op": "artifacts", "response": r}, hcp.artifacts(r), None, ""))

    for attempt, ra, fix in [
        (2, 30, None), (0, 0, None), (5, 1.5, None), (2, -5, None), (3, 899.0, None),
        (2, "inf", (900.0, "an infinite Retry-After is clamped (default max_server_delay 15 min), never inf")),
        (2, 1e9, (900.0, "an absurd Retry-After is clamped to max_server_delay")),
    ]:
        peer = hcp.backoff_seconds(attempt, retry_after=float(ra))
        out.append(({"op": "backoff_seconds", "attempt": attempt, "retry_after": ra}, peer,
                    fix[0] if fix else None, fix[1] if fix else ""))
    return out


def main():
    exe, fixtures = sys.argv[1], sys.argv[2]
    cs = cases(fixtures)
    queries = "\n".join(json.dumps(q) for q, *_ in cs) + "\n"
    queries += json.dumps({"op": "idempotency_key"}) + "\n" + json.dumps({"op": "idempotency_key", "prefix": "x" * 400}) + "\n"
    answers = [json.loads(l) for l in subprocess.run([exe], input=queries.encode(), check=True,
                                                      capture_output=True).stdout.splitlines()]
    failures, agreed, corrected = [], 0, 0
    for (q, peer, spec, why), ours in zip(cs, answers):
        if spec is None:
            if ours != peer and not (isinstance(peer, float) and math.isclose(ours, peer)):
                failures.append(f"{json.dumps(q)[:120]}: ours {ours!r} != peer {peer!r}")
            agreed += 1
        else:
            if ours != spec:
                failures.append(f"{json.dumps(q)[:120]}: ours {ours!r} != spec {spec!r} ({why})")
            if peer != spec:
                corrected += 1
                print(f"peer wrong: {json.dumps(q)[:100]} -> peer {peer!r}, spec {spec!r}: {why}")
    key, long_key = answers[len(cs)], answers[len(cs) + 1]
    peer_key = hcp.idempotency_key()
    if not (key.startswith("uhp-") and len(key) == len(peer_key)):
        failures.append(f"idempotency_key format {key!r} vs peer {peer_key!r}")
    if len(long_key) > 255:
        failures.append(f"idempotency key longer than 255: {len(long_key)}")
    print(f"\nmechanics: {agreed} cases agree with the peer, {corrected} peer defects answered per spec")
    if failures:
        print("MISMATCHES:")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("mechanics: all agree")


if __name__ == "__main__":
    main()
