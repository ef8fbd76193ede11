"""Comparing two store directories by meaning: decoded triples per graph, dictionary consistency."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from linkstream.rdf.dictionary import Dictionary
from linkstream.store import layout


def check_partitions(store_dir: str | Path) -> None:
    """Every partition file is an (n, 3) int64 array of distinct rows with ``s % P == k``."""
    m = layout.read_manifest(store_dir)
    for g in m.graphs:
        total = 0
        for k in range(m.partitions):
            path = layout.partition_path(store_dir, g.dir, k)
            if not path.exists():
                continue
            a = np.load(path, allow_pickle=False)
            assert a.dtype == np.int64 and a.ndim == 2 and a.shape[1] == 3, path
            assert a.flags.c_contiguous
            assert (a > 0).all(), path
            assert (a[:, 0] % m.partitions == k).all(), f"{path}: a row outside its partition"
            assert len(layout.unique_rows(a)) == len(a), f"{path}: repeated rows"
            total += len(a)
        assert total == g.triples, f"graph {g.iri}: manifest says {g.triples}, files hold {total}"


def digest(rows: np.ndarray) -> str:
    """SHA-256 of the distinct, sorted rows of an (n, 3) int64 array."""
    return hashlib.sha256(layout.unique_rows(rows).tobytes()).hexdigest()


def check_dictionary(d: Dictionary, ids: np.ndarray) -> list[str]:
    """Every id decodes to a term that looks up to the same id; returns the terms."""
    terms = d.decode_many(ids)
    assert len(set(terms)) == len(terms), "two ids decode to one term"
    back = d.lookup_many(terms)
    assert np.array_equal(back, ids), "a term looks up to another id than the one it decodes from"
    return terms


def assert_same_store(
    ref_dir: str | Path,
    other_dir: str | Path,
    ref_dict: Dictionary,
    other_dict: Dictionary,
    *,
    check_reference: bool = True,
) -> None:
    """``other`` holds the same triples per graph as ``ref`` once its ids are mapped through the terms.

    ``other``'s dictionary (and ``ref``'s if ``check_reference``) is checked for consistency
    on the ids the store uses: each decodes to a term that looks up to it.  Works on
    millions of triples: ids are mapped by array lookups, rows compared as sorted arrays.
    """
    ma, mb = layout.read_manifest(ref_dir), layout.read_manifest(other_dir)
    assert {g.iri: g.triples for g in ma.graphs} == {g.iri: g.triples for g in mb.graphs}
    for g in ma.graphs:
        ta = layout.read_graph(ref_dir, g.iri, manifest=ma)
        tb = layout.read_graph(other_dir, g.iri, manifest=mb)
        assert len(ta) == len(tb) == g.triples
        ub = np.unique(tb)
        terms = check_dictionary(other_dict, ub)
        in_ref = ref_dict.lookup_many(terms)
        assert (in_ref > 0).all(), "a term of the other store is unknown to the reference dictionary"
        mapped = in_ref[np.searchsorted(ub, tb)]
        if check_reference:
            check_dictionary(ref_dict, np.unique(ta))
        assert digest(mapped) == digest(ta), f"graph {g.iri}: triples differ"
