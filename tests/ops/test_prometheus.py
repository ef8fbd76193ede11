"""A real Prometheus (Debian package binary) scraping live LinkStream processes under load.

It starts:

* ``linkstream run`` on a store (``linkstream load --store``) with one absorbed stream, one
  registered continuous query, and a pusher thread sending stream elements at wall-clock
  event times, some late elements and some malformed bodies;
* a local cluster (ZooKeeper from the session fixture, one coordinator, one container,
  ``linkstream autoscaler --autoscale-driver none``) replaying a CityBench query
  (``linkstream replay --zk``) while Prometheus scrapes it;
* Prometheus with ``infra/prometheus.yml`` (targets rewritten to these processes, 1 s
  scrape and rule evaluation, ``infra/alerts.yml`` loaded) plus one dead target.

Then every dashboard panel expression (``dashboards/linkstream.json``; ``$instance`` as
``.*``, ``$__rate_interval`` as ``20s``) and every alert's signal (its expression without
the final threshold comparison) goes through ``/api/v1/query`` and must return series.
The dead target must make ``LinkStreamTargetDown``'s full expression return a series, and
the late and rejected input must put ``LinkStreamLateElements`` and
``LinkStreamRejectedInput`` at least into the pending state.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster
from tests.shared_paths import SHARED

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
DASHBOARD = REPO / "dashboards" / "linkstream.json"
RATE_INTERVAL = "20s"
LOAD_SECONDS = 25.0

EX = "http://ex.org/"
INT = "^^<http://www.w3.org/2001/XMLSchema#integer>"
STREAM = EX + "sensors"
ABSORBED = EX + "facts"
QUERY = f"""SELECT ?s ?v
WHERE {{ STREAM <{STREAM}> [RANGE 2s SLIDE 1s] {{ ?s <{EX}value> ?v . }} }}
"""

#: panel expressions that cannot return series in this setup, with the reason
CANNOT_HERE: dict[str, str] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(pred: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except (httpx.HTTPError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def panel_exprs() -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every dashboard target, Grafana variables filled in."""
    dashboard = json.loads(DASHBOARD.read_text())
    out = []
    for p in dashboard["panels"]:
        for inner in [p, *p.get("panels", [])]:
            for t in inner.get("targets", []):
                expr = t["expr"].replace("$__rate_interval", RATE_INTERVAL).replace("$instance", ".*")
                out.append((inner["title"], expr))
    for var in dashboard["templating"]["list"]:  # label_values(METRIC, LABEL): the metric's series
        [metric] = re.findall(r"label_values\((\w+),", var["query"])
        out.append((f"variable {var['name']}", metric))
    return out


_COMPARISON = re.compile(r"^(?P<signal>.*\S)\s*(==|!=|>=|<=|>|<)\s*[-+]?[0-9.]+(e[-+]?\d+)?\s*$", re.S)


def alert_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load((INFRA / "alerts.yml").read_text())["groups"] for r in g["rules"]]


def signal_of(expr: str) -> str:
    """An alert's expression without its final threshold comparison (alerts.yml's convention)."""
    m = _COMPARISON.match(expr.strip())
    assert m, f"alert expression does not end in a threshold comparison: {expr!r}"
    return m.group("signal")


def test_signal_of() -> None:
    assert signal_of('up{job=~"x"} == 0') == 'up{job=~"x"}'
    assert (
        signal_of("sum(rate(a[5m])) / (sum(rate(b[5m]))) > 0.01") == "sum(rate(a[5m])) / (sum(rate(b[5m])))"
    )


# ---------------------------------------------------------------------------- processes


class Pusher(threading.Thread):
    """Pushes stream elements at wall-clock event times, plus late and malformed ones."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.halt = threading.Event()
        self.sent = 0
        self.errors: list[str] = []

    def run(self) -> None:
        k = 0
        with httpx.Client(timeout=10) as c:
            while not self.halt.is_set():
                now = int(time.time() * 1000)
                body = "".join(f'<{EX}s{j}> <{EX}value> "{k * 10 + j}"{INT} .\n' for j in range(5))
                r = c.post(
                    self.url + "/streams", params={"iri": STREAM, "t": str(now)}, content=body.encode()
                )
                if r.status_code != 202:
                    self.errors.append(r.text)
                fact = f'<{EX}f{k}> <{EX}seenAt> "{now}"{INT} .\n'.encode()
                c.post(self.url + "/streams", params={"iri": ABSORBED, "t": str(now)}, content=fact)
                if k % 5 == 0:  # late: 10 s before the watermark
                    c.post(
                        self.url + "/streams",
                        params={"iri": STREAM, "t": str(now - 10_000)},
                        content=body.encode(),
                    )
                if k % 10 == 0:  # malformed: rejected with a 400
                    c.post(
                        self.url + "/streams",
                        params={"iri": STREAM, "t": str(now)},
                        content=b"<urn:a> <urn:p> .\n",
                    )
                self.sent += 1
                k += 1
                self.halt.wait(0.1)


def _run_server(tmp_path: Path, name: str, args: list[str]) -> Iterator[str]:
    """``linkstream run`` with ``args`` (its log in ``<name>.log``), a query registered."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / f"{name}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "linkstream.cli", "run", "--host", "127.0.0.1", "--port", str(port), *args]
        + ["--log-level", "warning"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: httpx.get(url + "/healthz", timeout=1).status_code == 200, "linkstream run")
        r = httpx.post(
            url + "/queries", params={"default_name": "sensors"}, content=QUERY.encode(), timeout=10
        )
        assert r.status_code in (200, 201), r.text
        yield url
    finally:
        stop(proc)
        log.close()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[str]:
    """``linkstream run`` on a fresh store, absorbing one stream, with a query registered."""
    static = tmp_path / "static.nt"
    static.write_text("".join(f"<{EX}s{j}> <{EX}kind> <{EX}Sensor> .\n" for j in range(5)))
    store = tmp_path / "store"
    assert cli_main(["load", str(static), "--store", str(store), "--quiet"]) == 0
    yield from _run_server(tmp_path, "run", ["--store", str(store), "--absorb", ABSORBED])


@pytest.fixture
def shipping_server(tmp_path: Path) -> Iterator[str]:
    """``linkstream run --state-dir`` with checkpoints outside its state dir: its ingest log is
    shipped (the log shipping series; a ``--store`` run takes no checkpoints, so ships nothing)."""
    ckpt = (tmp_path / "checkpoints").as_uri()
    args = ["--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "1", "--checkpoints", ckpt]
    yield from _run_server(tmp_path, "shipping", args)


@pytest.fixture
def cluster(tmp_path: Path, zk_server: str, zk_chroot: str) -> Iterator[LocalCluster | None]:
    """One coordinator, one container and an autoscaler recommending only (``--metrics-port
    0``), or None without CityBench."""
    if not (SHARED / "citybench" / "manifest.json").exists():
        yield None
        return
    c = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=2.0)
    try:
        c.start(1, 1)
        c.start_autoscaler("1:1", "none", ["--interval", "1"])
        # the coordinator and the autoscaler advertise their /metrics a moment after they join
        wait_for(
            lambda: len(json.loads(c.write_prometheus_targets().read_text())) == 3,
            "all three metrics targets",
        )
        yield c
    finally:
        c.stop()


def replay_args(tmp_path: Path) -> list[str]:
    """``linkstream replay`` of CityBench's csparql-Q10 (as tests/cluster/test_metrics.py)."""
    manifest = json.loads((SHARED / "citybench" / "manifest.json").read_text())
    q = next(q for q in manifest["queries"] if q["id"] == "csparql-Q10")
    query = tmp_path / "q10.rq"
    shutil.copy(SHARED / q["query"], query)
    args = ["replay", "--base", manifest["base"], "--query", str(query), "--max-reports", "200", "--quiet"]
    args += [f"--stream={s['iri']}={SHARED / s['path']}" for s in q["streams"]]
    args += [f"--static={s['iri']}={SHARED / s['path']}" for s in q["statics"]]
    return args + ["--out", str(tmp_path / "replay.jsonl")]


@pytest.fixture
def prometheus(
    tmp_path: Path, live_server: str, shipping_server: str, cluster: LocalCluster | None
) -> Iterator[str]:
    """Prometheus with infra/prometheus.yml and infra/alerts.yml, scraping the processes above."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus not installed (infra/install-system-deps.sh installs the Debian package)")
    config = yaml.safe_load((INFRA / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(INFRA / f) for f in config["rule_files"]]
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    jobs["linkstream-api"]["static_configs"][0]["targets"] = [
        url.removeprefix("http://") for url in (live_server, shipping_server)
    ]
    sd = jobs["linkstream-cluster"]["file_sd_configs"][0]
    if cluster is not None:
        sd["files"] = [str(cluster.dir / "prometheus" / "targets.json")]
    else:
        config["scrape_configs"].remove(jobs["linkstream-cluster"])
    sd["refresh_interval"] = "1s"
    # a target nothing listens on: LinkStreamTargetDown must see it
    dead = {"job_name": "linkstream-dead", "static_configs": [{"targets": [f"127.0.0.1:{free_port()}"]}]}
    config["scrape_configs"].append(dead)
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(url + "/-/ready", timeout=1).status_code == 200, "prometheus")
        yield url
    finally:
        stop(proc)
        log.close()


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    r = httpx.get(prom + "/api/v1/query", params={"query": expr}, timeout=10)
    body = r.json()
    assert r.status_code == 200 and body["status"] == "success", f"{expr}: {body}"
    return body["data"]["result"]


# ---------------------------------------------------------------------------- the test


def test_every_panel_and_alert_returns_series(
    tmp_path: Path, prometheus: str, live_server: str, cluster: LocalCluster | None
) -> None:
    prom = prometheus
    pusher = Pusher(live_server)
    pusher.start()
    replay_result: list[int] = []
    replayer = None
    if cluster is not None:
        replayer = threading.Thread(
            target=lambda: replay_result.append(cli_main([*replay_args(tmp_path), "--zk", cluster.hosts])),
            daemon=True,
        )
        replayer.start()
    try:
        # every target is scraped (the dead one is down) before the load window is measured
        def targets_seen() -> bool:
            up = {(s["metric"]["job"], s["value"][1]) for s in query(prom, "up")}
            want = {("linkstream-api", "1"), ("linkstream-dead", "0")}
            if cluster is not None:
                want.add(("linkstream-cluster", "1"))
            return want <= up and len(query(prom, 'up{job="linkstream-cluster"}')) == (3 if cluster else 0)

        try:
            wait_for(targets_seen, "Prometheus to scrape every target")
        except AssertionError:
            targets = httpx.get(prom + "/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
            raise AssertionError([(t["labels"], t["health"], t["lastError"]) for t in targets]) from None
        time.sleep(LOAD_SECONDS)
    finally:
        pusher.halt.set()
        pusher.join(timeout=10)
    assert pusher.sent > 50 and not pusher.errors, pusher.errors[:3]
    if replayer is not None:
        replayer.join(timeout=60)
        assert replay_result == [0]

    empty: list[str] = []
    found: list[str] = []
    for title, expr in panel_exprs():
        if expr in CANNOT_HERE:
            continue
        n = len(query(prom, expr))
        (found if n else empty).append(f"panel {title!r}: {expr} ({n} series)")
    for rule in alert_rules():
        n = len(query(prom, signal_of(rule["expr"])))
        (found if n else empty).append(
            f"alert {rule['alert']} signal: {signal_of(rule['expr'])} ({n} series)"
        )
    print("\n".join(found))
    if cluster is None:  # without the CityBench corpus there is no cluster: only the API server's
        cluster_only = [
            e
            for e in empty
            if re.search(
                r"scheduler|container|zookeeper|dataplane|process_info|batch_latency|state_migr|stream_elements"
                r"|autoscaler",
                e,
            )
        ]
        empty = [e for e in empty if e not in cluster_only]
    assert not empty, "expressions without series:\n" + "\n".join(empty)

    # alerts that this load really triggers
    assert query(prom, next(r["expr"] for r in alert_rules() if r["alert"] == "LinkStreamTargetDown"))
    states = {}
    for a in httpx.get(prom + "/api/v1/alerts", timeout=10).json()["data"]["alerts"]:
        states.setdefault(a["labels"]["alertname"], set()).add(a["state"])
    for name in ("LinkStreamTargetDown", "LinkStreamLateElements", "LinkStreamRejectedInput"):
        assert states.get(name), f"{name} is neither pending nor firing: {states}"
    # and the healthy cluster triggers none of its own
    for name in ("LinkStreamNoLeader", "LinkStreamSeveralLeaders", "LinkStreamZooKeeperSessionLost"):
        assert name not in states, states
