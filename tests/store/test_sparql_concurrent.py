"""One-shot queries while a stream is absorbed: every answer matches exactly its snapshot."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from linkstream.engine.oneshot.store import run_sparql
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store.memory import MemoryStore
from linkstream.store.persistent import PersistentStore

BATCHES = 400
Q = """PREFIX ex: <http://example.org/>
SELECT (COUNT(*) AS ?pairs) (COUNT(DISTINCT ?label) AS ?labels) WHERE {
  ?x ex:a ?y . ?y ex:b ?z BIND(CONCAT("seen ", STR(?z)) AS ?label) }"""


@pytest.mark.parametrize("kind", ["memory", "persistent"])
def test_queries_during_absorption_see_whole_batches(kind: str) -> None:
    d = MemoryDictionary()
    if kind == "memory":
        store = MemoryStore(d)
    else:
        store = PersistentStore(d, {None: np.empty((0, 3), dtype=np.int64)}, compact_threshold=64)
    pa, pb = d.encode_many(["<http://example.org/a>", "<http://example.org/b>"])
    errors: list[BaseException] = []

    def absorb() -> None:
        try:
            for k in range(BATCHES):
                # every batch brings new terms: the dictionary grows under the queries
                x, y, z = d.encode_many(
                    [f"<http://example.org/x{k}>", f"<http://example.org/y{k}>", f'"v{k}"']
                )
                store.absorb("pairs", k, np.array([[x, pa, y], [y, pb, z]], dtype=np.int64))
                time.sleep(0.001)  # let the queries interleave (the GIL favours this loop)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=absorb)
    t.start()
    seen = []
    try:
        while t.is_alive() or not seen:
            snap = store.snapshot()
            res = run_sparql(snap, Q, dictionary=d)
            row = res["results"]["bindings"][0]
            pairs, labels = int(row["pairs"]["value"]), int(row["labels"]["value"])
            expected = snap.vts[0] + 1 if snap.vts else 0
            assert pairs == labels == expected, (pairs, labels, snap.vts)
            seen.append(expected)
    finally:
        t.join()
    assert not errors
    final = run_sparql(store, Q)["results"]["bindings"][0]
    assert int(final["pairs"]["value"]) == BATCHES
    assert len(seen) > 3 and len(set(seen)) > 2  # queries really overlapped the absorption
    if kind == "persistent":
        store.close()  # type: ignore[union-attr]
