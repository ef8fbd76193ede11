#!/usr/bin/env python3
"""One-shot SPARQL: LinkStream's store exploration vs pyoxigraph, on the same data and queries.

Loads the CityBench static graphs (``--scale K`` adds K-1 renamed copies of them, so the
graph grows while each query's answer from a constant stays the same size) into

* a LinkStream store directory (``linkstream.store.loader``), opened as a
  ``PersistentStore`` and queried with ``linkstream.engine.oneshot.store.run_sparql``;
* a pyoxigraph ``Store`` (bulk load of the same N-Triples);
* for reference, LinkStream's former one-shot path (``api.oneshot`` planning scans and
  hash joins over whole static graphs of an ``Engine``).

Every query runs ``--repeat`` times in each system (after one warm-up); the median
wall time per query includes parsing and materialising all results (LinkStream caches the
parsed algebra of a query text, as a server would; the cold first run is recorded too).  Prints per query and
as geometric means the ratio pyoxigraph time / LinkStream time (> 1: LinkStream faster),
and writes raw figures to ``bench/results/oneshot.json``.

    python bench/oneshot.py [--scale 4] [--repeat 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()

P = """PREFIX ct: <http://www.insight-centre.org/citytraffic#>
PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX ces: <http://www.insight-centre.org/ces#>
PREFIX owls: <http://www.daml.org/services/owl-s/1.2/Service.owl#>
PREFIX cat: <http://www.daml.org/services/owl-s/1.2/ServiceCategory.owl#>
PREFIX par: <http://www.daml.org/services/owl-s/1.2/ServiceParameter.owl#>
PREFIX emvo: <http://sense.deri.ie/vocab/emvo#>
PREFIX ses: <http://www.insight-centre.org/dataset/SampleEventService#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
"""

QUERIES: dict[str, str] = {
    "const-subject": "SELECT ?p ?o WHERE { ses:AarhusParkingDataKALKVAERKSVEJ ?p ?o }",
    "const-star": "SELECT ?prop ?foi ?t WHERE { ses:AarhusParkingDataKALKVAERKSVEJ ssn:observes ?prop . "
    "?prop ssn:isPropertyOf ?foi ; a ?t }",
    "const-path-4": "SELECT ?name ?v WHERE { ses:AarhusPollutionData158505 owls:presents ?prof . "
    "?prof ces:hasPrice ?pr . ?pr par:serviceParameterName ?name ; par:sParameter ?q . ?q emvo:hasQuantityValue ?v }",
    "literal-start": 'SELECT ?n ?lat WHERE { ?n ct:hasNodeName "Risskov" ; ct:hasLatitude ?lat }',
    "type-star": "SELECT ?n ?lat ?lon WHERE { ?n a ct:ParkingVacancy ; ssn:isPropertyOf ?f }",
    "path-all": "SELECT ?svc ?prop ?foi WHERE { ?svc ssn:observes ?prop . ?prop ssn:isPropertyOf ?foi }",
    "filter-range": "SELECT ?n WHERE { ?n ct:hasLatitude ?lat ; ct:hasLongitude ?lon "
    "FILTER(?lat > 56.1 && ?lat < 56.15 && ?lon >= 10.2) }",
    "optional": "SELECT ?prof ?cat WHERE { ?prof a ces:EventProfile OPTIONAL { ?prof cat:serviceCategory ?c . "
    "?c cat:serviceCategoryName ?cat } }",
    "group-count": "SELECT ?t (COUNT(?s) AS ?c) WHERE { ?s a ?t } GROUP BY ?t",
    "aggregates": "SELECT ?name (SUM(?v) AS ?sum) (AVG(?v) AS ?avg) WHERE { ?x par:serviceParameterName ?name ; "
    "par:sParameter ?q . ?q emvo:hasQuantityValue ?v } GROUP BY ?name",
    "order-limit": "SELECT ?n ?lat WHERE { ?n a ct:Node ; ct:hasLatitude ?lat } ORDER BY DESC(?lat) ?n LIMIT 10",
    "values": "SELECT ?s ?o WHERE { VALUES ?s { ses:AarhusParkingDataKALKVAERKSVEJ ses:AarhusPollutionData158505 } "
    "?s ssn:observes ?o }",
    "ask": 'ASK { ?x ct:hasNodeName "Risskov" }',
    # LIMIT without ORDER BY: the exploration stops once enough rows exist
    "limit-star": "SELECT ?n ?lat ?lon WHERE { ?n a ct:Node ; ct:hasLatitude ?lat ; ct:hasLongitude ?lon } LIMIT 10",
    "limit-path": "SELECT ?svc ?prop ?foi WHERE { ?svc ssn:observes ?prop . ?prop ssn:isPropertyOf ?foi } LIMIT 10",
    "limit-all": "SELECT ?s ?p ?o WHERE { ?s ?p ?o } LIMIT 10",
    "ask-join": "ASK { ?s ssn:observes ?prop . ?prop ssn:isPropertyOf ?foi }",
}

_IRI = re.compile(r"<(http://www\.insight-centre\.org/dataset/SampleEventService#[^>]*)>")
_BN = re.compile(r"_:(\S+)")


def make_data(tmp: Path, scale: int) -> list[Path]:
    """The static files, plus ``scale - 1`` copies with renamed resources and blank nodes."""
    files = sorted((SHARED / "citybench" / "static").glob("*.nt"))
    out = list(files)
    for k in range(1, scale):
        dst = tmp / f"copy{k}.nt"
        with dst.open("w", encoding="utf-8") as w:
            for f in files:
                for line in f.open(encoding="utf-8"):
                    line = _IRI.sub(lambda m, k=k: f"<{m.group(1)}-c{k}>", line)
                    w.write(_BN.sub(lambda m, k=k: f"_:c{k}{m.group(1)}", line))
        out.append(dst)
    return out


def timed(fn, repeat: int) -> tuple[float, object, float]:
    """(median time of ``repeat`` runs, the result, time of the first, cold run)."""
    t0 = time.perf_counter()
    res = fn()  # warm-up (and the result)
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), res, first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=4, help="copies of the static graphs (default 4)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per query (default 5)")
    ap.add_argument("--no-engine", action="store_true", help="skip the former api.oneshot path")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "oneshot.json"))
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from linkstream.engine.embedded import Engine
    from linkstream.engine.oneshot.embedded import evaluate_one_shot, parse_one_shot
    from linkstream.engine.oneshot.store import run_sparql
    from linkstream.rdf.static import load_graph
    from linkstream.store.loader import load_store
    from linkstream.store.persistent import PersistentStore

    with tempfile.TemporaryDirectory(prefix="ls-oneshot-") as tmpd:
        tmp = Path(tmpd)
        files = make_data(tmp, args.scale)
        t0 = time.perf_counter()
        load_store(tmp / "store", files, progress=lambda m: print("  " + m, file=sys.stderr))
        store = PersistentStore.open(tmp / "store", background_compaction=False)
        t_ls = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref = ox.Store()
        for f in files:
            ref.bulk_load(path=str(f), format=ox.RdfFormat.N_TRIPLES)
        t_ox = time.perf_counter() - t0
        n = sum(len(store.snapshot().triples(g)) for g in store.snapshot().graphs())
        print(f"{n} triples; load + index: linkstream {t_ls:.2f}s, pyoxigraph {t_ox:.2f}s")
        engine = None
        if not args.no_engine:
            engine = Engine(dictionary=store.dictionary)
            for f in files:
                engine.add_static(None, load_graph(str(f), store.dictionary))

        rows = []
        print(
            f"{'query':16s} {'rows':>7s} {'linkstream':>11s} {'pyoxigraph':>11s} {'ox/ls':>7s} {'scan-join':>10s}"
        )
        for qid, body in QUERIES.items():
            q = P + body

            def ours(q=q):
                return run_sparql(store, q)

            def theirs(q=q):
                r = ref.query(q)
                return bool(r) if isinstance(r, ox.QueryBoolean) else len(list(r))

            t_ours, res, cold = timed(ours, args.repeat)
            t_theirs, nref, _ = timed(theirs, args.repeat)
            nres = len(res["results"]["bindings"]) if "results" in res else res.get("boolean")
            t_eng = None
            if engine is not None:
                cq = parse_one_shot(q, "http://localhost/")
                t_eng, _, _ = timed(lambda cq=cq: evaluate_one_shot(engine, cq), max(1, args.repeat // 2))
            ratio = t_theirs / t_ours
            rows.append(
                {
                    "query": qid,
                    "rows": nres,
                    "rows_pyoxigraph": nref,
                    "linkstream_s": t_ours,
                    "linkstream_first_s": cold,
                    "pyoxigraph_s": t_theirs,
                    "scan_join_s": t_eng,
                    "ratio_pyoxigraph_over_linkstream": ratio,
                }
            )
            eng = f"{t_eng * 1000:8.1f}ms" if t_eng is not None else "-"
            print(
                f"{qid:16s} {str(nres):>7s} {t_ours * 1000:9.1f}ms {t_theirs * 1000:9.1f}ms {ratio:7.2f} {eng:>10s}"
            )
        store.close()
    geo = math.exp(sum(math.log(r["ratio_pyoxigraph_over_linkstream"]) for r in rows) / len(rows))
    print(f"geometric mean pyoxigraph time / LinkStream time: {geo:.3f} (> 1: LinkStream faster)")
    lim = [r for r in rows if r["query"].startswith(("limit-", "ask"))]
    geo_limit = math.exp(sum(math.log(r["ratio_pyoxigraph_over_linkstream"]) for r in lim) / len(lim))
    print(f"  of which LIMIT / ASK queries (early stop): {geo_limit:.3f}")
    with_eng = [r for r in rows if r["scan_join_s"]]
    if with_eng:
        g2 = math.exp(sum(math.log(r["scan_join_s"] / r["linkstream_s"]) for r in with_eng) / len(with_eng))
        print(f"geometric mean former scan+hash-join path time / exploration time: {g2:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "triples": n,
        "scale": args.scale,
        "repeat": args.repeat,
        "load_s": {"linkstream": t_ls, "pyoxigraph": t_ox},
        "queries": rows,
        "geomean_pyoxigraph_over_linkstream": geo,
        "geomean_limit_pyoxigraph_over_linkstream": geo_limit,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"raw figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
