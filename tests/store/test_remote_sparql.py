"""``linkstream sparql --zk``: one-shot queries over the store nodes advertised in ZooKeeper.

A real ``linkstream store-node`` process (security on, TCP only, so every index read is a
CURVE client read admitted because the command publishes its key under ROOT/readers)
answers the same as ``linkstream sparql --store DIR``, in JSON and TSV; errors are one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.scheduler.zkclient import ZkAuth
from tests.store.remote_fixtures import SENSORS_IRI, StoreNodeProcess, build_store

pytestmark = [pytest.mark.zookeeper]

QUERIES = [
    "SELECT ?s ?o WHERE { ?s <http://purl.oclc.org/NET/ssnx/ssn#observes> ?o } ORDER BY ?s ?o",
    "SELECT ?t (COUNT(*) AS ?n) WHERE { ?x a ?t } GROUP BY ?t ORDER BY ?t",
    f"ASK FROM <{SENSORS_IRI}> {{ ?s ?p ?o }}",
    "CONSTRUCT { ?s a ?t } WHERE { ?s a ?t } ORDER BY ?s LIMIT 20",
]


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("sparql-zk"), partitions=3)


@pytest.fixture
def zk(zk_server: str, zk_chroot: str, zk_auth: ZkAuth) -> str:
    return f"{zk_server}{zk_chroot}"


@pytest.fixture
def node(store_dir: Path, zk: str) -> Iterator[StoreNodeProcess]:
    n = StoreNodeProcess(store_dir, zk, "--transports", "tcp")
    yield n
    n.stop()


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = cli_main(["sparql", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["json", "tsv"])
def test_sparql_over_store_nodes_equals_the_store_directory(
    node: StoreNodeProcess, store_dir: Path, zk: str, capsys: pytest.CaptureFixture, fmt: str
) -> None:
    assert node.adv.curve and set(node.adv.transports) == {"tcp"}
    for q in QUERIES:
        code, want, err = run(capsys, "--store", str(store_dir), "--format", fmt, q)
        assert code == 0, err
        code, got, err = run(capsys, "--zk", zk, "--format", fmt, q)
        assert code == 0, err
        assert got == want, q
        if fmt == "json":
            res = json.loads(got)
            assert res.get("boolean") is True or res.get("triples") or res["results"]["bindings"], q


def test_sparql_zk_errors_are_one_line(zk: str, store_dir: Path, capsys: pytest.CaptureFixture) -> None:
    # no store node advertised under this root
    code, out, err = run(capsys, "--zk", zk, "--root", "/nowhere", "ASK { ?s ?p ?o }")
    assert code == 2 and out == ""
    assert (
        err
        == f"error: store nodes of {zk}: no store node is advertised (under /nowhere/storenodes or given)\n"
    )
    code, _, err = run(capsys, "--store", str(store_dir), "--insecure", "ASK { ?s ?p ?o }")
    assert code == 2
    assert (
        err
        == "error: --insecure, --zk-auth-file and --zk-tls-ca go with --zk (a store directory needs none)\n"
    )
    with pytest.raises(SystemExit):
        cli_main(["sparql", "--store", str(store_dir), "--zk", zk, "ASK { ?s ?p ?o }"])
    assert "not allowed with argument" in capsys.readouterr().err
