"""The hand-off form of one body of stream elements (owner coordinator -> leader, and the
bodies of the owners' stream logs): the distinct terms once and the triples as a raw
int32 buffer of indexes into them (see :mod:`linkstream.cluster.ingest`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from linkstream.engine.live.batchpush import RefRows, TermRows

#: what a meta body (``run --zk --ingest meta``) keeps of a logged body's hand-off form: no
#: terms, no triples -- the leader decides on the event times and logs references
META_FIELDS = ("stream", "owner", "epoch", "offset", "key", "record", "t", "n")


def pack_elements(elements: Sequence[tuple[int, Any]]) -> dict[str, Any]:
    """The hand-off form of a body's ``(t, [(s, p, o), ...])`` elements: ``t`` and ``n``
    (triples) per element, ``terms`` the distinct terms in first-seen order, ``idx`` the
    triples as little-endian int32 indexes into ``terms`` (raw bytes, three per triple)."""
    flat = [term for _, triples in elements for tr in triples for term in tr]
    terms = list(dict.fromkeys(flat))
    where = dict(zip(terms, range(len(terms))))
    idx = np.fromiter(map(where.__getitem__, flat), dtype="<i4", count=len(flat))
    return {
        "t": [int(t) for t, _ in elements],
        "n": [len(triples) for _, triples in elements],
        "terms": terms,
        "idx": idx.tobytes(),
    }


def with_refs(elements: list[tuple[int, TermRows]], epoch: int, record: int) -> list[tuple[int, TermRows]]:
    """``elements`` of one body, each naming its place in the owner's stream log
    (:attr:`TermRows.ref <linkstream.engine.live.batchpush.TermRows>`)."""
    for j, (_, rows) in enumerate(elements):
        rows.ref = (epoch, record, j)
    return elements


def split_elements(doc: dict[str, Any]) -> list[tuple[int, TermRows]]:
    """The elements of a :func:`pack_elements` form built by this process, each's triples a
    :class:`TermRows` view of ``idx`` (no checks: :func:`unpack_elements` checks a peer's)."""
    idx = np.frombuffer(doc["idx"], dtype="<i4").reshape(-1, 3)
    terms, ns = doc["terms"], doc["n"]
    cuts = np.cumsum([0, *ns]).tolist()
    return [(t, TermRows(terms, idx[a:b])) for t, a, b in zip(doc["t"], cuts[:-1], cuts[1:])]


def _check_times(ts: Any, ns: Any) -> None:
    """A body's per-element event times ``t`` and triple counts ``n`` (ValueError: why not)."""
    if type(ts) is not list or type(ns) is not list or len(ts) != len(ns):
        raise ValueError("t and n must be lists of one entry per element")
    if not all(type(x) is int and x >= 0 for x in ns) or not all(type(x) is int for x in ts):
        raise ValueError("t must hold integers and n counts >= 0")


def unpack_elements(doc: dict[str, Any]) -> list[tuple[int, TermRows]]:
    """The elements of :func:`pack_elements`' form, each's triples a :class:`TermRows` view.

    Raises:
        ValueError: The parts do not fit together (one line saying which).
    """
    ts, ns, terms, raw = doc["t"], doc["n"], doc["terms"], doc["idx"]
    _check_times(ts, ns)
    if type(terms) is not list or not all(type(x) is str for x in terms):
        raise ValueError("terms must be a list of strings")
    total = sum(ns)
    if not isinstance(raw, bytes) or len(raw) != 12 * total:
        raise ValueError(f"idx must hold {total} triples of three int32 indexes")
    idx = np.frombuffer(raw, dtype="<i4").reshape(-1, 3)
    if total and (int(idx.min()) < 0 or int(idx.max()) >= len(terms)):
        raise ValueError("idx names a term outside terms")
    cuts = np.cumsum([0, *ns]).tolist()
    return [(t, TermRows(terms, idx[a:b])) for t, a, b in zip(ts, cuts[:-1], cuts[1:])]


def meta_elements(doc: dict[str, Any]) -> list[tuple[int, TermRows]]:
    """The elements of a meta body: each a :class:`RefRows` of its size and its reference
    ``(epoch, record, index)`` into the owner's stream log.

    Raises:
        ValueError: The parts do not fit together (one line saying which).
    """
    ts, ns, epoch, record = doc["t"], doc["n"], doc["epoch"], doc["record"]
    _check_times(ts, ns)
    if type(epoch) is not int or type(record) is not int:
        raise ValueError("epoch and record must be integers")
    return [(t, RefRows(n, (epoch, record, j))) for j, (t, n) in enumerate(zip(ts, ns))]


__all__ = ["META_FIELDS", "meta_elements", "pack_elements", "split_elements", "unpack_elements", "with_refs"]
