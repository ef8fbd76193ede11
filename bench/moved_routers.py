"""Live migration of routed queries: router unit restored vs shared join rebuilt (issue 17).

In one process, three replicas of one run (:class:`~linkstream.containers.replica.RunReplica`)
get the same elements (``--elements``, ten a second, each with a ``p`` and a ``q`` triple
about one of 50 subjects, values ``i mod P`` and ``i mod Q``: ``--values P:Q``) and tick
every second: ``old`` holds ``--queries`` two-pattern joins (one shared join + router;
``--counts``: over count windows ``[TRIPLES 20 r]`` instead of ``[RANGE r s]``), the two
others none.  After the last tick every query moves to both: to ``restore`` with the unit
of its routers (:meth:`RunReplica.snapshot_moving`, through the wire form,
:meth:`RunReplica.register_routed`), to ``rebuild`` without state
(:meth:`RunReplica.register`: the next tick builds the shared join from the stream
buffer), as a drain did before.  Measured per destination: process CPU time of the move
(decode + register) and of the next tick (which restores the units first), which must
give the same lines on both and on ``old``.  ``--rounds`` moves, alternating which
destination goes first.

Usage: ``python bench/moved_routers.py [--queries 30] [--elements 3000] [--ranges 60:300]
[--counts] [--values 97:13] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

from linkstream.containers.replica import RunReplica
from linkstream.operators.state import decode_state, encode_state
from linkstream.scheduler.runs import RunSpec

EX = "http://example.org/"
STREAM = EX + "s0"
INT = "http://www.w3.org/2001/XMLSchema#integer"
STEP = 1000


def _texts(n: int, lo: int, hi: int, counts: bool) -> dict[str, str]:
    out = {}
    for k in range(n):
        r = lo + k % (hi - lo + 1)
        window = f"[TRIPLES {20 * r}]" if counts else f"[RANGE {r}s STEP 1s]"
        out[f"q{k}"] = (
            f"SELECT (COUNT(?w) AS ?n) (SUM(?v) AS ?sum) WHERE {{ STREAM <{STREAM}> {window} "
            f"{{ ?x <{EX}p> ?v . ?x <{EX}q> ?w }} }}"
        )
    return out


def _element(replica: RunReplica, i: int, values: tuple[int, int]) -> np.ndarray:
    x = f"<{EX}x{i % 50}>"
    v, w = i % values[0], i % values[1]
    terms = [x, f"<{EX}p>", f'"{v}"^^<{INT}>', x, f"<{EX}q>", f'"{w}"^^<{INT}>']
    return np.asarray(replica.engine.dictionary.encode_many(terms), dtype=np.int64).reshape(-1, 3)


def one_round(a: argparse.Namespace, texts: dict[str, str], first: str) -> dict[str, dict[str, float]]:
    spec = RunSpec("bench", "tcp://127.0.0.1:1", "http://localhost/", STEP, (), (STREAM,), (None,), {})
    old, dst = RunReplica(spec), {"restore": RunReplica(spec), "rebuild": RunReplica(spec)}
    for name, text in texts.items():
        old.register(name, text)
    everyone = [old, *dst.values()]
    k = 0
    t0 = 1_700_000_000_000
    for i in range(a.elements):
        t = t0 + 100 * i
        while (t0 // STEP + k + 1) * STEP <= t:  # every report time before this element
            k += 1
            c = (t0 // STEP + k) * STEP
            for r in everyone:
                r.tick(k, c, list(texts) if r is old else [])
        for r in everyone:
            r.engine.ingest(STREAM, t, _element(r, i, a.values))
    states = {n: encode_state(old.snapshot_moving(n, "restore")) for n in texts}
    units = sum(1 for n in texts if decode_state(states[n]).header.get("parts"))
    nxt, c_next = k + 1, (t0 // STEP + k + 1) * STEP
    want = old.tick(nxt, c_next, list(texts)).lines
    out: dict[str, dict[str, float]] = {}
    for side in (first, "rebuild" if first == "restore" else "restore"):
        r = dst[side]
        cpu0 = time.process_time()
        for name, text in texts.items():
            if side == "restore":
                st = decode_state([bytes(memoryview(f)) for f in states[name]])
                r.register_routed(name, text, st)
            else:
                r.register(name, text)
        cpu1 = time.process_time()
        ticked = r.tick(nxt, c_next, list(texts))  # (restores the units first)
        cpu2 = time.process_time()
        if ticked.lines != want:
            raise SystemExit(f"{side}: the next tick's lines differ from the old replica's")
        out[side] = {
            "move_cpu_s": cpu1 - cpu0,
            "tick_cpu_s": cpu2 - cpu1,
            "restored": float(sum(1 for w in ticked.moved.values() if not w)),
        }
    out["restore"]["units_shipped"] = float(units)
    out["restore"]["state_bytes"] = float(sum(memoryview(f).nbytes for fs in states.values() for f in fs))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--elements", type=int, default=3000)
    ap.add_argument("--ranges", default="60:300", help="window ranges in seconds, LO:HI (default 60:300)")
    ap.add_argument("--counts", action="store_true", help="count windows [TRIPLES 20 r] instead")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--values",
        default="97:13",
        help="the p and q triples' values are i mod these, P:Q (default 97:13, as bench/cluster_checkpoints.py; "
        "larger: more distinct triples, a larger shared join)",
    )
    a = ap.parse_args(argv)
    p, _, q = a.values.partition(":")
    a.values = (int(p), int(q or p))
    lo, _, hi = a.ranges.partition(":")
    texts = _texts(a.queries, int(lo), int(hi or lo), a.counts)
    rows: dict[str, list[dict[str, float]]] = {"restore": [], "rebuild": []}
    for k in range(a.rounds):
        got = one_round(a, texts, "restore" if k % 2 == 0 else "rebuild")
        for side, v in got.items():
            rows[side].append(v)
        print(
            "round %d: restore move %.3f + tick %.3f CPU s (%d of %d restored), rebuild move %.3f + tick %.3f"
            % (
                k,
                got["restore"]["move_cpu_s"],
                got["restore"]["tick_cpu_s"],
                got["restore"]["restored"],
                len(texts),
                got["rebuild"]["move_cpu_s"],
                got["rebuild"]["tick_cpu_s"],
            ),
            flush=True,
        )
    tot = {s: median(r["move_cpu_s"] + r["tick_cpu_s"] for r in rows[s]) for s in rows}
    last = rows["restore"][-1]
    print(
        "median move + next tick CPU: restored %.3f s, rebuilt %.3f s (%.2fx); %d units shipped for %d "
        "queries, %d bytes of state" % (
            tot["restore"], tot["rebuild"], tot["rebuild"] / max(tot["restore"], 1e-9),
            last["units_shipped"], len(texts), last["state_bytes"],
        )
    )  # fmt: skip


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
