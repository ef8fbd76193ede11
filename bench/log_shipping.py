"""What shipping the ingest log to the checkpoint store costs a push, and a shipped piece.

Pushes one-triple elements into a :class:`LiveEngine` with an ingest log from ``--threads``
threads (each waiting for durability after every element, as the HTTP API does), three
times in one run: without shipping (the peer), shipping to a ``file://`` store, and
shipping to S3 (a moto server in server mode, real boto3) every ``--interval`` seconds.
Repeated ``--rounds`` times, interleaved; prints the median round's elements/s of each
and the ratio to the peer, the pieces shipped, the mean upload
time per piece (object + manifest) and the ship lag left at the end; raw figures go to
``bench/results/log_shipping.json``.

Usage: ``python bench/log_shipping.py [--threads 8] [--elements 2000] [--interval 0.2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.logship import LogShipper
from linkstream.engine.live.runtime import LiveEngine
from linkstream.store.checkpoint_backends import Backend, FileBackend, S3Backend

EX = "http://example.org/"


def run(
    directory: str, backend: Backend | None, threads: int, per_thread: int, interval: float
) -> dict[str, Any]:
    live = LiveEngine(idle_ms=None)
    lg = IngestLog(directory)
    live.recover(lg)
    sh = LogShipper(lg, backend, interval).start() if backend is not None else None

    def feed(k: int) -> None:
        stream = "%ss%d" % (EX, k)
        for i in range(per_thread):
            live.push(stream, 1000 * (i + 1), [(f"<{stream}/x{i}>", f"<{EX}p>", f'"{i}"')])
            live.sync()

    t0 = time.perf_counter()
    ts = [threading.Thread(target=feed, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    out: dict[str, Any] = {"elements": threads * per_thread, "seconds": round(dt, 3)}
    out["elements_per_s"] = round(threads * per_thread / dt)
    if sh is not None:
        out["lag_at_end_s"] = round(sh.lag(), 3)
        last = lg.last_seq()
        deadline = time.monotonic() + 30
        while sh.stats()["shipped_seq"] < last and time.monotonic() < deadline:
            time.sleep(0.01)
        out["caught_up_s"] = round(time.perf_counter() - t0 - dt, 3)
        sh.stop()
        st = sh.stats()
        out.update(pieces=st["pieces"], bytes=st["bytes"], ship_ms_per_piece=st["ship_ms_mean"])
        out["failures"] = st["failures"]
    live.close()
    return out


def _moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--elements", type=int, default=2000, help="per thread")
    ap.add_argument("--interval", type=float, default=0.2, help="ship interval (s)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the median is printed)")
    args = ap.parse_args()
    import boto3

    proc, endpoint = _moto()
    root = tempfile.mkdtemp(prefix="ls-logship-")
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        client.create_bucket(Bucket="bench")
        rounds: dict[str, list[dict[str, Any]]] = {"none": [], "file": [], "s3_moto": []}
        for k in range(args.rounds):  # interleaved: a load change on the box hits every mode alike
            d = os.path.join(root, str(k))
            rounds["none"].append(run(d + "a", None, args.threads, args.elements, args.interval))
            fb = FileBackend(d + "store")
            rounds["file"].append(run(d + "b", fb, args.threads, args.elements, args.interval))
            s3 = S3Backend("bench", "run%d" % k, client=client)
            rounds["s3_moto"].append(run(d + "c", s3, args.threads, args.elements, args.interval))
        res = {}
        for name, rs in rounds.items():  # the median round by throughput
            res[name] = sorted(rs, key=lambda r: r["elements_per_s"])[len(rs) // 2]
            res[name]["rounds_elements_per_s"] = [r["elements_per_s"] for r in rs]
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    base = res["none"]["elements_per_s"]
    for name, r in res.items():
        line = "%-8s %7d elements/s  %.3fx of no shipping" % (
            name,
            r["elements_per_s"],
            r["elements_per_s"] / base,
        )
        if "pieces" in r:
            line += "  %d pieces, %.2f ms/piece, lag at end %.3f s, caught up %.3f s after, %d failures" % (
                r["pieces"],
                r["ship_ms_per_piece"],
                r["lag_at_end_s"],
                r["caught_up_s"],
                r["failures"],
            )
        print(line)
    os.makedirs("bench/results", exist_ok=True)
    with open("bench/results/log_shipping.json", "w") as f:
        json.dump({"args": vars(args), "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
