"""What durability costs and how fast `linkstream run --state-dir` comes back after kill -9.

Three figures, all measured in this run:

1. **Recovery time**: a real server (`run --state-dir DIR --checkpoint-interval 1`) is fed
   by an HTTP pusher and followed by a result reader; it is killed with SIGKILL ``--kills``
   times, each time after ``--uptime`` seconds, and restarted at once on the same directory.
   The time from the kill to the first *new* result line the reader gets (resuming with
   ``?after=<last id>``) is the recovery time; p50 / p99 are printed (goal < 5 s).
2. **Throughput with checkpoints**: threads push one-triple elements into a live engine
   with the ingest log (waiting for durability after each batch, as the HTTP API does) for
   ``--seconds`` each with no checkpoints, checkpoints every 10 s and every 1 s; the rates
   are printed relative to no checkpoints (goal >= 0.9x).
3. **fsync cost per acknowledged push batch**: fsync time divided by acknowledged batches
   (group commit shares one fsync between concurrent batches), and per fsync.

Raw figures go to ``bench/results/recovery.json``.

Usage: ``python bench/recovery.py [--kills 5] [--seconds 12] [--threads 4] [--batch 1]``.

``python bench/recovery.py --cluster [...]`` measures the cluster instead (leader take-over
with checkpoints vs without, throughput with checkpoints): ``bench/cluster_checkpoints.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from linkstream.api.client import ApiError, Client
from linkstream.engine.live.checkpoint import Checkpointer
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from linkstream.store.checkpoints import open_checkpoints

EX = "http://example.org/"
RESULTS = Path(__file__).resolve().parent / "results"
QUERY = f"""PREFIX ex: <{EX}>
SELECT (COUNT(?x) AS ?n) (SUM(?v) AS ?sum) WHERE {{ STREAM ex:s0 [RANGE 10s SLIDE 1s] {{ ?x ex:p ?v }} }}"""


def _queries(streams: int) -> dict[str, str]:
    """Stateful queries over every stream: an aggregate and a self-join per stream."""
    out = {}
    for k in range(streams):
        s = "%ss%d" % (EX, k)
        out["agg%d" % k] = (
            f"SELECT (COUNT(?x) AS ?n) (SUM(?v) AS ?sum) WHERE {{ STREAM <{s}> [RANGE 30s SLIDE 1s] "
            f"{{ ?x <{EX}p> ?v }} }}"
        )
        out["join%d" % k] = (
            f"SELECT (COUNT(*) AS ?n) WHERE {{ STREAM <{s}> [RANGE 10s SLIDE 1s] "
            f"{{ ?x <{EX}p> ?v . ?y <{EX}p> ?v }} }}"
        )
    return out


def _pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]


# ----------------------------------------------------------------------------- throughput


def throughput(
    directory: str, interval: float | None, threads: int, batch: int, seconds: float
) -> dict[str, Any]:
    """Pushes for ``seconds`` into a logged engine; ``interval``: checkpoint period (None: none)."""
    live = LiveEngine(idle_ms=None, retention_ms=30_000)
    lg = IngestLog(os.path.join(directory, "state"))
    store = open_checkpoints(os.path.join(directory, "checkpoints"))
    live.recover(lg, checkpoints=store)
    for name, text in _queries(threads).items():
        live.register(text, name)
    ck = None
    if interval is not None:
        ck = live.checkpointer = Checkpointer(live, lg, store, interval).start()
    counts = [0] * threads
    acks = [0] * threads
    deadline = time.perf_counter() + seconds

    def feed(k: int) -> None:
        stream = "%ss%d" % (EX, k)
        i = 0
        while time.perf_counter() < deadline:
            for _ in range(batch):
                i += 1
                # 100 elements per second of event time: windows of 10-30 s hold thousands
                live.push(stream, 10 * i, [(f"<{stream}/x{i % 500}>", f"<{EX}p>", f'"{i % 97}"')])
            live.sync()
            counts[k] += batch
            acks[k] += 1

    t0 = time.perf_counter()
    ts = [threading.Thread(target=feed, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    st = live.status()
    lst = st["ingest_log"]
    live.close()
    n = sum(counts)
    fs = lg.fsync_seconds
    out = {
        "checkpoint_interval_s": interval,
        "elements": n,
        "seconds": round(dt, 3),
        "elements_per_s": round(n / dt, 1),
        "acknowledged_batches": sum(acks),
        "fsyncs": lst["fsyncs"],
        "fsync_ms_mean": lst["fsync_ms_mean"],
        "fsync_ms_per_ack": round(1000 * fs / max(1, sum(acks)), 4),
        "segments_truncated": lst["truncated_segments"],
    }
    if ck is not None:
        out["checkpoints"] = st["checkpoints"]
        out["checkpoint_bytes"] = store.bytes_written
    return out


# ----------------------------------------------------------------------------- recovery


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(state: str, port: int, errlog: Any) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "linkstream.cli", "run", "--port", str(port), "--state-dir", state]
    cmd += ["--checkpoint-interval", "1", "--idle-ms", "0", "--log-level", "info"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errlog)


class _Feed(threading.Thread):
    """Pushes one element per ``period`` seconds (event time +100 ms each), retrying while
    the server is down; ``acked`` counts 202 answers."""

    def __init__(self, url: str, period: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.url, self.period = url, period
        self.stop = threading.Event()
        self.i = 0
        self.acked = 0

    def run(self) -> None:
        with Client(self.url, timeout=5) as c:
            while not self.stop.is_set():
                i = self.i + 1
                o = f'"{i % 97}"^^<http://www.w3.org/2001/XMLSchema#integer>'
                try:
                    c.push_triples(EX + "s0", 100 * i, [(f"<{EX}x{i % 50}>", f"<{EX}p>", o)])
                except (httpx.HTTPError, ApiError):
                    time.sleep(0.02)
                    continue
                self.i = i
                self.acked += 1
                time.sleep(self.period)


class _Reader(threading.Thread):
    """Follows the query's JSON Lines from ``after``; notes the arrival time of each line."""

    def __init__(self, url: str, after: str | None) -> None:
        super().__init__(daemon=True)
        self.url, self.after = url, after
        self.lines: list[tuple[float, str]] = []  # (arrival, id)
        self.last: str | None = after

    def run(self) -> None:
        last_t, k = (None, 0)
        if self.after and ":" in self.after:
            last_t, k = (int(x) for x in self.after.split(":"))
        params = {"after": self.after} if self.after else {}
        try:
            with httpx.stream(
                "GET",
                f"{self.url}/queries/q/results.jsonl",
                params=params,
                timeout=httpx.Timeout(5, read=120),
            ) as r:
                for line in r.iter_lines():
                    if not line.strip():
                        continue
                    t = json.loads(line)["t"]
                    k = k + 1 if t == last_t else 1
                    last_t = t
                    self.last = "%d:%d" % (t, k)
                    self.lines.append((time.monotonic(), self.last))
        except httpx.HTTPError:
            pass


def _wait_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited with status %s" % proc.returncode)
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.02)
    raise RuntimeError("the server did not come up")


def recovery(kills: int, uptime: float) -> dict[str, Any]:
    """Kill -9 / restart cycles of a real server (see the module docstring)."""
    times: list[float] = []
    restart_up: list[float] = []
    with tempfile.TemporaryDirectory() as d, open(os.path.join(d, "server.log"), "ab") as errlog:
        state = os.path.join(d, "state")
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        proc = _start(state, port, errlog)
        _wait_up(url, proc)
        with Client(url) as c:
            c.register(QUERY, "q")
        feed = _Feed(url)
        feed.start()
        reader = _Reader(url, None)
        reader.start()
        try:
            for _ in range(kills):
                time.sleep(uptime)
                last = reader.last
                t_kill = time.monotonic()
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)
                reader.join(10)
                last = reader.last or last
                proc = _start(state, port, errlog)
                _wait_up(url, proc)
                restart_up.append(time.monotonic() - t_kill)
                reader = _Reader(url, last)
                reader.start()
                deadline = time.monotonic() + 60
                while not reader.lines and time.monotonic() < deadline:
                    time.sleep(0.01)
                if not reader.lines:
                    raise RuntimeError("no new result within 60 s of a restart")
                times.append(reader.lines[0][0] - t_kill)
        finally:
            feed.stop.set()
            proc.kill()
            proc.wait(30)
        errlog.flush()
        with open(os.path.join(d, "server.log"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    # the server's own restore + replay time (the rest of a restart is the interpreter and imports)
    inside = [float(x) for x in re.findall(r"replayed \d+ log records \(([\d.]+)s\)", text)[1:]]
    replayed = [int(x) for x in re.findall(r"replayed (\d+) log records", text)[1:]]
    return {
        "kills": kills,
        "uptime_s": uptime,
        "recovery_s": [round(x, 3) for x in times],
        "recovery_p50_s": round(_pct(times, 50), 3),
        "recovery_p99_s": round(_pct(times, 99), 3),
        "serving_again_p50_s": round(_pct(restart_up, 50), 3),
        "restore_and_replay_s": inside,
        "restore_and_replay_p50_s": round(_pct(inside, 50), 3),
        "records_replayed": replayed,
        "acknowledged_pushes": feed.acked,
    }


def main() -> None:
    if "--cluster" in sys.argv[1:]:  # the cluster's checkpoints: bench/cluster_checkpoints.py
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from cluster_checkpoints import main as cluster_main

        cluster_main([x for x in sys.argv[1:] if x != "--cluster"])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=5, help="kill -9 / restart cycles (default 5)")
    ap.add_argument("--uptime", type=float, default=3.0, help="seconds between restart and kill (default 3)")
    ap.add_argument("--seconds", type=float, default=12.0, help="seconds per throughput run (default 12)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the three runs (default 5)")
    ap.add_argument("--threads", type=int, default=4, help="pushing threads (default 4)")
    ap.add_argument("--batch", type=int, default=1, help="elements per acknowledged batch (default 1)")
    ap.add_argument("--dir", default=None, help="where the logs go (default: a temporary directory)")
    ap.add_argument("--out", default=str(RESULTS / "recovery.json"))
    a = ap.parse_args()

    configs = (("none", None), ("10s", 10.0), ("1s", 1.0))
    rounds: dict[str, list[dict[str, Any]]] = {k: [] for k, _ in configs}
    for k in range(a.rounds):  # interleaved, each round in another order: a change in load hits all
        for label, interval in configs[k % 3 :] + configs[: k % 3]:
            with tempfile.TemporaryDirectory(dir=a.dir) as d:
                r = throughput(d, interval, a.threads, a.batch, a.seconds)
            rounds[label].append(r)
            extra = ""
            if "checkpoints" in r:
                extra = ", %d checkpoints of %.1f MB" % (
                    r["checkpoints"]["checkpoints"],
                    r["checkpoint_bytes"] / 1e6 / max(1, r["checkpoints"]["checkpoints"]),
                )
            print(
                "checkpoints %-4s: %8.0f elements/s  (%d acks, %d fsyncs, %.3f ms per fsync, "
                "%.4f ms fsync per ack%s)"
                % (
                    label,
                    r["elements_per_s"],
                    r["acknowledged_batches"],
                    r["fsyncs"],
                    r["fsync_ms_mean"] or 0,
                    r["fsync_ms_per_ack"],
                    extra,
                )
            )
    # the median round of each configuration
    runs = {k: sorted(v, key=lambda r: r["elements_per_s"])[len(v) // 2] for k, v in rounds.items()}
    # each round's rate against the same round's run without checkpoints (drifts in the
    # machine's load cancel out), the median over the rounds
    per_round = {
        k: sorted(r["elements_per_s"] / n["elements_per_s"] for r, n in zip(rounds[k], rounds["none"]))
        for k in ("10s", "1s")
    }
    ratios = {k: round(v[len(v) // 2], 3) for k, v in per_round.items()}
    print(
        "throughput vs no checkpoints (median of per-round ratios): every 10 s %.3fx, every 1 s "
        "%.3fx (goal >= 0.9x); per round: %s"
        % (ratios["10s"], ratios["1s"], {k: [round(x, 3) for x in v] for k, v in per_round.items()})
    )
    rec = recovery(a.kills, a.uptime)
    print(
        "recovery (kill -9 -> first new result) over %d kills: p50 %.2f s, p99 %.2f s (goal < 5 s); "
        "serving again after p50 %.2f s, of which restore + log replay p50 %.3f s (records replayed: %s); %s"
        % (
            rec["kills"],
            rec["recovery_p50_s"],
            rec["recovery_p99_s"],
            rec["serving_again_p50_s"],
            rec["restore_and_replay_p50_s"],
            rec["records_replayed"],
            rec["recovery_s"],
        )
    )
    out = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "threads": a.threads,
        "batch": a.batch,
        "throughput": runs,
        "throughput_rounds": rounds,
        "throughput_ratio": ratios,
        "throughput_ratio_rounds": {k: [round(x, 3) for x in v] for k, v in per_round.items()},
        "fsync_ms_per_ack": runs["none"]["fsync_ms_per_ack"],
        "recovery": rec,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
