"""`linkstream restore --store DIR`: a Spark job rebuilds a store directory from its log.

A store made by ``linkstream load`` absorbs pushed stream elements through a real
``run --store DIR --absorb STREAM`` server (HTTP pushes), which appends them to the
store's write-ahead log and does not checkpoint it.  A copy of the directory is the
reference: ``linkstream sparql`` on it replays the log when it opens the store.  The
Spark job (``local[2]``) then writes the log into the partitions of the original and
empties the log; ``linkstream sparql`` on the rebuilt store answers every query exactly
as on the reference, ``linkstream store verify`` finds every file as the manifest says,
and the manifest records the stream's stable timestamp.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from linkstream.api.app import create_app
from linkstream.api.client import Client
from linkstream.api.server import BackgroundServer, build_live
from linkstream.bulk.store_rebuild import rebuild_store
from linkstream.cli import main as cli_main
from linkstream.store.deltalog import LOG_PATH
from linkstream.store.layout import read_manifest
from linkstream.store.loader import load_store

pytestmark = [pytest.mark.spark]

EX = "http://example.org/"
STREAM = f"{EX}stream/obs"
QUERIES = {
    "all": "SELECT ?s ?p ?o WHERE { ?s ?p ?o } ORDER BY ?s ?p ?o",
    "graphs": "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g ORDER BY ?g",
    "named": "SELECT ?g ?s ?o WHERE { GRAPH ?g { ?s <%svalue> ?o } } ORDER BY ?g ?s ?o" % EX,
    "join": "SELECT ?room (SUM(?v) AS ?t) WHERE { ?o <%sin> ?room ; <%svalue> ?v } GROUP BY ?room ORDER BY ?room"
    % (EX, EX),
    "types": "SELECT ?t (COUNT(?x) AS ?n) WHERE { ?x a ?t } GROUP BY ?t ORDER BY ?t",
}


def _static(path: Path) -> Path:
    lines = []
    for i in range(40):
        lines.append(f"<{EX}room{i % 5}> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{EX}Room> .")
        lines.append(f'<{EX}sensor{i}> <{EX}label> "sensor {i}" .')
        lines.append(f"<{EX}sensor{i}> <{EX}in> <{EX}room{i % 5}> .")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _absorb(store: Path, pushes: int) -> None:
    """Pushes ``pushes`` elements to a real ``run --store --absorb`` server (some repeat
    static triples or earlier elements), then stops it without a checkpoint of the store."""
    live = build_live(store=str(store), idle_ms=None, absorb=[STREAM])
    srv = BackgroundServer(create_app(live), on_shutdown=live.close).start()
    try:
        with Client(srv.url) as c:
            for i in range(pushes):
                c.push_triples(
                    STREAM,
                    1000 * (i + 1),
                    [
                        (
                            f"<{EX}obs{i}>",
                            f"<{EX}value>",
                            f'"{i}"^^<http://www.w3.org/2001/XMLSchema#integer>',
                        ),
                        (f"<{EX}obs{i}>", f"<{EX}in>", f"<{EX}room{i % 5}>"),
                        (f"<{EX}obs{i % 7}>", f"<{EX}at>", f'"t{i % 7}"'),  # repeats
                        (
                            f"<{EX}sensor{i % 40}>",
                            f"<{EX}in>",
                            f"<{EX}room{i % 40 % 5}>",
                        ),  # as in the static graph
                        (f"<{EX}new{i}>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", f"<{EX}Room>"),
                    ],
                )
    finally:
        srv.stop()
        live.engine.store.close()  # type: ignore[attr-defined]  # the live engine leaves its store open


def _answers(store: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    out = {}
    for name, text in QUERIES.items():
        capsys.readouterr()
        assert cli_main(["sparql", "--store", str(store), text]) == 0
        out[name] = json.loads(capsys.readouterr().out)
    return out


@pytest.fixture
def absorbed(tmp_path: Path) -> tuple[Path, Path]:
    """A store with a non-empty log, and a copy of it as it was (the reference)."""
    store = tmp_path / "store"
    load_store(store, [_static(tmp_path / "static.nt")], default_graph=True, partitions=4)
    _absorb(store, 60)
    assert (store / LOG_PATH).stat().st_size > 0, "the server checkpointed the store: nothing to rebuild"
    reference = tmp_path / "reference"
    shutil.copytree(store, reference)
    return store, reference


@pytest.mark.slow  # ~35 s under load: the first Spark job of the session warms the JVM and the workers
def test_the_rebuilt_store_answers_sparql_as_the_store_with_its_log(
    spark: object, absorbed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    store, reference = absorbed
    before = read_manifest(store)
    want = _answers(reference, capsys)
    rows = want["all"]["results"]["bindings"]  # type: ignore[index]
    assert any(r["s"]["value"] == f"{EX}obs59" for r in rows)  # the log's triples are in the answers
    res = rebuild_store(spark, str(store))  # type: ignore[arg-type]
    assert res.batches == 60
    assert (store / LOG_PATH).stat().st_size == 0
    after = read_manifest(store)
    assert after.extra["vts"] == {STREAM: 60_000}
    assert after.total_triples > before.total_triples
    assert {g.dir for g in after.graphs if g.iri in res.triples}.isdisjoint({g.dir for g in before.graphs})
    assert sorted(os.listdir(store / "graphs")) == sorted(g.dir for g in after.graphs)  # old folders gone
    assert cli_main(["store", "verify", str(store)]) == 0
    assert _answers(store, capsys) == want
    # rebuilding again finds an empty log and changes nothing
    again = rebuild_store(spark, str(store))  # type: ignore[arg-type]
    assert again.batches == 0 and not again.triples
    assert read_manifest(store) == after


def test_restore_store_refuses_a_folder_that_is_not_a_store(tmp_path: Path, capsys) -> None:
    assert cli_main(["restore", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: --store {tmp_path}: not a store directory (no store.json; make one with linkstream load)"
    )
    with pytest.raises(SystemExit) as exited:
        cli_main(["restore", "--store", str(tmp_path), "--log", str(tmp_path)])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "error: argument --log: not allowed with argument --store (see linkstream restore --help)\n"
    )


@pytest.mark.slow  # ~20 s: a Spark JVM of its own in the restore subprocess
def test_linkstream_restore_store_cli(
    absorbed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    store, reference = absorbed
    cmd = [sys.executable, "-m", "linkstream.cli", "restore", "--store", str(store), "--spark", "local[2]"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "60 log batches written into the partitions" in done.stdout
    assert (store / LOG_PATH).stat().st_size == 0
    assert _answers(store, capsys) == _answers(reference, capsys)
