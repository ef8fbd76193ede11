"""Helpers for the remote-store tests: a CityBench-slice store, store-node processes, replays."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from linkstream.cli import main as cli_main
from linkstream.containers.replica import RunReplica
from linkstream.containers.security import Security
from linkstream.engine.replay import replay
from linkstream.scheduler.runs import RunSpec
from linkstream.scheduler.zkclient import ZkAuth
from linkstream.store.node import Advertisement, publish_reader_key
from linkstream.store.remote import RemoteStore
from tests.shared_paths import REPO, SLICE

MANIFEST = json.loads((SLICE / "slice.json").read_text(encoding="utf-8"))
SENSORS = SLICE / "static" / "SensorRepository.nt"
#: the IRI the C-SPARQL queries of the slice name the sensor repository by
SENSORS_IRI = "http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf"


def build_store(tmp: Path, partitions: int = 4) -> Path:
    """A store holding the slice's sensor repository twice: as the default graph (CQELS
    reads it so) and as the named graph the C-SPARQL queries name with ``FROM``."""
    nq = tmp / "sensors-named.nq"
    with open(SENSORS, encoding="utf-8") as f, open(nq, "w", encoding="utf-8") as out:
        for line in f:
            line = line.rstrip()
            if line.endswith("."):
                out.write(f"{line[:-1].rstrip()} <{SENSORS_IRI}> .\n")
    store = tmp / "store"
    rc = cli_main(
        ["load", "--store", str(store), "--partitions", str(partitions), "--quiet", str(SENSORS), str(nq)]
    )
    assert rc == 0
    return store


def secure_reader(client: object, root: str, auth: ZkAuth) -> Security:
    """A reader's security (fresh CURVE keys) whose public key is published under
    ``<root>/readers`` through ``client`` (so secure store nodes admit it)."""
    security = Security.secure(auth)
    assert security.public is not None
    publish_reader_key(client, root, security.public, "test")
    return security


class StoreNodeProcess:
    """``linkstream store-node`` in its own process; :attr:`adv` is its advertisement.

    Without ``zk`` the node runs ``--insecure`` (it has no cluster keys to check TCP
    readers against).
    """

    def __init__(self, store: Path, zk: str | None, *args: str) -> None:
        cmd = [
            sys.executable,
            "-m",
            "linkstream.cli",
            "store-node",
            "--store",
            str(store),
            "--log-level",
            "WARNING",
        ]
        if zk:
            cmd += ["--zk", zk, "--session-timeout", "2"]
        elif "--insecure" not in args:
            cmd += ["--insecure"]
        self.proc = subprocess.Popen(
            [*cmd, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"store node did not start: {err}")
        self.adv = Advertisement.from_json(line)

    def kill(self) -> None:
        """SIGKILL: no goodbye, the znode goes with the session."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


def slice_run(dialect: str) -> tuple[RunSpec, dict[str, str], list[tuple[str, str]]]:
    """The run of the slice's queries of one dialect: spec, texts by id, streams."""
    qs = [q for q in MANIFEST["queries"] if q["dialect"] == dialect]
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    for q in qs:
        for s in q["streams"]:
            streams[s["iri"]] = str(SLICE / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(SLICE / s["path"])
    spec = RunSpec(
        id=f"slice-{dialect}",
        driver="tcp://127.0.0.1:1",
        base=MANIFEST["base"],
        default_step=1000,
        statics=tuple(statics.items()),
        streams=tuple(streams),
        horizons=tuple([None] * len(streams)),
    )
    texts = {q["id"]: (SLICE / q["query"]).read_text(encoding="utf-8") for q in qs}
    return spec, texts, list(streams.items())


def replay_replica(dialect: str, remote: RemoteStore | None) -> tuple[str, dict, RunReplica]:
    """Registers the dialect's slice queries on a container replica (static graphs loaded
    from files, or read from ``remote``) and replays the streams through its engine."""
    spec, texts, streams = slice_run(dialect)
    rep = RunReplica(spec, remote=remote)
    rep.preplan(texts)
    rqs = [rep.register(name, text) for name, text in sorted(texts.items())]
    out = io.StringIO()
    replay(rep.engine, rqs, streams, out)
    return out.getvalue(), rep.static_stats(), rep
