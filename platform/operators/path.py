"""Arbitrary-length property paths (``p*``, ``p+``, ``p?``): the node pairs a path connects.

SPARQL 1.1 evaluates ``ZeroOrMorePath``, ``OneOrMorePath`` and ``ZeroOrOnePath`` with set
semantics: each pair of nodes connected at most once, however many paths (or cycles)
connect them.  :func:`reach` computes those pairs from the inner path's relation (a
vectorised breadth-first search over a CSR adjacency, frontier by frontier, with visited
``(start, node)`` pairs as sorted int64 keys), and :func:`closure_operator` wraps it in a
:class:`~linkstream.operators.recompute.RecomputeOperator`: the inner relation is
maintained incrementally and the closure recomputed from it in the epochs where it
changed (there is no bounded incremental form of a transitive closure under deletions).

Zero-length paths: a constant end connects to itself whether or not the graph holds it
(as the W3C tests ``zero_or_more_set_start`` ... ``zero_or_one_set_end`` require; Oxigraph
0.5, the reference evaluator elsewhere, returns nothing there);
with both ends variables the zero-length pairs are the graph's nodes (every subject and
object), read from the graph operator given as the second input.
"""

from __future__ import annotations

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch
from linkstream.operators.recompute import RecomputeOperator
from linkstream.operators.scan import Slot

_I64 = np.int64
_EMPTY = np.empty(0, dtype=_I64)


def reach(
    src: np.ndarray, dst: np.ndarray, starts: np.ndarray, zero: bool, more: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``(start, node)`` pairs with ``node`` reachable from ``start``.

    Args:
        src: Edge sources (ids).
        dst: Edge targets (ids), one per source.
        starts: Start nodes (ids; repeats allowed).
        zero: Whether a zero-length path counts (``start`` reaches itself).
        more: Whether paths may have more than one edge (else at most one).

    Returns:
        Two id arrays of equal length, sorted by ``(start, node)``.
    """
    starts = np.unique(np.asarray(starts, dtype=_I64))
    if not len(starts):
        return _EMPTY, _EMPTY
    nodes = np.unique(np.concatenate([src, dst, starts]).astype(_I64))
    n = len(nodes)
    a = np.searchsorted(nodes, src)
    b = np.searchsorted(nodes, dst)
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    ptr = np.searchsorted(a, np.arange(n + 1))
    st = np.searchsorted(nodes, starts).astype(_I64)

    def step(keys: np.ndarray) -> np.ndarray:
        """Distinct keys one edge further than ``keys``."""
        fs, fn = keys // n, keys % n
        cnt = ptr[fn + 1] - ptr[fn]
        total = int(cnt.sum())
        if not total:
            return _EMPTY
        first = np.cumsum(cnt) - cnt
        off = np.repeat(ptr[fn] - first, cnt) + np.arange(total)
        return np.unique(np.repeat(fs, cnt) * n + b[off])

    zero_keys = st * n + st
    found = step(zero_keys)
    if more:
        seen = np.union1d(zero_keys, found) if zero else found
        frontier = found if not zero else np.setdiff1d(found, zero_keys, assume_unique=True)
        while len(frontier):
            nxt = step(frontier)
            frontier = np.setdiff1d(nxt, seen, assume_unique=True)
            if len(frontier):
                seen = np.union1d(seen, frontier)
        keys = seen
    else:
        keys = np.union1d(zero_keys, found) if zero else found
    return nodes[keys // n], nodes[keys % n]


def _nodes(triples: Batch) -> np.ndarray:
    """Every subject and object of a graph's triples (a ``(s, p, o)`` batch)."""
    if not len(triples):
        return _EMPTY
    live = triples.cols[:, triples.counts > 0]
    return np.unique(np.concatenate([live[0], live[2]]))


def closure_operator(
    inner: Operator,
    a: str,
    b: str,
    s: Slot,
    o: Slot,
    mode: str,
    graph: Operator | None = None,
) -> Operator:
    """The pairs ``(s, o)`` that ``inner*`` / ``inner+`` / ``inner?`` connects.

    Args:
        inner: The inner path's relation, binding ``a`` (start) and ``b`` (end) of each edge.
        a: The variable of ``inner`` holding edge sources.
        b: The variable of ``inner`` holding edge targets.
        s: The subject: ``("var", name)`` or ``("const", id)``.
        o: The object, likewise.
        mode: ``"*"``, ``"+"`` or ``"?"``.
        graph: The graph operator whose nodes are the zero-length pairs when ``s`` and
            ``o`` are both variables (required then, for ``*`` and ``?``).

    Returns:
        An operator binding the variables among ``s`` and ``o`` (one row per pair).
    """
    zero, more = mode in ("*", "?"), mode in ("*", "+")
    out: list[str] = []
    for kind, v in (s, o):
        if kind == "var" and v not in out:
            out.append(str(v))
    need_nodes = zero and s[0] == "var" and o[0] == "var"
    children = [inner] + ([graph] if need_nodes and graph is not None else [])

    def fn(inputs: list[Batch]) -> Batch:
        rel = inputs[0]
        live = rel.counts > 0
        src, dst = rel.col(a)[live], rel.col(b)[live]
        if s[0] == "const":
            start, end = reach(src, dst, np.array([s[1]], dtype=_I64), zero, more)
            if o[0] == "const":
                return Batch.unit() if bool((end == int(o[1])).any()) else Batch.empty(())
            return Batch((str(o[1]),), end.reshape(1, -1), np.ones(len(end), dtype=_I64))
        if o[0] == "const":
            start, end = reach(dst, src, np.array([o[1]], dtype=_I64), zero, more)
            return Batch((str(s[1]),), end.reshape(1, -1), np.ones(len(end), dtype=_I64))
        starts = np.unique(src)
        if need_nodes and len(inputs) > 1:
            starts = np.union1d(starts, _nodes(inputs[1]))
        start, end = reach(src, dst, starts, zero, more)
        if s[1] == o[1]:
            keep = start == end
            return Batch((str(s[1]),), start[keep].reshape(1, -1), np.ones(int(keep.sum()), dtype=_I64))
        return Batch((str(s[1]), str(o[1])), np.stack([start, end]), np.ones(len(start), dtype=_I64))

    return RecomputeOperator(children, fn, out, out, f"path{mode}")


__all__ = ["closure_operator", "reach"]
