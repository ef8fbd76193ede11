"""Cost of CURVE on a store node's TCP transport: block reads, plaintext vs CURVE, same run.

One :class:`~linkstream.rdma.tcp.TcpServer` per mode in this process (a background thread,
as in a store node) publishes one int64 array; a :class:`~linkstream.rdma.tcp.TcpReader`
reads ``--reads`` random 4096-element blocks (32 KiB, the remote store's block) one round
trip each, then ``--batch`` blocks per round trip.  The CURVE server admits the reader's
key through an allow-list (a ZAP handler, as a store node's), the reader holds the
server's public key.  Prints reads/s and MiB/s per mode and the CURVE / plaintext ratio;
raw figures go to ``bench/results/store_curve.json``.

    .venv/bin/python bench/store_curve.py [--reads 3000] [--batch 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from linkstream.containers.transport import CurveKeys
from linkstream.rdma.tcp import TcpReader, TcpServer

BLOCK = 4096
RESULTS = Path(__file__).resolve().parent / "results"


def run(mode: str, array: np.ndarray, reads: int, batch: int, seed: int) -> dict[str, float]:
    server_keys = reader_keys = None
    if mode == "curve":
        spub, ssec = CurveKeys.keypair()
        cpub, csec = CurveKeys.keypair()
        server_keys = CurveKeys(spub, ssec, authorized_clients=frozenset({cpub}))
        reader_keys = CurveKeys(cpub, csec, server_public=spub)
    server = TcpServer("tcp://127.0.0.1:*", curve=server_keys)
    try:
        server.publish("a", array)
        reader = TcpReader(server.descriptor(), timeout_s=10.0, curve=reader_keys)
        try:
            rng = np.random.default_rng(seed)
            nblocks = len(array) // BLOCK
            starts = rng.integers(0, nblocks, reads) * BLOCK
            reader.read("a", 0, 1)  # handshake outside the timing
            t0 = time.perf_counter()
            for s in starts.tolist():
                got = reader.read("a", s, s + BLOCK)
            single = time.perf_counter() - t0
            assert np.array_equal(got, array[s : s + BLOCK])
            t0 = time.perf_counter()
            for k in range(0, reads, batch):
                reader.read_many([("a", s, s + BLOCK) for s in starts[k : k + batch].tolist()])
            batched = time.perf_counter() - t0
        finally:
            reader.close()
    finally:
        server.close()
    mib = reads * BLOCK * 8 / (1 << 20)
    return {
        "reads_per_s": reads / single,
        "mib_per_s": mib / single,
        "batched_mib_per_s": mib / batched,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=3000, help="blocks read per mode and round (default 3000)")
    ap.add_argument("--batch", type=int, default=16, help="blocks per round trip, batched phase (default 16)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over both modes (default 3)")
    args = ap.parse_args()
    array = np.arange(1 << 21, dtype=np.int64)  # 16 MiB
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "curve": []}
    for r in range(args.rounds):
        for mode in ("plain", "curve") if r % 2 == 0 else ("curve", "plain"):
            runs[mode].append(run(mode, array, args.reads, args.batch, seed=r))
    med = {m: {k: float(np.median([x[k] for x in v])) for k in v[0]} for m, v in runs.items()}
    print(f"{args.reads} random {BLOCK}-element blocks per mode, {args.rounds} rounds (medians)")
    print(f"{'mode':<6} {'reads/s':>9} {'MiB/s':>8} {'MiB/s x' + str(args.batch):>11}")
    for m, x in med.items():
        print(f"{m:<6} {x['reads_per_s']:>9.0f} {x['mib_per_s']:>8.1f} {x['batched_mib_per_s']:>11.1f}")
    ratio = {k: med["curve"][k] / med["plain"][k] for k in med["plain"]}
    print(
        f"curve / plaintext: reads/s {ratio['reads_per_s']:.2f}, MiB/s {ratio['mib_per_s']:.2f}, "
        f"batched MiB/s {ratio['batched_mib_per_s']:.2f}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "store_curve.json"
    out.write_text(json.dumps({"args": vars(args), "runs": runs, "median": med, "ratio": ratio}, indent=1))
    print(f"raw figures: {out}")


if __name__ == "__main__":
    main()
