"""A replay as a client of the live service (``replay --cluster N``,
:func:`linkstream.cluster.apireplay.replay_through_api`) equals the embedded replay for
every output form and report rule: RStream joins with static data, IStream, DStream, ASK
(a line at every report time), a group-less COUNT with a 500 ms step (0 over empty
windows), a count window, ``--max-reports``; pushed in many small chunks (a body per
stream and a watermark each), over two containers; lines in report order, then query
name, as the embedded replay writes them.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from linkstream.api.client import Client
from linkstream.cluster.apireplay import replay_through_api
from linkstream.cluster.localcluster import LocalCluster
from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

DATA = Path(__file__).resolve().parents[2] / "examples" / "citybench"
SES = "http://www.insight-centre.org/dataset/SampleEventService#"
REPOSITORY = "http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf"
SAO = "PREFIX sao: <http://purl.oclc.org/NET/sao/>\n"
EXTRA = {
    "ask": SAO + f"ASK WHERE {{ STREAM <{SES}AarhusTrafficData158505> [RANGE 2s SLIDE 1s] "
    "{ ?ob sao:hasValue ?v . FILTER(?v > 0.01) } }",
    "count": SAO + f"SELECT (COUNT(?ob) AS ?n) WHERE {{ STREAM <{SES}AarhusTrafficData182955> "
    "[RANGE 1s SLIDE 500ms] { ?ob sao:hasValue ?v . } }",
    "last5": SAO + f"SELECT ?ob WHERE {{ STREAM <{SES}AarhusTrafficData182955> [TRIPLES 5] "
    "{ ?ob sao:hasValue ?v . } }",
}


def texts() -> dict[str, str]:
    out = {p.stem: p.read_text(encoding="utf-8") for p in sorted((DATA / "queries").glob("*.rq"))}
    avg = out["rspql-avg-congestion"]
    for form, name in (("ISTREAM", "avg-i"), ("DSTREAM", "avg-d")):
        out[name] = avg.replace("REGISTER RSTREAM <avg-congestion>", f"REGISTER {form} <{name}>")
    return {**out, **EXTRA}


def canon(lines: list[str]) -> Counter[str]:
    return Counter(json.dumps(json.loads(x), sort_keys=True) for x in lines)


@pytest.mark.parametrize("max_reports", [None, 6])
def test_replay_through_the_api_equals_embedded(
    tmp_path: Path, zk_server: str, zk_chroot: str, max_reports: int | None
) -> None:
    static = str(DATA / "static" / "SensorRepository-slice.nt")
    streams = [(SES + p.stem, str(p)) for p in sorted((DATA / "streams").glob("*.nq"))]
    engine = Engine()
    graph = load_graph(static, engine.dictionary)
    engine.add_static(None, graph)
    engine.add_static(REPOSITORY, graph)
    embedded = [engine.register(parse_continuous(t, default_name=n)) for n, t in texts().items()]
    want = io.StringIO()
    replay(engine, embedded, streams, want, max_reports=max_reports)
    scratch = Engine(log_fn=lambda _m: None)
    queries = [scratch.register(parse_continuous(t, default_name=n)) for n, t in texts().items()]
    service = LocalCluster(
        tmp_path / "cluster",
        zk=f"{zk_server}{zk_chroot}",
        session_timeout=2.0,
        coordinator_args=["--idle-ms", "0", "--static", static, "--static", f"{REPOSITORY}={static}"],
    )
    got = io.StringIO()
    try:
        service.start(2, 1)
        (url,) = service.api_urls(timeout=30).values()
        with Client(url) as client:
            result = replay_through_api(
                client, queries, streams, got, max_reports=max_reports, chunk_elements=7
            )
    finally:
        service.stop()
    lines, expected = got.getvalue().splitlines(), want.getvalue().splitlines()
    assert result.chunks > (5 if max_reports is None else 1)
    assert sorted(result.containers) == ["oc-1", "oc-2"]
    assert len(lines) > 200 if max_reports is None else len(lines) > 40
    assert canon(lines) == canon(expected)
    assert result.reports == {q.name: q.stats.reports for q in embedded}
    keys = [(row["t"], row["query"]) for row in map(json.loads, lines)]
    assert keys == sorted(keys)  # report order, then query name, as the embedded replay writes
    assert {"avg-i", "avg-d", "ask", "count", "last5"} <= {k[1] for k in keys}
