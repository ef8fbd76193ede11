"""Issue 6, acceptance 3: a Spark ``local[2]`` bulk load of the CityBench static graphs plus a
generated graph of >= 5M triples agrees with a pure-Python load of the same files, and
continuous queries with static joins over the loaded store give the oracle's results.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkstream.bulk.spark_load import spark_load
from linkstream.bulk.synthetic import write_synthetic
from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from linkstream.store import layout
from linkstream.store.loader import load_store
from tests.bulk.store_compare import assert_same_store, check_partitions
from tests.shared_paths import load_tool, shared_or_skip

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GENERATED = 5_000_000
STATIC_GRAPH = "http://linkstream.test/static/"
QUERIES = ["cqels-Q5", "csparql-Q1", "csparql-Q8"]


def _static_quads(shared: Path, out: Path) -> list[str]:
    """The CityBench static files as N-Quads, each in the named graph STATIC_GRAPH + its stem."""
    out.mkdir()
    paths = []
    for src in sorted((shared / "citybench" / "static").glob("*.nt")):
        g = f" <{STATIC_GRAPH}{src.stem}> ."
        lines = []
        for line in src.read_text(encoding="utf-8").splitlines():
            s = line.rstrip()
            lines.append(s[:-1].rstrip() + g if s.endswith(".") and not s.startswith("#") else s)
        dst = out / (src.stem + ".nq")
        dst.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(str(dst))
    return paths


@pytest.fixture(scope="module")
def loaded(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The generated graph + statics, loaded by Spark and by the pure-Python loader."""
    shared = shared_or_skip()
    root = tmp_path_factory.mktemp("acceptance")
    gen = write_synthetic(str(root / "gen"), GENERATED, files=4, seed=6)
    inputs = [str(root / "gen"), *_static_quads(shared, root / "static")]
    lines: list[str] = []
    res = spark_load(str(root / "spark"), inputs, partitions=8, spark=spark, log=lines.append)
    load_store(root / "python", inputs, partitions=8)
    return {
        "root": root,
        "spark": root / "spark",
        "python": root / "python",
        "res": res,
        "gen": gen,
        "log": lines,
    }


def test_spark_load_of_5m_triples_equals_python_load(loaded: dict[str, object]) -> None:
    res = loaded["res"]
    spark_dir, python_dir = loaded["spark"], loaded["python"]
    assert res.rejected == 0
    assert res.statements == loaded["gen"].lines + 68928
    assert res.total_triples >= GENERATED + 68928
    assert [
        x.split(":")[0] for x in loaded["log"] if x.split(":")[0] in ("parse", "ids", "encode+write", "done")
    ] == [
        "parse",
        "ids",
        "encode+write",
        "done",
    ]
    m = layout.read_manifest(spark_dir)
    assert m.loader == "spark"
    graphs = {g.iri: g.triples for g in m.graphs}
    assert graphs[None] >= 0.89 * GENERATED
    assert {f"{STATIC_GRAPH}SensorRepository", "http://example.org/gen/graph/0"} <= set(graphs)
    check_partitions(spark_dir)
    ref, other = layout.open_store_dictionary(python_dir), layout.open_store_dictionary(spark_dir)
    try:
        assert len(other) == res.terms == len(ref)
        assert_same_store(python_dir, spark_dir, ref, other, check_reference=False)
    finally:
        ref.close()
        other.close()


@pytest.mark.parametrize("qid", QUERIES)
def test_continuous_query_over_loaded_statics_equals_oracle(
    loaded: dict[str, object], qid: str, capsys
) -> None:
    shared = shared_or_skip()
    man = json.loads((shared / "citybench" / "manifest.json").read_text())
    q = next(x for x in man["queries"] if x["id"] == qid)
    store = loaded["spark"]
    m = layout.read_manifest(store)
    dictionary = layout.open_store_dictionary(store, m)
    out = loaded["root"] / f"{qid}.jsonl"
    try:
        engine = Engine(dictionary, default_step=q.get("default_step") or 1000)
        for st in q["statics"]:
            # the static file was loaded into the store's graph STATIC_GRAPH + its stem
            triples = layout.read_graph(store, STATIC_GRAPH + Path(st["path"]).stem, manifest=m)
            assert len(triples) > 0
            engine.add_static(st["iri"], triples)
        streams = [(s["iri"], str(shared / s["path"])) for s in q["streams"]]
        engine.declare_streams({i for i, _ in streams})
        path = shared / q["query"]
        cq = parse_continuous(
            path.read_text(encoding="utf-8"), default_name=q["name"], base=man["base"], source=str(path)
        )
        rq = engine.register(cq)
        with open(out, "w", encoding="utf-8") as f:
            replay(engine, [rq], streams, f, max_reports=q.get("max_reports"))
    finally:
        dictionary.close()
    assert out.stat().st_size > 0
    expected = shared / q["expected"]
    argv = [str(expected), str(out)]
    times = expected.with_name(expected.name + ".times")
    if q.get("max_reports") and times.exists():
        argv += ["--times", str(times)]
    rc = load_tool("compare_results").main(argv)
    assert rc == 0, capsys.readouterr().out
