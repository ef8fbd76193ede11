#!/usr/bin/env python3
"""Data-plane throughput: batches/s and MB/s over ZeroMQ PUSH/PULL on tcp loopback.

Each configuration runs a receiver in a fresh process (``Receiver``, decoding every
message into a ``Batch``) fed by a ``Sender`` in this process, for batches of 1k and 64k
rows over 3 variables, in three modes measured in the same run:

* ``raw``: pre-encoded frames of the same sizes sent and received as bare ZeroMQ
  messages (no header encode/decode): the peer, what the socket alone gives;
* ``copy``: wire format, ``copy=True`` on both ends (pyzmq copies every frame);
* ``zero-copy``: wire format, ``copy=False`` on both ends (buffers handed to libzmq,
  arrays decoded with ``np.frombuffer`` over the received frames).

Rates are taken on the receiver between the end of a warm-up and the last message; each
mode runs ``--repeat`` times, modes taking turns, and the median run is reported with
the spread (max - min) / median, which is large on a 2-core box running both ends.  Note
that pyzmq copies frames below ``zmq.COPY_THRESHOLD`` (64 KiB) even with ``copy=False``,
so the 1k-row frames (24 KiB + 8 KiB) travel the same way in both wire modes.

    python bench/dataplane.py [--small N] [--large N] [--repeat K] [--out FILE]

Raw figures go to ``bench/results/dataplane.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq

from linkstream.containers.transport import Receiver, Sender
from linkstream.containers.wire import BatchMessage, encode
from linkstream.operators.batch import Batch

REPO = Path(__file__).resolve().parent.parent
MODES = ("raw", "copy", "zero-copy")
N_VARS = 3


def make_batch(rows: int) -> Batch:
    rng = np.random.default_rng(rows)
    cols = rng.integers(1, 1 << 40, size=(N_VARS, rows), dtype=np.int64)
    return Batch(tuple(f"v{i}" for i in range(N_VARS)), cols, np.ones(rows, dtype=np.int64))


def receive(mode: str, count: int, warmup: int) -> None:
    """Child process: bind, print the endpoint, receive ``count`` messages, print figures."""
    receiver = Receiver(copy=(mode == "copy"), rcvhwm=1000)
    print(receiver.endpoint, flush=True)
    checksum = 0
    t_start = time.perf_counter()
    for i in range(count):
        if i == warmup:
            t_start = time.perf_counter()
        if mode == "raw":
            frames = receiver.recv_frames(timeout=30.0)
            if frames is None:
                raise SystemExit(f"timed out after {i} messages")
            checksum += len(frames)
        else:
            msg = receiver.recv(timeout=30.0)
            if not isinstance(msg, BatchMessage):
                raise SystemExit(f"timed out or bad message after {i} messages: {receiver.stats}")
            checksum += int(msg.batch.counts[-1])  # touch the data as a consumer would
    elapsed = time.perf_counter() - t_start
    print(json.dumps({"elapsed_s": elapsed, "measured": count - warmup, "checksum": checksum}), flush=True)
    receiver.close()


def run(mode: str, rows: int, count: int, warmup: int) -> dict:
    child = subprocess.Popen(
        [sys.executable, __file__, "--_receive", mode, "--count", str(count), "--warmup", str(warmup)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    endpoint = child.stdout.readline().strip()
    batch = make_batch(rows)
    sender = Sender(endpoint, copy=(mode == "copy"), sndhwm=1000, linger_ms=30_000)
    frames = [bytes(f) for f in encode(BatchMessage("bench", "bench-task", 0, 0, batch))]
    msg_bytes = sum(len(f) for f in frames)
    t0 = time.perf_counter()
    for seq in range(count):
        if mode == "raw":
            ok = sender.offer_frames(frames, timeout=30.0)
        else:
            ok = sender.offer(BatchMessage("bench", "bench-task", 0, seq, batch), timeout=30.0)
        if not ok:
            raise SystemExit(f"back-pressure for 30 s at message {seq}")
    send_s = time.perf_counter() - t0
    line = child.stdout.readline()
    child.wait(timeout=60)
    sender.close()
    figures = json.loads(line)
    rate = figures["measured"] / figures["elapsed_s"]
    return {
        "mode": mode,
        "rows": rows,
        "vars": N_VARS,
        "messages": count,
        "warmup": warmup,
        "bytes_per_message": msg_bytes,
        "batches_per_s": rate,
        "MB_per_s": rate * msg_bytes / 1e6,
        "rows_per_s": rate * rows,
        "receiver_elapsed_s": figures["elapsed_s"],
        "sender_wall_s": send_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=20_000, help="messages of 1k rows per mode")
    ap.add_argument("--large", type=int, default=600, help="messages of 64k rows per mode")
    ap.add_argument("--repeat", type=int, default=3, help="runs per mode (the median is reported)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "dataplane.json"))
    ap.add_argument("--_receive", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._receive:
        receive(args._receive, args.count, args.warmup)
        return 0

    results = []
    print(
        f"{'rows':>7}{'mode':>11}{'KiB/msg':>9}{'batches/s':>11}{'MB/s':>9}{'Mrows/s':>9}{'vs raw':>8}{'spread':>9}"
    )
    summary: dict[str, dict[str, float]] = {"zero_copy_over_copy": {}, "zero_copy_over_raw": {}}
    for rows, count in ((1024, args.small), (65536, args.large)):
        samples: dict[str, list[dict]] = {m: [] for m in MODES}
        # Modes take turns so that drift of this 2-core box (frequency, noise) hits all alike.
        for _ in range(args.repeat):
            for mode in MODES:
                samples[mode].append(run(mode, rows, count, warmup=max(10, count // 20)))
        by_mode = {}
        for mode in MODES:
            runs = sorted(samples[mode], key=lambda r: r["batches_per_s"])
            r = dict(runs[len(runs) // 2])  # the median run
            r["samples_batches_per_s"] = [x["batches_per_s"] for x in samples[mode]]
            by_mode[mode] = r
            r["ratio_vs_raw"] = r["batches_per_s"] / by_mode["raw"]["batches_per_s"]
            results.append(r)
            spread = (runs[-1]["batches_per_s"] - runs[0]["batches_per_s"]) / r["batches_per_s"]
            print(
                f"{rows:>7}{mode:>11}{r['bytes_per_message'] / 1024:>9.1f}{r['batches_per_s']:>11.0f}"
                f"{r['MB_per_s']:>9.0f}{r['rows_per_s'] / 1e6:>9.1f}{r['ratio_vs_raw']:>8.2f}{spread:>8.0%}"
            )
        zc = by_mode["zero-copy"]["batches_per_s"] / by_mode["copy"]["batches_per_s"]
        summary["zero_copy_over_copy"][str(rows)] = zc
        summary["zero_copy_over_raw"][str(rows)] = by_mode["zero-copy"]["ratio_vs_raw"]
        print(f"{'':>7}{'zero-copy / copy':>20} x{zc:.2f}")
    machine = {
        "python": platform.python_version(),
        "pyzmq": zmq.__version__,
        "libzmq": zmq.zmq_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "copy_threshold": zmq.COPY_THRESHOLD,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine, "repeat": args.repeat, "summary": summary, "results": results}
    out.write_text(json.dumps(report, indent=1))
    print(f"raw figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
