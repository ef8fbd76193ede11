"""A producer process for data-plane tests: sends N batches, heartbeats, then end-of-stream.

    python tests/containers/producer_proc.py --endpoint tcp://127.0.0.1:PORT --count N
        [--partition P] [--source NAME] [--curve-secret F --curve-server F]

Batch ``seq`` of partition ``P`` has ``rows(seq)`` rows over ``("s", "o")`` with
``s == seq`` and ``o == P * 1_000_000 + arange(rows)``, counts alternating ``+1 / -1``
(see :func:`expected_batch`, which the tests use to check the content).  A heartbeat
with watermark ``seq * 10`` follows every 100th batch.  The sender's close lingers up to
10 s to flush what is still queued.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from linkstream.containers.transport import CurveKeys, Sender
from linkstream.containers.wire import BatchMessage, EndOfStream, Heartbeat
from linkstream.operators.batch import Batch

VARS = ("s", "o")


def rows(seq: int) -> int:
    """Rows of batch ``seq`` (varies so frame sizes vary)."""
    return 1 + (seq * 37) % 200


def expected_batch(seq: int, partition: int) -> Batch:
    """The batch the producer sends as ``seq`` of ``partition``."""
    n = rows(seq)
    cols = np.empty((2, n), dtype=np.int64)
    cols[0] = seq
    cols[1] = partition * 1_000_000 + np.arange(n)
    counts = np.where(np.arange(n) % 2 == 0, 1, -1).astype(np.int64)
    return Batch(VARS, cols, counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--source", default="producer")
    parser.add_argument("--curve-secret", help="this client's .key_secret certificate")
    parser.add_argument("--curve-server", help="the server's .key certificate")
    args = parser.parse_args(argv)

    keys = None
    if args.curve_secret:
        keys = CurveKeys.from_files(args.curve_secret, server_public_file=args.curve_server)
    sender = Sender(args.endpoint, curve_keys=keys, sndhwm=100, linger_ms=10_000)
    try:
        for seq in range(args.count):
            batch = expected_batch(seq, args.partition)
            sender.send(
                BatchMessage(args.source, f"{args.source}-task", 1, seq, batch, watermark=seq * 10),
                timeout=10.0,
            )
            if seq % 100 == 99:
                sender.send(Heartbeat(args.source, args.partition, seq * 10), timeout=10.0)
        sender.send(EndOfStream(args.source, args.partition, args.count), timeout=10.0)
    finally:
        sender.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
