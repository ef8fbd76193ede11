"""A separate process that publishes regions and prints their descriptor (one JSON line).

Usage: python region_server_proc.py TRANSPORT SEED — publishes ``ids`` (int64),
``offsets`` (uint32) and ``weights`` (float64) generated from SEED, prints the
descriptor, then serves until stdin closes.
"""

from __future__ import annotations

import sys

import numpy as np

from linkstream.rdma.regions import transport


def arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "ids": rng.integers(1, 1 << 40, size=100_003, dtype=np.int64),
        "offsets": np.cumsum(rng.integers(0, 5, size=5_001)).astype(np.uint32),
        "weights": rng.random(777),
        "empty": np.empty(0, dtype=np.int64),
    }


def main() -> None:
    name, seed = sys.argv[1], int(sys.argv[2])
    server = transport(name).server()
    for k, a in arrays(seed).items():
        server.publish(k, a)
    print(server.descriptor().to_json(), flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    server.close()


if __name__ == "__main__":
    main()
