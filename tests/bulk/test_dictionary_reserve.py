"""``reserve`` + ``put_many`` (the bulk loader's id assignment) on every dictionary backend.

``hbase`` runs against the in-process HBase Thrift 1 emulator (a test double).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from linkstream.rdf.dictionary import BulkDictionary, open_dictionary
from tests.rdf.hbase_support import drop_table, fresh_table

TERMS = [f"<http://ex.org/t{i}>" for i in range(50)] + ['"x"@en', "_:b1", '"' + "long " * 200 + '"']


@pytest.fixture(params=["memory", "lmdb", "hbase"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory:"
    elif request.param == "lmdb":
        yield f"lmdb:{tmp_path / 'dict'}"
    else:
        address = request.getfixturevalue("hbase_emulator_address")
        table = fresh_table()
        yield f"hbase://{address}/{table}"
        drop_table(address, table)


def test_reserve_then_publish(uri: str) -> None:
    d = open_dictionary(uri)
    try:
        assert isinstance(d, BulkDictionary)
        old = d.encode_many(TERMS[:10])
        first = d.reserve(len(TERMS))
        assert first > old.max()
        fresh = np.arange(first, first + len(TERMS), dtype=np.int64)
        # the first 10 terms exist: they keep their ids, their reserved ids stay unused
        got = d.put_many(TERMS, fresh)
        assert got.dtype == np.int64
        assert got[:10].tolist() == old.tolist()
        assert got[10:].tolist() == fresh[10:].tolist()
        assert d.decode_many(got) == TERMS
        assert d.lookup_many(TERMS).tolist() == got.tolist()
        assert len(d) == len(TERMS)
        with pytest.raises(KeyError):
            d.decode_many([int(fresh[0])])  # reserved, never published: a gap
        # later allocations never reuse reserved ids
        more = d.encode_many(["<http://ex.org/after>"])
        assert more[0] not in set(got.tolist()) and not first <= more[0] < first + len(TERMS)
        assert d.decode_many(more) == ["<http://ex.org/after>"]
    finally:
        d.close()


_OTHER_WRITER = """
import json, sys
import numpy as np
from linkstream.rdf.dictionary import open_dictionary
d = open_dictionary(sys.argv[1])
terms = json.loads(sys.argv[2])
first = d.reserve(len(terms))
ids = d.put_many(terms, np.arange(first, first + len(terms)))
d.close()
print(json.dumps([first, ids.tolist()]))
"""


def _other_writer(uri: str, terms: list[str]) -> tuple[int, list[int]]:
    """Reserve and publish ``terms`` from another process (LMDB opens an environment once per process)."""
    out = subprocess.run(
        [sys.executable, "-c", _OTHER_WRITER, uri, json.dumps(terms)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    first, ids = json.loads(out.stdout)
    return first, ids


def test_blocks_of_two_writers_are_disjoint(uri: str) -> None:
    if uri == "memory:":
        pytest.skip("memory: is private to one dictionary object")
    a = open_dictionary(uri)
    try:
        fa = a.reserve(100)
        ta = [f"<http://ex.org/a{i}>" for i in range(100)]
        tb = [f"<http://ex.org/b{i}>" for i in range(100)]
        # the other writer publishes a term of a's batch first: a must adopt its id
        tb[0] = ta[0]
        fb, ids_b = _other_writer(uri, tb)
        assert fa + 100 <= fb or fb + 100 <= fa
        assert ids_b == list(range(fb, fb + 100))
        ids_a = a.put_many(ta, np.arange(fa, fa + 100))
        assert ids_a[0] == ids_b[0] == fb
        assert ids_a[1:].tolist() == list(range(fa + 1, fa + 100))
        assert a.decode_many(ids_b) == tb and a.decode_many(ids_a) == ta
        assert len(a) == 199
    finally:
        a.close()


def test_reserve_zero_and_negative(uri: str) -> None:
    d = open_dictionary(uri)
    try:
        first = d.reserve(0)
        assert first >= 1
        assert d.put_many([], np.empty(0, dtype=np.int64)).tolist() == []
        if uri != "memory:":
            with pytest.raises(ValueError):
                d.reserve(-1)
    finally:
        d.close()
