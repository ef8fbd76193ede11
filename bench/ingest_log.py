"""What the durable ingest log (``linkstream run --state-dir``) costs a push.

Pushes one-triple elements into a :class:`LiveEngine` from ``--threads`` threads, each
waiting for durability (``sync``) after every ``--batch`` elements, as the HTTP API does
after each request; prints elements/s, fsyncs and the mean fsync time, with and without
the log.  Usage: ``python bench/ingest_log.py [--dir DIR] [--threads 8] [--batch 1]``.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"


def run(directory: str | None, threads: int, batch: int, per_thread: int) -> dict[str, float]:
    live = LiveEngine(idle_ms=None)
    if directory is not None:
        live.recover(IngestLog(directory))

    def feed(k: int) -> None:
        stream = "%ss%d" % (EX, k)
        for i in range(per_thread):
            live.push(stream, 1000 * (i + 1), [(f"<{stream}/x{i}>", f"<{EX}p>", f'"{i}"')])
            if (i + 1) % batch == 0:
                live.sync()

    t0 = time.perf_counter()
    ts = [threading.Thread(target=feed, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    live.sync()
    dt = time.perf_counter() - t0
    st = live.status().get("ingest_log", {})
    live.close()
    n = threads * per_thread
    return {
        "elements": n,
        "seconds": round(dt, 3),
        "elements_per_s": round(n / dt),
        "acks": n // batch,
        "fsyncs": st.get("fsyncs", 0),
        "fsync_ms_mean": st.get("fsync_ms_mean") or 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="log directory (default: a temporary one)")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1, help="elements per acknowledged push")
    ap.add_argument("--elements", type=int, default=2000, help="per thread")
    a = ap.parse_args()
    print("no log:", run(None, a.threads, a.batch, a.elements))
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        print("log   :", run(d, a.threads, a.batch, a.elements))


if __name__ == "__main__":
    main()
