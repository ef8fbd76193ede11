"""The Dictionary contract, run against every backend.

A backend is one entry of ``BACKENDS``: how to build its URI for a test directory and
a server address, whether it persists, and which fixture gives the server address.
``hbase`` runs against the in-process HBase Thrift 1 emulator (a test double);
``hbase-live`` runs against a real HBase Thrift gateway named by
``LINKSTREAM_TEST_HBASE=host:port`` and is skipped when that is unset.  Each hbase test
gets a fresh table, dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from linkstream.rdf.dictionary import Dictionary, open_dictionary
from linkstream.rdf.lmdb_dictionary import LmdbDictionary
from tests.rdf.hbase_support import (
    Backend,
    backends,
    drop_table,
)

BACKENDS = backends("dict")


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, str]]:
    b = BACKENDS[request.param]
    address = request.getfixturevalue(b.server) if b.server else ""
    uri = b.uri(tmp_path, address)
    yield b, uri
    if uri.startswith("hbase://"):
        drop_table(address, uri.rsplit("/", 1)[1])


@pytest.fixture
def dictionary(backend: tuple[Backend, str]) -> Iterator[Dictionary]:
    d = open_dictionary(backend[1])
    yield d
    d.close()


TERMS = [
    "<http://ex.org/s>",
    "<http://ex.org/p>",
    '"plain"',
    '"x"@en',
    '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
    "_:b1",
    '"caf\u00e9 \u6771\u4eac \U0001f600"',
    '"tab\there \\"quoted\\" \\n"',
    "<http://ex.org/\u00e4\u00f6\u00fc>",
    '"' + "long " * 400 + '"',  # longer than LMDB's 511-byte key limit
    '"' + "\u00e9" * 300 + '"',  # 600 bytes of UTF-8, 302 characters
]


def test_is_a_dictionary(dictionary: Dictionary) -> None:
    assert isinstance(dictionary, Dictionary)
    assert len(dictionary) == 0


def test_round_trip(dictionary: Dictionary) -> None:
    ids = dictionary.encode_many(TERMS)
    assert ids.dtype == np.int64 and ids.shape == (len(TERMS),)
    assert len(set(ids.tolist())) == len(TERMS)
    assert dictionary.decode_many(ids) == TERMS
    assert dictionary.decode_many(ids.tolist()) == TERMS
    assert len(dictionary) == len(TERMS)


def test_id_zero_is_never_allocated(dictionary: Dictionary) -> None:
    ids = dictionary.encode_many(TERMS + [f"<http://ex.org/{i}>" for i in range(1000)])
    assert (ids > 0).all()
    with pytest.raises(KeyError):
        dictionary.decode_many([0])


def test_same_term_same_id(dictionary: Dictionary) -> None:
    first = dictionary.encode_many(TERMS)
    again = dictionary.encode_many(list(reversed(TERMS)))
    assert again.tolist() == list(reversed(first.tolist()))
    assert dictionary.lookup_many(TERMS).tolist() == first.tolist()
    assert len(dictionary) == len(TERMS)


def test_duplicates_within_one_call(dictionary: Dictionary) -> None:
    terms = [
        "<http://ex.org/a>",
        "<http://ex.org/b>",
        "<http://ex.org/a>",
        TERMS[9],
        TERMS[9],
        "<http://ex.org/b>",
    ]
    ids = dictionary.encode_many(terms).tolist()
    assert ids[0] == ids[2] and ids[1] == ids[5] and ids[3] == ids[4]
    assert len({ids[0], ids[1], ids[3]}) == 3
    assert len(dictionary) == 3


def test_lookup_of_unknown_is_zero(dictionary: Dictionary) -> None:
    dictionary.encode_many(TERMS[:2])
    got = dictionary.lookup_many([TERMS[0], "<http://ex.org/unknown>", TERMS[1], TERMS[9]])
    assert got.dtype == np.int64
    assert got[1] == 0 and got[3] == 0 and got[0] > 0 and got[2] > 0
    assert len(dictionary) == 2  # lookup does not allocate


def test_decode_of_unknown_id_raises(dictionary: Dictionary) -> None:
    ids = dictionary.encode_many(TERMS[:3])
    for bad in (int(ids.max()) + 1, 10**12, -1):
        with pytest.raises(KeyError):
            dictionary.decode_many([int(ids[0]), bad])


def test_empty_inputs(dictionary: Dictionary) -> None:
    assert dictionary.encode_many([]).shape == (0,)
    assert dictionary.lookup_many([]).shape == (0,)
    assert dictionary.decode_many(np.empty(0, dtype=np.int64)) == []


def test_bulk_100k_terms(dictionary: Dictionary) -> None:
    terms = [f"<http://ex.org/resource/{i}>" for i in range(100_000)]
    ids = dictionary.encode_many(terms)
    assert len(np.unique(ids)) == 100_000 and (ids > 0).all()
    assert len(dictionary) == 100_000
    mixed = terms[::-7] + ['"new"']
    again = dictionary.encode_many(mixed)
    assert again[:-1].tolist() == ids[::-7].tolist()
    assert len(dictionary) == 100_001
    sample = ids[::997]
    assert dictionary.decode_many(sample) == terms[::997]
    assert dictionary.lookup_many(terms[-5:]).tolist() == ids[-5:].tolist()


def test_persistence_across_reopen(backend: tuple[Backend, str]) -> None:
    b, uri = backend
    if not b.persistent:
        pytest.skip("backend is not persistent")
    d = open_dictionary(uri)
    ids = d.encode_many(TERMS)
    d.close()
    d = open_dictionary(uri)
    try:
        assert d.lookup_many(TERMS).tolist() == ids.tolist()
        assert d.decode_many(ids) == TERMS
        assert len(d) == len(TERMS)
        new = d.encode_many(['"after reopen"'])  # allocation goes on after the old ids
        assert int(new[0]) > int(ids.max())
    finally:
        d.close()


def test_unknown_scheme() -> None:
    with pytest.raises(ValueError, match="unknown dictionary backend.*nosuch"):
        open_dictionary("nosuch://host/table")


# ------------------------------------------------------------------ LMDB specifics


def test_lmdb_uri_forms(tmp_path: Path) -> None:
    for uri in (f"lmdb:{tmp_path}/a", f"lmdb://{tmp_path}/b", f"lmdb:{tmp_path}/new/nested/dir"):
        d = open_dictionary(uri)
        assert isinstance(d, LmdbDictionary) and Path(d.path).is_dir()
        d.close()
        d.close()  # idempotent
    with pytest.raises(ValueError):
        open_dictionary("lmdb:")


def test_lmdb_map_grows_when_full(tmp_path: Path) -> None:
    with LmdbDictionary(str(tmp_path / "small"), map_size=1 << 16, write_batch=1000) as d:
        terms = ['"' + "v" * 200 + str(i) + '"' for i in range(5000)]
        ids = d.encode_many(terms)
        assert len(d) == 5000
        assert d.decode_many(ids[::499]) == terms[::499]


def test_lmdb_small_caches_and_batches(tmp_path: Path) -> None:
    path = str(tmp_path / "c")
    with LmdbDictionary(path, cache_size=10, write_batch=7) as d:
        terms = [f"<http://ex.org/{i}>" for i in range(100)]
        ids = d.encode_many(terms)
        assert ids.tolist() == list(range(1, 101))
        assert d.encode_many(terms).tolist() == ids.tolist()
        assert d.decode_many(ids) == terms
        assert d.lookup_many(terms[::-1]).tolist() == ids[::-1].tolist()


def test_lmdb_two_handles_share_ids(tmp_path: Path) -> None:
    # a second process-like handle opened after the first is closed sees its ids, and
    # terms written by one handle are found (not re-allocated) by the other
    path = str(tmp_path / "shared")
    with LmdbDictionary(path) as a:
        a_ids = a.encode_many(["<http://ex.org/x>", "<http://ex.org/y>"])
    with LmdbDictionary(path) as b:
        assert b.encode_many(["<http://ex.org/y>", "<http://ex.org/z>"]).tolist() == [int(a_ids[1]), 3]
