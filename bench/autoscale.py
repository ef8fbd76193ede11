#!/usr/bin/env python3
"""The autoscaler under a step load: tick lag and container count over time.

A local cluster (its own ZooKeeper, one ``linkstream run --zk`` coordinator, one
container) serves one continuous query (``[RANGE 1s SLIDE 20ms]``, a report every 20 ms of
event time).  ``linkstream autoscaler --autoscale 1:MAX --autoscale-driver local`` runs
next to it.  A pusher sends elements through the HTTP API in three phases:

* ``--low`` seconds at 10 elements/s, 100 ms apart (event time as fast as the wall clock),
* ``--high`` seconds at ``--high-rate`` elements/s, ``--high-step-ms`` apart (30 s of event
  time per second by default: more report times than the cluster evaluates on a 2-core
  machine, so the tick lag grows),
* then nothing, for up to ``--tail`` seconds, until the autoscaler is back at 1 container.

Every ``--sample`` seconds it records the container count (membership), the leader's
tick lag and queued elements (its load node, :mod:`linkstream.scheduler.load`) and
prints them as a table; ``--png`` writes a plot (matplotlib: ``pip install matplotlib``;
without it only the table is printed).  The autoscaler's own log (its decisions with
their reasons) is copied next to the plot (``.log``).

    python bench/autoscale.py [--max 3] [--png bench-autoscale.png]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from linkstream.api.client import Client  # noqa: E402
from linkstream.cluster.localcluster import LocalCluster  # noqa: E402
from linkstream.scheduler.load import read_loads  # noqa: E402

EX = "http://ex.org/"
STREAM = EX + "load"
QUERY = f"""SELECT ?s (COUNT(?v) AS ?n)
WHERE {{ STREAM <{STREAM}> [RANGE 1s SLIDE 20ms] {{ ?s <{EX}v> ?v . }} }}
GROUP BY ?s
"""
T0 = 1_000_000


class Pusher(threading.Thread):
    """Pushes ``rate`` elements per second (at most: one HTTP request each), ``step_ms`` of event
    time apart."""

    def __init__(self, client: Client) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.step_ms = 100
        self.rate = 10.0
        self.halt = threading.Event()
        self.sent = 0
        self.t = T0
        self.errors: list[str] = []

    def run(self) -> None:
        due = time.monotonic()
        while not self.halt.is_set():
            body = "".join(f'<{EX}s{j}> <{EX}v> "{self.sent}" .\n' for j in range(3))
            try:
                self.client.push(STREAM, body, t=self.t)
            except Exception as exc:
                self.errors.append(repr(exc))
                return
            self.sent += 1
            self.t += self.step_ms
            due = max(due + 1.0 / self.rate, time.monotonic() - 1.0)
            self.halt.wait(max(0.0, due - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max", type=int, default=3, help="autoscaler maximum (default 3)")
    ap.add_argument("--low", type=float, default=10.0, help="seconds of low load (default 10)")
    ap.add_argument("--high", type=float, default=10.0, help="seconds of high load (default 10)")
    ap.add_argument(
        "--high-step-ms",
        type=int,
        default=300,
        help="event time between elements of the high load (default 300)",
    )
    ap.add_argument(
        "--high-rate",
        type=float,
        default=100.0,
        help="elements per second of the high load (default 100)",
    )
    ap.add_argument(
        "--tail", type=float, default=120.0, help="seconds to wait for the scale-in (default 120)"
    )
    ap.add_argument("--sample", type=float, default=0.5, help="sampling interval (s)")
    ap.add_argument("--target-lag-ms", type=float, default=2000.0, help="the autoscaler's target lag")
    ap.add_argument(
        "--png", default="bench-autoscale.png", help="plot file (default %(default)s; '' for none)"
    )
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="linkstream-autoscale-"))
    cluster = LocalCluster(work / "cluster", session_timeout=4.0, capacity=4)
    rows: list[tuple[float, str, int, float | None, int | None]] = []
    try:
        cluster.start(1, 1)
        url = next(iter(cluster.api_urls(timeout=30).values()))
        api = Client(url, timeout=60)
        deadline = time.monotonic() + 30
        while api.status().get("role") != "leader":
            if time.monotonic() > deadline:
                raise RuntimeError("no leader")
            time.sleep(0.2)
        api.register(QUERY, "load")
        cluster.start_autoscaler(
            f"1:{args.max}",
            "local",
            [
                "--target-lag-ms", str(args.target_lag_ms), "--interval", "0.5",
                "--out-after", "2", "--out-cooldown", "3", "--in-after", "5", "--in-cooldown", "5",
                "--busy-high", "0.95", "--busy-low", "0.9",
            ],
        )  # fmt: skip
        zk = cluster.client()
        pusher = Pusher(api)
        t0 = time.monotonic()

        def sample(phase: str) -> tuple[int, float | None]:
            n = len(cluster.members())
            leader = read_loads(zk, cluster.state.root).get("leader") or {}
            lag, queued = leader.get("lag_ms"), leader.get("queued")
            rows.append((time.monotonic() - t0, phase, n, lag, queued))
            print(
                f"{rows[-1][0]:7.1f}  {phase:<5} {n:>3}  {lag if lag is not None else '-':>8}  {queued}",
                flush=True,
            )
            return n, lag

        print("      s  phase  containers  lag_ms  queued")
        pusher.start()
        end = t0 + args.low
        while time.monotonic() < end:
            sample("low")
            time.sleep(args.sample)
        pusher.step_ms, pusher.rate = args.high_step_ms, args.high_rate
        end = time.monotonic() + args.high
        while time.monotonic() < end:
            sample("high")
            time.sleep(args.sample)
        pusher.halt.set()
        pusher.join(10)
        end = time.monotonic() + args.tail
        while time.monotonic() < end:
            n, lag = sample("idle")
            if n == 1 and lag is not None and lag < 500 and rows[-1][0] > args.low + args.high + 10:
                break
            time.sleep(args.sample)
        zk.stop()
        zk.close()
        peak = max(r[2] for r in rows)
        lags = [r[3] for r in rows if r[3] is not None]
        print(
            f"\npushed {pusher.sent} elements; containers 1 -> {peak} -> {rows[-1][2]}; "
            f"max lag {max(lags) if lags else '-'} ms; {rows[-1][0]:.0f} s"
        )
        log = cluster.dir / "logs" / "autoscaler.log"
        decisions = [
            line.split(": ", 1)[1] for line in log.read_text().splitlines() if " autoscaler: " in line
        ]
        print("autoscaler decisions and drains:")
        for line in decisions:
            if not line.startswith("autoscaler: hold"):
                print("  " + line)
        if args.png:
            shutil.copy(log, Path(args.png).with_suffix(".log"))
            plot(rows, args.png, args.target_lag_ms, args.max)
    finally:
        LocalCluster.load(cluster.dir).stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def plot(rows: list, path: str, target: float, top: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    t = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(t, [(r[3] or 0) / 1000 for r in rows], color="tab:red", label="tick lag (s of event time)")
    ax.axhline(target / 1000, color="tab:red", linestyle=":", label="target lag")
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("tick lag (s)")
    for phase, color in (("high", "0.9"),):
        ts = [r[0] for r in rows if r[1] == phase]
        if ts:
            ax.axvspan(min(ts), max(ts), color=color, label="high load")
    ax2 = ax.twinx()
    ax2.step(t, [r[2] for r in rows], where="post", color="tab:blue", label="containers")
    ax2.set_ylabel("containers")
    ax2.set_ylim(0, top + 1)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper right")
    ax.set_title("linkstream autoscaler under a step load (local driver)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
