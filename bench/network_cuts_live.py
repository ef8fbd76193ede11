"""``bench/network_cuts.py --live``: a container of the live service cut off from the network.

The live service (``linkstream run --zk``: one coordinator, the cluster's own ZooKeeper,
containers ``oc-1``/``oc-2`` on the host and ``oc-3`` in a network namespace,
:class:`tests.cluster.netcut.Netns`) takes ``--cuts`` rounds.  Each round registers the
queries of ``tests/api``'s CityBench slice under fresh names on the cluster and on an
embedded server, pushes the slice over HTTP to both (shifted in time per round; the
previous round's queries are unregistered once this round's are in) and, at a random
element, drops every packet in and out of the namespace for ``--cut-s`` seconds; from the
cut until ``oc-3`` is back in the run the pushes are paced at 0.25 s, so they span the cut,
the recompute and the rejoin.  The results read back over JSON Lines are compared line for
line: lost and duplicated must be 0.

The ports ``oc-3`` needs are relayed into the namespace: ZooKeeper's and, once the
coordinator's live run is published, its driver's result socket (a watcher relays the
driver endpoint of every run node it sees); the coordinator reaches ``oc-3``'s data plane
through a relay of its bound port.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from cluster_kills import RoundReaders, fmt, shared_dir
from network_cuts import pct

from linkstream.api.client import Client
from linkstream.cluster.driverstate import task_id
from linkstream.cluster.localcluster import LocalCluster, ProcessRecord, free_port
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.runs import RunNode
from tests.api.corpus import build_corpus
from tests.cluster.netcut import Netns

REPO = Path(__file__).resolve().parents[1]
QUERIES = ["cqels-Q1", "rspql-avg-congestion", "csparql-Q1"]


def log_times(path: Path, needle: str, after: float) -> list[float]:
    """Epoch times of the lines of a process log with ``needle``, logged after ``after``."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if needle in line:
            try:
                t = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            if t >= after:
                out.append(t)
    return out


CONTAINERS = ["oc-1", "oc-2", "oc-3"]


def start_in(cluster: LocalCluster, ns: Netns, cid: str) -> None:
    """Container ``cid`` inside ``ns``, its data plane on a port relayed in from the host."""
    st = cluster.state
    port = free_port()
    ns.forward_out(int(cluster.hosts.rsplit(":", 1)[1]))  # its ZooKeeper
    ns.forward_in(port)
    args = ["container", "--zk", cluster.hosts, "--id", cid, "--root", st.root, "--capacity", "16"]
    args += ["--session-timeout", str(st.session_timeout), "--metrics-port", "0"]
    args += ["--bind", f"tcp://127.0.0.1:{port}", *cluster.security_args()]
    log_path = cluster.dir / "logs" / f"{cid}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            ns.command([sys.executable, "-m", "linkstream.cli", *args]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    st.processes[cid] = ProcessRecord(cid, "container", proc.pid, str(log_path))
    st.next_container = max(st.next_container, int(cid.split("-")[1]) + 1)
    cluster.save()


def relay_drivers(cluster: LocalCluster, nss: list[Netns], stop: threading.Event) -> None:
    """Relays into the namespaces the driver port of every live run the coordinator publishes."""
    done: set[int] = set()
    client = cluster.client()
    try:
        node = RunNode(client, cluster.state.root)
        while not stop.is_set():
            try:
                spec = node.get()
            except Exception:  # ZooKeeper busy: next time
                spec = None
            if spec is not None:
                port = int(spec.driver.rsplit(":", 1)[1])
                if port not in done:
                    for ns in nss:
                        ns.forward_out(port)
                    done.add(port)
            stop.wait(0.05)
    finally:
        client.stop()
        client.close()


def live_rounds(a: argparse.Namespace, rng, tmp: Path, nss: dict[str, Netns]) -> tuple[list[dict], dict]:  # noqa: ANN001
    corpus = build_corpus(shared_dir(), tmp)
    if corpus is None:
        raise SystemExit("no CityBench data")
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    t0 = min(el.t for el in corpus.elements)
    shift = ((corpus.last_report(1000) - t0) // 60_000 + 2) * 60_000
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp / "live", session_timeout=a.session_timeout, capacity=16)
    stop = threading.Event()
    runs: list[dict] = []
    try:
        cluster.start(0, coordinators=0)
        cluster.start_coordinator(["--idle-ms", "0", *statics])
        for cid in CONTAINERS:
            start_in(cluster, nss[cid], cid)
        cluster.wait_members(set(CONTAINERS), 60)
        threading.Thread(target=relay_drivers, args=(cluster, list(nss.values()), stop), daemon=True).start()
        (_cid, url), *_ = cluster.api_urls(timeout=60).items()
        cluster.wait_leader({_cid: url}, timeout=60)
        cl, emb = Client(url, timeout=60.0), Client(embedded.url)
        coord_log = cluster.dir / "logs" / "coord-1.log"
        print(
            f"{'cut':>3} {'victim':>6} {'at':>4} {'held':>4} {'lost':>5} {'dup':>4} {'lines':>6} {'detect s':>8} "
            f"{'recover s':>9} {'rejoin s':>8} {'round s':>7}",
            flush=True,
        )
        previous: list[str] = []
        for r in range(a.cuts):
            deadline = time.monotonic() + 90
            while not set(CONTAINERS) <= cluster.members():  # back from the previous cut
                if time.monotonic() > deadline:
                    raise SystemExit(f"a container did not come back: members {cluster.members()}")
                time.sleep(0.2)
            qs = {f"{q}-r{r}": texts[q] for q in QUERIES}
            for q, text in qs.items():
                cl.register(text, q)
                emb.register(text, q)
            until = corpus.last_report(1000) + r * shift
            readers = RoundReaders(cl, emb, qs, until, timeout=90)
            client = cluster.client()
            try:  # the round's queries placed: the victim is one of their containers
                table, tasks = AssignmentTable(client, cluster.state.root), {task_id(q) for q in qs}
                deadline = time.monotonic() + 30
                while True:
                    holders = [a_.container for t, a_ in table.all().items() if t in tasks]
                    if (len(holders) == len(tasks) and None not in holders) or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
            finally:
                client.stop()
                client.close()
            victim = rng.choice(sorted({h for h in holders if h is not None} or set(CONTAINERS)))
            held = sum(1 for h in holders if h == victim)
            ns = nss[victim]
            n = len(corpus.elements)
            at = rng.randint(n // 5, 2 * n // 5)
            marks: dict[str, float] = {}

            def heal(marks: dict[str, float] = marks, ns: Netns = ns) -> None:
                time.sleep(a.cut_s)
                marks["healed_wall"] = time.time()  # (traffic flows before nft returns)
                ns.heal()
                marks["healed"] = time.monotonic()

            def watch(marks: dict[str, float] = marks, victim: str = victim) -> None:
                while "gone" not in marks and time.monotonic() < marks["cut"] + 60:
                    if victim not in cluster.members():
                        marks["gone"] = time.monotonic()
                    time.sleep(0.05)

            seen = coord_log.stat().st_size  # the coordinator's log before this round
            rejoined = False
            t1 = time.perf_counter()
            for k, el in enumerate(corpus.elements):
                if k == at:
                    ns.cut()
                    marks["cut"], marks["cut_wall"] = time.monotonic(), time.time()
                    threading.Thread(target=heal, daemon=True).start()
                    threading.Thread(target=watch, daemon=True).start()
                cl.push(el.stream, el.ntriples, t=el.t + r * shift)
                emb.push(el.stream, el.ntriples, t=el.t + r * shift)
                if "healed" in marks and not rejoined:
                    with open(coord_log, "rb") as f:
                        f.seek(seen)
                        rejoined = f"container {victim} joined the run".encode() in f.read()
                time.sleep(0.25 if "cut" in marks and not rejoined else 0.02)
            cl.advance(until)
            emb.advance(until)
            readers.join(150)
            seconds = time.perf_counter() - t1
            deadline = time.monotonic() + a.cut_s + 60
            while not (
                "healed" in marks
                and set(CONTAINERS) <= cluster.members()
                and log_times(coord_log, f"container {victim} joined the run", marks["healed_wall"])
            ):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if ns.cut_active:
                ns.heal()
            lost, dup, lines = readers.tally()
            for q in previous:
                cl.unregister(q)
                emb.unregister(q)
            previous = list(qs)
            recomputed = log_times(coord_log, "driver: recomputed", marks["cut_wall"])
            joined = log_times(
                coord_log, f"container {victim} joined the run", marks.get("healed_wall", 1e18)
            )
            row = {
                "victim": victim,
                "at": at,
                "held": held,
                "lost_lines": lost,
                "duplicated_lines": dup,
                "lines": lines,
                "seconds": seconds,
                "reader_errors": readers.errors,
                "detection_s": marks["gone"] - marks["cut"] if "gone" in marks else None,
                "recovery_s": recomputed[0] - marks["cut_wall"] if recomputed else None,
                "rejoin_s": joined[0] - marks["healed_wall"] if joined else None,
            }
            runs.append(row)
            print(
                f"{r + 1:>3} {victim:>6} {at:>4} {held:>4} {lost:>5} {dup:>4} {lines:>6} {fmt(row['detection_s']):>8} "
                f"{fmt(row['recovery_s']):>9} {fmt(row['rejoin_s']):>8} {seconds:>7.2f}",
                flush=True,
            )
            for e in readers.errors:
                print("      reader failed:", e, flush=True)
        text = coord_log.read_text(errors="replace")
        extra = {
            "recomputed_reports_logged": text.count("driver: recomputed"),
            "lost_reports_logged": text.count("no live container recomputed"),
            "containers_registered_again": sum(
                (cluster.dir / "logs" / f"{c}.log").read_text(errors="replace").count("registered again")
                for c in CONTAINERS
            ),
        }
    finally:
        stop.set()
        cluster.stop()
        embedded.stop()
    return runs, extra


def live_main(a: argparse.Namespace, rng) -> int:  # noqa: ANN001
    """``--live``: the rounds, the summary and ``bench/results/network_cuts_live.json``."""
    import os

    load0 = os.getloadavg()
    nss = {cid: Netns(f"lslive{os.getpid()}{k}") for k, cid in enumerate(CONTAINERS)}
    try:
        for ns in nss.values():
            ns.create()
        if a.dir:
            Path(a.dir).mkdir(parents=True, exist_ok=True)
            runs, extra = live_rounds(a, rng, Path(a.dir), nss)
        else:
            with tempfile.TemporaryDirectory(prefix="network-cuts-live-") as d:
                runs, extra = live_rounds(a, rng, Path(d), nss)
    finally:
        for ns in nss.values():
            ns.close()
    bad = [r for r in runs if r["lost_lines"] or r["duplicated_lines"] or r["reader_errors"]]
    summary: dict[str, object] = {
        "cuts": len(runs),
        "cut_s": a.cut_s,
        "session_timeout": a.session_timeout,
        "bad_rounds": len(bad),
        "lost": sum(r["lost_lines"] for r in runs),
        "duplicated": sum(r["duplicated_lines"] for r in runs),
        "lines": sum(r["lines"] for r in runs),
        "rounds_victim_held_a_query": sum(1 for r in runs if r["held"]),
        "load_before": load0,
        "load_after": os.getloadavg(),
        **extra,
    }
    for key in ("detection_s", "recovery_s", "rejoin_s"):
        xs = [float(r[key]) for r in runs if r[key] is not None]
        summary[key] = {"p50": statistics.median(xs) if xs else None, "p99": pct(xs, 0.99)}
    print(
        f"{len(runs)} cuts of {a.cut_s:g}s during live pushes (sessions {a.session_timeout:g}s): lost "
        f"{summary['lost']} of {summary['lines']} lines, duplicated {summary['duplicated']} ({len(bad)} bad "
        f"rounds; the container held a query in {summary['rounds_victim_held_a_query']}); "
        + ", ".join(
            f"{k.removesuffix('_s')} p50 {fmt(summary[k]['p50'])}s p99 {fmt(summary[k]['p99'])}s"  # type: ignore[index]
            for k in ("detection_s", "recovery_s", "rejoin_s")
        )
        + f"; {extra['recomputed_reports_logged']} recomputes logged; load {load0[0]:.1f} -> "
        f"{summary['load_after'][0]:.1f}"  # type: ignore[index]
    )
    results = REPO / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "network_cuts_live.json").write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit("run bench/network_cuts.py --live")
