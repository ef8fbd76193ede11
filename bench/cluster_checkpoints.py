"""Cluster checkpoints: leader take-over time and push throughput (``bench/recovery.py --cluster``).

Real processes: per configuration a cluster of its own (its own ZooKeeper, secure as by
default) with two API coordinators ``run --zk --state-dir DIR`` on one shared directory and two containers.

1. **Take-over time with checkpoints vs without** (same run): ``--queries`` aggregates over one
   stream (RANGE 10-30 s, STEP 1 s; `--ranges LO:HI`) are registered, ``--elements`` elements are pushed (10 per
   second of event time, ``--batch`` per timestamped N-Quads request: a run of
   ``elements / 10`` report times); once the leader has fired every report time (a run that
   keeps up) and 1.5 checkpoint intervals later, the leader is killed with SIGKILL and pushes
   go on to the survivor.  Take-over time = kill -> the first *new* result line a JSON Lines reader on
   the survivor receives.  Without checkpoints (``--checkpoint-interval 0``) the new leader
   replays the whole shared log (every report time of the run, one tick on every container
   each); with checkpoints every 1 s it restores the latest one and replays the suffix.  The
   survivor's ``/status`` ``takeover`` gives the records replayed and the restore + replay time.
2. **Throughput with checkpoints every 1 s and 10 s vs none**: the same queries on a
   one-coordinator cluster, ``--tp-elements`` pushed as fast as they are acknowledged; the
   rate is elements per second until the leader fired the last report time (processed, not
   only logged: the checkpoints' barrier copies run on the same worker).  Interleaved
   rounds, each round's rate against the same round's run without checkpoints (goal >= 0.9x).

``--late F`` (time windows): the other queries step 2 s, and the fraction ``F`` of them
with the narrowest ranges (step 1 s) is registered only after half the elements were
pushed, when the windows have started sliding: the containers then hold a second window
(range r, step 1 s) beside the first (range R, step 2 s) where a fresh plan of all of them
grows one (R + 1 s, step 1 s).  The routed plan depends on the order queries came, and a
new leader's containers plan them all at once: the take-over's restored / rebuilt counts
show whether the router units fit (issue 17: units carry their plans since session 18).

``--container-kill N`` (issue 17, restored and fed forward): N rounds, each alternating
two one-coordinator clusters, with checkpoints every 1 s (``restore``: a dead container's
queries restored from the last complete checkpoint on their new owner and fed forward) and
without (``rebuild``: the new owner rebuilds them from the stream buffers).  After
``--elements`` pushed and a checkpoint, the container answering ``q0`` is killed with
SIGKILL; pushes go on.  Recovery time = kill -> the first new ``q0`` line; take-over CPU =
the surviving container's CPU time (``/proc``) from the kill until the driver names it
``q0``'s answerer, or takes its first answer of ``q0`` when it named it before its ready
announcement came (the recomputes of the owed reports, the restore or rebuild, the ticks
meanwhile).  The survivor's log gives the restore's own CPU and the report times it
recomputed (and their wall time).

Raw figures go to ``bench/results/cluster_checkpoints.json``.

Usage: ``python bench/recovery.py --cluster [--elements 3000] [--queries 20] [--rounds 2]``
(or ``python bench/cluster_checkpoints.py ...``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from linkstream.cluster.localcluster import LocalCluster

EX = "http://example.org/"
STREAM = EX + "s0"
RESULTS = Path(__file__).resolve().parent / "results"
T0 = 1_700_000_000_000  # ms
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"
XSD = "http://www.w3.org/2001/XMLSchema#"


#: ``--routed``: two-pattern joins (one shared join + router for all of them) instead of
#: single-pattern aggregates, and elements with a second triple for them to join
#: ``--counts``: those joins over count windows (``[TRIPLES n]``, n = 20 x the range in
#: seconds: an element has two triples, ten elements a second), whose routers' units hold
#: buffer positions rebased by the restoring container
#: ``--step``: the time windows' STEP in seconds (``--late``'s others: twice that)
MODE: dict[str, Any] = {"routed": False, "counts": False, "ranges": (10, 30), "step": 1}


def queries(n: int, step2: frozenset[int] = frozenset()) -> list[dict[str, str]]:
    """The bench's queries (``step2``: those of STEP 2 s, by number; the others 1 s)."""
    lo, hi = MODE["ranges"]
    out = []
    for k in range(n):
        rng = lo + k % (hi - lo + 1)
        step = MODE["step"] * (2 if k in step2 else 1)
        text = (
            f"SELECT (COUNT(?x) AS ?n) (SUM(?v) AS ?sum) WHERE {{ STREAM <{STREAM}> "
            f"[RANGE {rng}s STEP {step}s] {{ ?x <{EX}p> ?v }} }}"
        )
        if MODE["routed"]:
            window = f"[TRIPLES {20 * rng}]" if MODE["counts"] else f"[RANGE {rng}s STEP {step}s]"
            text = (
                f"SELECT (COUNT(?w) AS ?n) (SUM(?v) AS ?sum) WHERE {{ STREAM <{STREAM}> "
                f"{window} {{ ?x <{EX}p> ?v . ?x <{EX}q> ?w }} }}"
            )
        out.append({"query": text, "name": f"q{k}"})
    return out


def body(first: int, n: int) -> str:
    """Elements ``first .. first+n-1`` (event time ``T0 + 100 ms * i``) as timestamped N-Quads."""
    lines = []
    for i in range(first, first + n):
        ts = datetime.fromtimestamp((T0 + 100 * i) / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        g = f"<{EX}e{i}>"
        lines.append(f'{g} {PROV} "{ts[:-3]}Z"^^<{XSD}dateTime> .\n')
        lines.append(f'<{EX}x{i % 50}> <{EX}p> "{i % 97}"^^<{XSD}integer> {g} .\n')
        if MODE["routed"]:
            lines.append(f'<{EX}x{i % 50}> <{EX}q> "{i % 13}"^^<{XSD}integer> {g} .\n')
    return "".join(lines)


def push(http: httpx.Client, urls: list[str], first: int, n: int, deadline_s: float = 120.0) -> None:
    """One acknowledged request (503 / refused while a new leader takes over: retried)."""
    data = body(first, n).encode("utf-8")
    deadline = time.monotonic() + deadline_s
    while True:
        for url in urls:
            try:
                r = http.post(
                    f"{url}/streams/{quote(STREAM, safe='')}",
                    content=data,
                    headers={"Content-Type": "application/n-quads", "Idempotency-Key": f"b{first}"},
                )
            except httpx.TransportError:
                continue
            if r.status_code == 202:
                return
            if r.status_code not in (429, 502, 503):
                raise SystemExit(f"push refused: {r.status_code} {r.text[:300]}")
        if time.monotonic() > deadline:
            raise SystemExit("no coordinator took a push")
        time.sleep(0.05)


def roles(urls: dict[str, str]) -> dict[str, str]:
    out = {}
    for cid, url in urls.items():
        try:
            out[cid] = httpx.get(url + "/status", timeout=5).json().get("role", "?")
        except (httpx.HTTPError, ValueError):
            out[cid] = "down"
    return out


def start(base: Path, label: str, interval: float, coordinators: int) -> LocalCluster:
    state = base / label / "state"
    cluster = LocalCluster(base / label / "cluster", session_timeout=2.0)
    cluster.start(0, coordinators=0)
    args = ["--idle-ms", "0", "--state-dir", str(state), "--checkpoint-interval", str(interval)]
    for _ in range(coordinators):
        cluster.start_coordinator(args)
    cluster.add_containers(2)
    return cluster


def leader_and_standby(
    cluster: LocalCluster, timeout: float = 60.0
) -> tuple[str, str | None, dict[str, str]]:
    deadline = time.monotonic() + timeout
    while True:
        urls = cluster.api_urls(timeout=timeout)
        rs = roles(urls)
        leaders = [c for c, r in rs.items() if r == "leader"]
        standbys = [c for c, r in rs.items() if r == "standby"]
        if len(leaders) == 1 and (standbys or len(urls) == 1):
            return leaders[0], (standbys[0] if standbys else None), urls
        if time.monotonic() > deadline:
            raise SystemExit(f"no leader: {rs}")
        time.sleep(0.2)


def last_due(elements: int) -> int:
    """The last report time (STEP ``--step`` s) the elements ``0 .. elements-1`` fire."""
    step = 1000 * (1 if MODE["counts"] else MODE["step"])
    return (T0 + 100 * (elements - 1)) // step * step


def caught_up(url: str, elements: int, timeout: float = 600.0) -> float:
    """Waits until the leader fired every report time of the elements pushed; returns when."""
    deadline = time.monotonic() + timeout
    want = last_due(elements)
    while True:
        st = httpx.get(url + "/status", timeout=30).json()
        if (st.get("last_report") or 0) >= want:
            return time.perf_counter()
        if time.monotonic() > deadline:
            raise SystemExit(
                f"the leader did not catch up within {timeout:g}s: {st.get('last_report')} < {want}"
            )
        time.sleep(0.05)


def register(url: str, qs: list[dict[str, str]]) -> None:
    deadline = time.monotonic() + 60
    while True:
        r = httpx.post(url + "/queries", json=qs, timeout=120)
        if r.status_code == 201:
            return
        if r.status_code != 503 or time.monotonic() > deadline:
            raise SystemExit(f"registration failed: {r.status_code} {r.text[:300]}")
        time.sleep(0.5)


class Reader(threading.Thread):
    """Follows ``q0``'s JSON Lines on one coordinator; notes each line's arrival time."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.lines: list[tuple[float, int]] = []  # (arrival, report time)

    def run(self) -> None:
        try:
            with httpx.stream(
                "GET", f"{self.url}/queries/q0/results.jsonl", timeout=httpx.Timeout(5, read=600)
            ) as r:
                for line in r.iter_lines():
                    t = json.loads(line).get("t") if line.strip() else None
                    if t is not None:  # (not a gap line)
                        self.lines.append((time.monotonic(), int(t)))
        except httpx.HTTPError:
            pass


def takeover(base: Path, label: str, interval: float, a: argparse.Namespace) -> dict[str, Any]:
    cluster = start(base, label, interval, 2)
    try:
        leader, standby, urls = leader_and_standby(cluster)
        assert standby is not None
        # --late: the narrowest ranges (query k's range grows with k % (HI - LO + 1)) come late
        span = MODE["ranges"][1] - MODE["ranges"][0] + 1
        order = sorted(range(a.queries), key=lambda k: (k % span, k))
        n_late = round(a.late * a.queries)
        qs = queries(a.queries, frozenset(order[n_late:]) if n_late else frozenset())
        late = [qs[k] for k in order[:n_late]]
        register(urls[standby], [q for q in qs if q not in late])
        leader, standby, urls = leader_and_standby(cluster)
        assert standby is not None
        reader = Reader(urls[standby])  # (q0: with --late, started once q0 is registered)
        if not late:
            reader.start()
        t0 = time.perf_counter()
        with httpx.Client(timeout=120) as http:
            for first in range(0, a.elements, a.batch):
                if late and first >= a.elements // 2:  # the windows have started: planned apart
                    caught_up(urls[leader], first - 10)  # (a step of 2 s fires even seconds only)
                    register(urls[standby], late)
                    late = []
                    reader.start()
                push(http, [urls[leader]], first, a.batch)
            push_s = time.perf_counter() - t0
            caught_up(urls[leader], a.elements)  # a run that keeps up: every report time fired
            time.sleep(1.5 * interval)  # and a checkpoint after it
            before = httpx.get(urls[leader] + "/status", timeout=10).json()
            seen = max((t for _, t in reader.lines), default=None)
            t_kill = time.monotonic()
            cluster.kill(leader, signal.SIGKILL)
            nxt = a.elements
            while time.monotonic() - t_kill < 300:
                new = [x for x in reader.lines if x[0] > t_kill and (seen is None or x[1] > seen)]
                if new:
                    break
                push(http, [urls[standby]], nxt, a.batch)
                nxt += a.batch
                time.sleep(0.05)
            else:
                raise SystemExit("no new result within 300 s of the kill")
        after = httpx.get(urls[standby] + "/status", timeout=10).json()
        return {
            "checkpoint_interval_s": interval,
            "elements_before_kill": a.elements,
            "report_times_before_kill": a.elements // 10,
            "push_seconds": round(push_s, 3),
            "log_records_at_kill": before.get("ingest_log", {}).get("next_seq"),
            "log_segments_truncated": before.get("ingest_log", {}).get("truncated_segments"),
            "checkpoints_before_kill": (before.get("checkpoints") or {}).get("checkpoints", 0),
            "takeover_s": round(new[0][0] - t_kill, 3),
            "takeover": after.get("takeover"),
        }
    finally:
        cluster.stop()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc``)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def container_kill(base: Path, label: str, interval: float, a: argparse.Namespace) -> dict[str, Any]:
    """``--container-kill``: one round of one configuration (see the module docstring)."""
    import re

    from linkstream.cluster.driverstate import task_id
    from linkstream.scheduler.assignment import AssignmentTable

    cluster = start(base, label, interval, 1)
    try:
        leader, _, urls = leader_and_standby(cluster)
        url = urls[leader]
        register(url, queries(a.queries))
        reader = Reader(url)
        reader.start()
        with httpx.Client(timeout=120) as http:
            for first in range(0, a.elements, a.batch):
                push(http, [url], first, a.batch)
            caught_up(url, a.elements)
            time.sleep(1.5 * interval)  # and a checkpoint after it
            zk = cluster.client()
            try:
                victim = AssignmentTable(zk).all()[task_id("q0")].container
            finally:
                zk.stop()
                zk.close()
            assert victim is not None
            survivor = next(c for c in cluster.names("container") if c != victim)
            seen = max((t for _, t in reader.lines), default=None)
            log = cluster.dir / "logs" / f"{leader}.log"
            mark = len(log.read_text())
            cpu0 = _cpu_s(cluster.pid(survivor))
            t_kill = time.monotonic()
            cluster.kill(victim, signal.SIGKILL)
            nxt, first_new, ready = a.elements, None, None
            while time.monotonic() - t_kill < 300 and (first_new is None or ready is None):
                new = [x for x in reader.lines if x[0] > t_kill and (seen is None or x[1] > seen)]
                if new and first_new is None:
                    first_new = new[0][0] - t_kill
                if ready is None and f"q0 answered by {survivor}" in log.read_text()[mark:]:
                    ready = time.monotonic() - t_kill
                    cpu = _cpu_s(cluster.pid(survivor)) - cpu0
                t_push = time.monotonic()
                push(http, [url], nxt, a.batch)
                nxt += a.batch
                # --pace: event time goes at the wall clock's pace (a report of STEP s every s seconds)
                time.sleep(max(0.05, 0.1 * a.batch - (time.monotonic() - t_push)) if a.pace else 0.05)
            if first_new is None or ready is None:
                raise SystemExit("no new result or no new answerer within 300 s of the kill")
        text = (cluster.dir / "logs" / f"{survivor}.log").read_text()
        restores = [float(x) for x in re.findall(r"fed them forward to .* \(cpu ([0-9.]+)s\)", text)]
        kept = [int(x) for x in re.findall(r"restored-forward path: (\d+) of", text)]
        rebuilt = re.findall(r"registered (\S+) \(after tick [1-9]", text)  # from its buffers, after the kill
        # report times the survivor evaluated in scratch engines (recomputes of the owed reports)
        redone = re.findall(r": recomputed .* elements \((\d+) report times\) in ([0-9.]+)s", text)
        return {
            "label": label,
            "checkpoint_interval_s": interval,
            "victim": victim,
            "first_new_result_s": round(first_new, 3),
            "answerer_switched_s": round(ready, 3),
            "survivor_cpu_s": round(cpu, 3),
            "restore_cpu_s": round(sum(restores), 3),
            "queries_kept_restored": sum(kept),
            "queries_rebuilt": len(rebuilt),
            "recomputed_report_times": sum(int(n) for n, _ in redone),
            "recompute_s": round(sum(float(s) for _, s in redone), 3),
        }
    finally:
        cluster.stop()


def throughput(base: Path, label: str, interval: float, a: argparse.Namespace) -> dict[str, Any]:
    """``--tp-elements`` pushed as fast as the leader acknowledges them; the rate is elements per
    second from the first push until the leader fired the last report time (processed, not
    only logged: checkpoints are taken on the same worker)."""
    cluster = start(base, label, interval, 1)
    try:
        leader, _, urls = leader_and_standby(cluster)
        register(urls[leader], queries(a.queries))
        url = urls[leader]
        t0 = time.perf_counter()
        chunk = a.tp_chunk or a.tp_elements
        with httpx.Client(timeout=120) as http:
            for lo in range(0, a.tp_elements, chunk):
                for first in range(lo, min(a.tp_elements, lo + chunk), a.batch):
                    push(http, [url], first, a.batch)
                if lo + chunk < a.tp_elements:  # the worker catches up: barriers get their turn
                    caught_up(url, lo + chunk)
        acked = time.perf_counter() - t0
        dt = caught_up(url, a.tp_elements) - t0
        st = httpx.get(url + "/status", timeout=10).json()
        return {
            "checkpoint_interval_s": interval,
            "elements": a.tp_elements,
            "seconds": round(dt, 3),
            "elements_per_s": round(a.tp_elements / dt, 1),
            "acknowledged_per_s": round(a.tp_elements / acked, 1),
            "checkpoints": st.get("checkpoints"),
            "log_segments_truncated": st.get("ingest_log", {}).get("truncated_segments"),
        }
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=3000, help="elements before the kill (default 3000)")
    ap.add_argument(
        "--queries", type=int, default=30, help="queries registered (default 30; two containers hold 32)"
    )
    ap.add_argument("--batch", type=int, default=20, help="elements per push request (default 20)")
    ap.add_argument(
        "--tp-elements", type=int, default=3000, help="elements per throughput run (default 3000)"
    )
    ap.add_argument(
        "--tp-chunk",
        type=int,
        default=0,
        help="push this many elements, wait until the leader fired them, go on (0: all at once; then "
        "checkpoint barriers wait behind the queued pushes)",
    )
    ap.add_argument("--rounds", type=int, default=2, help="interleaved throughput rounds (default 2)")
    ap.add_argument(
        "--dir", default=None, help="keep the clusters' logs here (default: a temporary directory)"
    )
    ap.add_argument(
        "--only", choices=["none", "1s"], default=None, help="take-over runs of one configuration"
    )
    ap.add_argument(
        "--routed",
        action="store_true",
        help="two-pattern join queries (one shared join + router) instead of single-pattern aggregates",
    )
    ap.add_argument(
        "--counts",
        action="store_true",
        help="with --routed: the joins over count windows, [TRIPLES n] with n = 20 x the range in seconds "
        "(the same extent; count windows report at the default step, 1 s)",
    )
    ap.add_argument(
        "--ranges",
        default="10:30",
        help="the queries' window ranges in seconds, LO:HI (query k: LO + k %% (HI-LO+1); default 10:30)",
    )
    ap.add_argument(
        "--late",
        type=float,
        default=0.0,
        help="time windows: the fraction of the queries (the narrowest ranges, STEP 1 s; the others "
        "STEP 2 s) registered after half the elements (default 0: all before the first push, STEP 1 s)",
    )
    ap.add_argument(
        "--container-kill",
        type=int,
        default=0,
        help="N rounds of kill -9 of a container, restored from checkpoints vs rebuilt, alternating "
        "(only these runs)",
    )
    ap.add_argument("--step", type=int, default=1, help="the time windows' STEP in seconds (default 1)")
    ap.add_argument(
        "--pace",
        action="store_true",
        help="--container-kill: after the kill, push at the wall clock's pace (10 elements a second)",
    )
    ap.add_argument("--skip-takeover", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "cluster_checkpoints.json"))
    a = ap.parse_args(argv)
    if a.counts and not a.routed:
        ap.error("--counts needs --routed")
    if a.late and a.counts:
        ap.error("--late needs time windows (count windows report at one step)")
    MODE["routed"], MODE["counts"], MODE["step"] = a.routed, a.counts, a.step
    lo, _, hi = a.ranges.partition(":")
    MODE["ranges"] = (int(lo), int(hi or lo))
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "args": vars(a)}
    if a.dir:
        Path(a.dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        base = Path(a.dir) if a.dir else Path(d)
        if a.container_kill:
            configs = (("restore", 1.0), ("rebuild", 0.0))
            kills: list[dict[str, Any]] = []
            for k in range(a.container_kill):
                for label, interval in configs[k % 2 :] + configs[: k % 2]:
                    r = container_kill(base, f"kill-{label}-{k}", interval, a)
                    kills.append(r)
                    print(
                        "container kill, %-7s: first new q0 line %.2f s, new answerer %.2f s, survivor CPU "
                        "%.3f s (restore %.3f s, %d queries kept from the checkpoint, %d rebuilt; %d report times "
                        "recomputed in %.2f s)"
                        % (
                            label,
                            r["first_new_result_s"],
                            r["answerer_switched_s"],
                            r["survivor_cpu_s"],
                            r["restore_cpu_s"],
                            r["queries_kept_restored"],
                            r["queries_rebuilt"],
                            r["recomputed_report_times"],
                            r["recompute_s"],
                        ),
                        flush=True,
                    )
            out["container_kill"] = kills
            a.skip_takeover = a.skip_throughput = True
        if not a.skip_takeover:
            runs = {}
            for label, interval in (("none", 0.0), ("1s", 1.0)):
                if a.only and label != a.only:
                    continue
                r = runs[label] = takeover(base, f"takeover-{label}", interval, a)
                tk = r["takeover"] or {}
                print(
                    "take-over, checkpoints %-4s: kill -> first new result %.2f s; new leader restored "
                    "%s and replayed %s of %s log records in %s s (%d report times before the kill); "
                    "tasks restored %s, rebuilt %s, without snapshot %s"
                    % (
                        label,
                        r["takeover_s"],
                        tk.get("checkpoint") or "no checkpoint",
                        tk.get("replayed"),
                        r["log_records_at_kill"],
                        tk.get("seconds"),
                        r["report_times_before_kill"],
                        tk.get("tasks_restored"),
                        tk.get("tasks_rebuilt"),
                        tk.get("tasks_without_snapshot"),
                    ),
                    flush=True,
                )
            out["takeover"] = runs
            if len(runs) == 2:
                ratio = runs["none"]["takeover_s"] / max(1e-9, runs["1s"]["takeover_s"])
                print("take-over time without checkpoints / with checkpoints every 1 s: %.2fx" % ratio)
                out["takeover_ratio_none_over_1s"] = round(ratio, 3)
        if not a.skip_throughput:
            configs = (("none", 0.0), ("10s", 10.0), ("1s", 1.0))
            rounds: dict[str, list[dict[str, Any]]] = {k: [] for k, _ in configs}
            for k in range(a.rounds):
                for label, interval in configs[k % 3 :] + configs[: k % 3]:
                    r = throughput(base, f"tp-{label}-{k}", interval, a)
                    rounds[label].append(r)
                    ck = r["checkpoints"] or {}
                    tasks = ck.get("tasks") or {}
                    print(
                        "throughput, checkpoints %-4s: %7.0f elements/s (%s checkpoints, %s log segments "
                        "truncated; per checkpoint: leader worker %s ms, task snapshots %s written in all, "
                        "container copy %s ms, checkpointer's wait for them %s ms)"
                        % (
                            label,
                            r["elements_per_s"],
                            ck.get("checkpoints", 0),
                            r["log_segments_truncated"],
                            ck.get("worker_ms_mean", "-"),
                            tasks.get("snapshotted", "-"),
                            tasks.get("copy_ms_mean", "-"),
                            tasks.get("wait_ms_mean", "-"),
                        ),
                        flush=True,
                    )
            per_round = {
                k: sorted(
                    r["elements_per_s"] / n["elements_per_s"] for r, n in zip(rounds[k], rounds["none"])
                )
                for k in ("10s", "1s")
            }
            ratios = {k: round(v[len(v) // 2], 3) for k, v in per_round.items()}
            print(
                "throughput vs no checkpoints (median of per-round ratios): every 10 s %.3fx, every 1 s "
                "%.3fx (goal >= 0.9x); per round: %s"
                % (ratios["10s"], ratios["1s"], {k: [round(x, 3) for x in v] for k, v in per_round.items()})
            )
            out["throughput_rounds"] = rounds
            out["throughput_ratio"] = ratios
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("wrote", a.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
