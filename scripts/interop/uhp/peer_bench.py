"""The Python peer's own timing on a stream file: SseDecoder alone, and SseDecoder +
TaskAccumulator (the peer's accumulator is quadratic, so by default only the first
--pipeline-bytes of the stream are fed to it; its speed on the whole file is lower still).

usage: peer_bench.py FILE CHUNK [--pipeline-bytes N]   -> one JSON line on stdout
"""
import json
import sys
import time

from harnessclientprotocol import SseDecoder, TaskAccumulator


def main():
    path, chunk = sys.argv[1], int(sys.argv[2])
    limit = None
    if "--pipeline-bytes" in sys.argv:
        limit = int(sys.argv[sys.argv.index("--pipeline-bytes") + 1])
    data = open(path, "rb").read()
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]

    times = []
    for _ in range(3):
        dec = SseDecoder()
        n = 0
        t = time.perf_counter()
        for c in chunks:
            n += len(dec.push(c))
        n += len(dec.flush())
        times.append(time.perf_counter() - t)
    dec_s = min(times)

    body = data if limit is None else data[: data.rfind(b"\n\n", 0, limit) + 2]
    pchunks = [body[i:i + chunk] for i in range(0, len(body), chunk)]
    dec = SseDecoder()
    task = TaskAccumulator()
    t = time.perf_counter()
    for c in pchunks:
        for ev in dec.push(c):
            task.add(ev)
    for ev in dec.flush():
        task.add(ev)
    pipe_s = time.perf_counter() - t

    print(json.dumps({
        "bytes": len(data),
        "events": n,
        "decoder_s": dec_s,
        "decoder_mb_s": len(data) / 1e6 / dec_s,
        "pipeline_bytes": len(body),
        "pipeline_s": pipe_s,
        "pipeline_mb_s": len(body) / 1e6 / pipe_s,
    }))


if __name__ == "__main__":
    main()
