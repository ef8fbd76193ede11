"""Snapshot and restore of a query's operator state, to migrate it between engines.

When a task moves from one container to another, the source snapshots the state of the
query's operators (join relations, aggregate groups and results, distinct counts, graph
contents, the output's current result and first-epoch flags) and the target restores it
into the operators it just planned for the same query, instead of rebuilding them from
its stream buffers.

The walk is generic: every operator of the query is visited in a fixed depth-first order
(``AttachOperator`` wrappers are transparent, so the order only depends on the plan) and
its attributes are classified by type:

* ``Relation``, lists of ``Relation`` and ``Batch``: state, shipped as int64 buffers;
* private ``bool``/``int``/``str`` attributes (``_first``, ``_initialised``,
  ``_seen_version`` ...): first-epoch flags and versions, shipped in the header;
* everything else (children, expressions, evaluators, config tuples) is configuration,
  which the target's own planning reproduced.

Windows are views on the stream buffers, which the target holds for every stream the
query reads (it subscribed to them, and got their retained backlog, before the state is
shipped; see :mod:`linkstream.containers.replica`): a restored window is moved to the source's last report time without
emitting anything, so its next delta is that of the next report only.  Operators that
pre-existed on the target (reached through an ``AttachOperator``) already hold the same
state and are left alone; the attach wrappers are marked attached so they do not replay
their shared operator's whole content.

Dictionary ids differ between engines (each container encodes its static graphs and the
terms expressions compute in its own dictionary), so a snapshot carries the terms of every
id its buffers use and the target re-encodes them.  Plans that differ between the two
engines (a different join order, or sharing that inserted a renaming on one side only)
or operators whose state is not plain relations (routers of shared joins, timed windows)
raise :class:`StateError`; the caller then rebuilds the query from its stream buffers.

Wire form (:func:`encode_state` / :func:`decode_state`): one msgpack header, then one raw
little-endian int64 buffer per array.  Nothing is pickled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch
from linkstream.operators.relation import Relation
from linkstream.operators.window import WindowOperator

STATE_VERSION = 1
_I8 = np.dtype("<i8")

#: attributes that are caches or engine-local bookkeeping, never migrated
_SKIP = frozenset(
    {
        "_epoch",
        "_out",
        "_pslice",
        "_static_index",
        "_bodies",
        "_quiet",
        "_static_seen",
        "static",  # a graph's static part: every container loaded the same static graphs
        "generation",
        "sig",
        "children",
        "vars",
        "certain",
    }
)

#: variables of shared joins that hold element timestamps, not dictionary ids (the names
#: ``linkstream.engine.sharing`` gives them)
TIME_VAR_PREFIX = "%t"

#: operators of shared joins across window ranges (``linkstream.operators.router``): their
#: state numbers subscriber groups per engine and mixes timestamps into join rows, so a
#: query using them is rebuilt rather than migrated
_UNSUPPORTED = frozenset({"RouterOperator", "RouteOperator", "TimedWindowOperator", "TimedScanOperator"})


class StateError(ValueError):
    """The state cannot be snapshotted here or restored there (rebuild instead)."""


@dataclass
class QueryState:
    """A snapshot: a msgpack-able header and the int64 arrays it refers to by index.

    Attributes:
        header: ``{"v", "query", "c", "fp", "nodes", "output", "last_report", "ids_at"}``.
        arrays: Buffers referred to by index from the header.
    """

    header: dict[str, Any]
    arrays: list[np.ndarray]

    @property
    def nbytes(self) -> int:
        """Bytes of all buffers."""
        return int(sum(a.nbytes for a in self.arrays))

    @property
    def rows(self) -> int:
        """Mappings (rows of relations and batches) and window entries in the snapshot."""
        return int(self.header.get("rows", 0))


# ----------------------------------------------------------------------------- the walk


def _walk(root: Operator) -> tuple[list[tuple[Operator, bool]], list[AttachOperator]]:
    """Operators under ``root`` in depth-first order, each with "behind an attach" flag.

    Attach wrappers are skipped in the order (and returned separately), so two engines
    that planned the same query list the same operators in the same order.
    """
    order: list[tuple[Operator, bool]] = []
    attaches: list[AttachOperator] = []
    seen: set[int] = set()
    stack: list[tuple[Operator, bool]] = [(root, False)]
    while stack:
        op, behind = stack.pop()
        if isinstance(op, AttachOperator):
            if not behind:
                attaches.append(op)
            stack.append((op.shared, True))
            continue
        if id(op) in seen:
            continue
        seen.add(id(op))
        order.append((op, behind))
        stack.extend((c, behind) for c in reversed(op.children))
    return order, attaches


def _fingerprint(op: Operator) -> list[Any]:
    fp: list[Any] = [type(op).__name__, list(op.vars)]
    if isinstance(op, WindowOperator):
        fp.append(repr(op.spec))
    return fp


def migratable(root: Operator) -> bool:
    """Whether the query planned as ``root`` can have its state migrated (no router)."""
    return not any(type(op).__name__ in _UNSUPPORTED for op, _ in _walk(root)[0])


class _Writer:
    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        #: arrays holding dictionary ids: [index, rows that hold no ids (timestamps)]
        self.id_arrays: list[list[Any]] = []
        self.rows = 0

    def add(self, a: np.ndarray, ids: bool, plain_rows: Sequence[int] = ()) -> int:
        self.arrays.append(np.ascontiguousarray(a, dtype=_I8))
        if ids:
            self.id_arrays.append([len(self.arrays) - 1, sorted(plain_rows)])
        return len(self.arrays) - 1

    def batch(self, b: Batch) -> list[Any]:
        self.rows += len(b)
        # element timestamps are not dictionary ids (defensive: only routed joins have them)
        plain = [j for j, v in enumerate(b.vars) if v.startswith(TIME_VAR_PREFIX)]
        cols = self.add(b.cols, True, plain)
        return [list(b.vars), cols, self.add(b.counts, False), list(b.cols.shape)]

    def ids(self) -> np.ndarray:
        """The distinct dictionary ids (> 0) of every id array."""
        parts = []
        for i, plain in self.id_arrays:
            a = self.arrays[i]
            if plain and a.ndim == 2:
                a = np.delete(a, plain, axis=0)
            parts.append(a.reshape(-1))
        uniq = np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
        return uniq[uniq > 0]

    def value(self, key: str, v: Any) -> list[Any] | None:
        if isinstance(v, Relation):
            return ["rel", list(v.vars), *self.batch(v.rows)[1:]]
        if isinstance(v, Batch):
            return ["batch", *self.batch(v)]
        if isinstance(v, list) and v and all(isinstance(x, Relation) for x in v):
            return ["rels", [[list(r.vars), *self.batch(r.rows)[1:]] for r in v]]
        if key.startswith("_") and isinstance(v, bool):
            return ["bool", v]
        if key.startswith("_") and isinstance(v, int):
            return ["int", v]
        if key.startswith("_") and isinstance(v, str):
            return ["str", v]
        return None

    def obj(self, o: object) -> dict[str, Any]:
        out = {}
        for key, v in vars(o).items():
            if key in _SKIP:
                continue
            enc = self.value(key, v)
            if enc is not None:
                out[key] = enc
        return out


def snapshot_query(engine: Any, name: str, c: int) -> QueryState:
    """The state of query ``name`` of ``engine`` after report time ``c``.

    Args:
        engine: An :class:`~linkstream.engine.embedded.Engine` between two ticks.
        name: A registered query.
        c: The report time of the last tick ``engine`` evaluated.

    Raises:
        StateError: The query uses operators whose state cannot be migrated.
    """
    rq = engine.queries[name]
    order, _ = _walk(rq.root)
    w = _Writer()
    nodes: list[dict[str, Any]] = []
    for op, _behind in order:
        if type(op).__name__ in _UNSUPPORTED:
            raise StateError(f"{type(op).__name__} state is not migrated (the query is rebuilt)")
        if isinstance(op, WindowOperator):
            nodes.append({})  # its content is in the stream buffer the target holds too
        else:
            nodes.append(w.obj(op))
    output = w.obj(getattr(rq.output, "view", rq.output))
    uniq = w.ids()
    terms = engine.dictionary.decode_many(uniq) if len(uniq) else []
    header = {
        "v": STATE_VERSION,
        "query": name,
        "c": int(c),
        "fp": [_fingerprint(op) for op, _ in order],
        "nodes": nodes,
        "output": output,
        "last_report": rq.last_report,
        "ids": w.id_arrays,
        "uniq": w.add(uniq, False),
        "terms": terms,
        "rows": w.rows,
    }
    return QueryState(header, w.arrays)


# ----------------------------------------------------------------------------- restore


class _Reader:
    def __init__(self, arrays: Sequence[np.ndarray]) -> None:
        self.arrays = arrays

    def batch(self, vars_: list[str], cols: int, counts: int, shape: list[int]) -> Batch:
        return Batch(tuple(vars_), self.arrays[cols].reshape(shape), self.arrays[counts])

    def relation(self, vars_: list[str], cols: int, counts: int, shape: list[int]) -> Relation:
        r = Relation(vars_)
        b = self.batch(vars_, cols, counts, shape)
        if len(b):
            r.replace(b)
        return r

    def value(self, enc: list[Any]) -> Any:
        kind = enc[0]
        if kind == "rel":
            return self.relation(*enc[1:])
        if kind == "batch":
            return self.batch(*enc[1:])
        if kind == "rels":
            return [self.relation(*r) for r in enc[1]]
        if kind in ("bool", "int", "str"):
            return enc[1]
        raise StateError(f"unknown state entry {kind!r}")

    def obj(self, o: object, entries: dict[str, Any]) -> None:
        have = vars(o)
        for key, enc in entries.items():
            if key not in have:
                raise StateError(f"{type(o).__name__} has no attribute {key!r} here")
            have[key] = self.value(enc)


def restore_query(engine: Any, name: str, state: QueryState, c: int) -> None:
    """Restores ``state`` into query ``name``, registered in ``engine`` but not yet evaluated.

    Args:
        engine: The target :class:`~linkstream.engine.embedded.Engine`, between two ticks,
            whose last tick evaluated report time ``c``.
        name: The query (just registered).
        state: A snapshot from :func:`snapshot_query` taken after the same report time.
        c: The report time of the target's last tick.

    Raises:
        StateError: The snapshot does not fit (another report time, another plan).  The
            query's operators may then be partly overwritten: unregister and register it
            again to rebuild it from the stream buffers.
    """
    h = state.header
    if h.get("v") != STATE_VERSION or h.get("query") != name:
        raise StateError("not a snapshot of this query")
    if h.get("c") != c:
        raise StateError(f"snapshot after t={h.get('c')}, this engine is at t={c}")
    rq = engine.queries[name]
    order, attaches = _walk(rq.root)
    if [_fingerprint(op) for op, _ in order] != h["fp"]:
        raise StateError("the query's plan differs between the two engines")
    if any(type(op).__name__ in _UNSUPPORTED for op, _ in order):
        raise StateError("the query uses a shared join's router")
    arrays = list(state.arrays)
    uniq = arrays[h["uniq"]]
    terms = h["terms"]
    if len(terms) != len(uniq):
        raise StateError("term list does not match the ids")
    if len(uniq):
        local = np.asarray(engine.dictionary.encode_many(terms), dtype=np.int64)
        for i, plain in h["ids"]:
            a = arrays[i]
            if not a.size:
                continue
            pos = np.minimum(np.searchsorted(uniq, a), len(uniq) - 1)
            is_id = a > 0
            if plain and a.ndim == 2:
                is_id[plain] = False
            if not np.all(~is_id | (uniq[pos] == a)):
                raise StateError("an id of the snapshot has no term")
            arrays[i] = np.where(is_id, local[pos], a)
    reader = _Reader(arrays)
    for (op, behind), entries in zip(order, h["nodes"]):
        if behind:
            continue  # it ran here already, with the same state
        if isinstance(op, WindowOperator):
            lo, hi = op.bounds(c)
            op.lo, op.hi = max(lo, op.buffer.base), max(hi, op.buffer.base)
            op._pending = []
        else:
            reader.obj(op, entries)
    for a in attaches:
        a._attached = True
    reader.obj(getattr(rq.output, "view", rq.output), h["output"])
    rq.last_report = h["last_report"]


# ----------------------------------------------------------------------------- wire form


def encode_state(state: QueryState) -> list[bytes | memoryview]:
    """Frames of a snapshot: msgpack header, then one raw int64 buffer per array."""
    header = dict(state.header)
    header["shapes"] = [list(a.shape) for a in state.arrays]
    frames: list[bytes | memoryview] = [msgpack.packb(header, use_bin_type=True)]
    frames += [memoryview(np.ascontiguousarray(a, dtype=_I8).reshape(-1)) for a in state.arrays]
    return frames


def decode_state(frames: Sequence[Any]) -> QueryState:
    """Parses :func:`encode_state` frames (read-only array views of the frames).

    Raises:
        StateError: The frames are malformed.
    """
    if not frames:
        raise StateError("empty state")
    try:
        header = msgpack.unpackb(bytes(memoryview(frames[0])), raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise StateError(f"state header is not valid msgpack: {exc}") from exc
    if not isinstance(header, dict) or header.get("v") != STATE_VERSION:
        raise StateError("state header is not a version-1 map")
    shapes = header.pop("shapes", None)
    if not isinstance(shapes, list) or len(shapes) != len(frames) - 1:
        raise StateError("state header does not describe its buffers")
    arrays = []
    for shape, frame in zip(shapes, frames[1:]):
        buf = memoryview(frame).cast("B")
        if not isinstance(shape, list) or buf.nbytes != 8 * int(np.prod(shape, dtype=np.int64)):
            raise StateError("state buffer size does not match its shape")
        # a copy: restored relations must not alias (read-only) message buffers
        a = np.frombuffer(buf, dtype=_I8).reshape(shape).astype(np.int64)
        arrays.append(a)
    return QueryState(header, arrays)
