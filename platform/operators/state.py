"""Snapshot and restore of a query's operator state, to migrate it between engines.

When a task moves from one container to another, the source snapshots the state of the
query's operators (join relations, aggregate groups and results, distinct counts, graph
contents, the output's current result and first-epoch flags) and the target restores it
into the operators it just planned for the same query, instead of rebuilding them from
its stream buffers.

The contract is explicit, as with bytewax's stateful operators: every operator class that
holds state says what it is through a pair of methods declared on
:class:`~linkstream.operators.base.Operator`,

* ``snapshot(w: StateWriter) -> dict``: the operator's header entries (flags, versions,
  and the entries :class:`StateWriter` returns for the relations and batches it registers
  as buffers);
* ``restore(r: StateReader, entries: dict) -> None``: puts them back, checking with
  :class:`StateReader` that they are what this operator snapshots;

stateless operators inherit a default that has no state.  The output's
:class:`~linkstream.engine.output.ResultView` has the same pair.  An attribute an
operator does not name in its pair (caches, configuration, counters) is never shipped,
whatever its type.  This module walks the plan: every operator of the query is visited
in a fixed depth-first order (``AttachOperator`` wrappers are transparent, so the order
only depends on the plan), and its fingerprint (class and variables) must be the same on
both sides.

Windows are views on the stream buffers, which the target holds for every stream the
query reads (it subscribed to them, and got their retained backlog, before the state is
shipped; see :mod:`linkstream.containers.replica`): a restored window is moved to the
source's last report time (:attr:`StateReader.c`) without emitting anything, so its next
delta is that of the next report only.  Operators that pre-existed on the target (reached
through an ``AttachOperator``) already hold the same state and are left alone; the attach
wrappers are marked attached so they do not replay their shared operator's whole content.

Dictionary ids differ between engines (each container encodes its static graphs and the
terms expressions compute in its own dictionary), so a snapshot carries the terms of every
id its buffers use and the target re-encodes them.  Plans that differ between the two
engines (a different join order, or sharing that inserted a renaming on one side only)
or operators whose state is not one query's (``migratable = False``: routers of shared
joins, timed windows) raise :class:`StateError`; the caller then rebuilds the query from
its stream buffers (task checkpoints snapshot a router once for all of its queries:
:mod:`linkstream.operators.shared_state`).

Wire form (:func:`encode_state` / :func:`decode_state`): one msgpack header, then one raw
little-endian int64 buffer per array.  Nothing is pickled.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import msgpack
import numpy as np

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch
from linkstream.operators.relation import Relation
from linkstream.operators.scan import ScanOperator
from linkstream.operators.window import WindowOperator
from linkstream.rdf.records import record

#: 2: explicit per-operator entries (version 1 shipped attributes found by reflection)
STATE_VERSION = 2
_I8 = np.dtype("<i8")

#: variables of shared joins that hold element timestamps, not dictionary ids (the names
#: ``linkstream.engine.sharing`` gives them)
TIME_VAR_PREFIX = "%t"


class StateError(ValueError):
    """The state cannot be snapshotted here or restored there (rebuild instead)."""


class Stateful(Protocol):
    """The state contract of operators (and of the output's result view)."""

    def snapshot(self, w: StateWriter) -> dict[str, Any]: ...

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None: ...


@record
class QueryState:
    """A snapshot: a msgpack-able header and the int64 arrays it refers to by index.

    Attributes:
        header: ``{"v", "query", "c", "fp", "nodes", "output", "last_report", "ids",
            "uniq", "terms", "rows"}``; ``nodes`` holds each operator's :meth:`snapshot`
            entries in walk order.
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
        """Mappings (rows of relations and batches) in the snapshot."""
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


def _fingerprints(order: list[tuple[Operator, bool]], dictionary: Any) -> list[list[Any]]:
    """Per operator of the walk: class, variables, a window's spec and a scan's pattern
    with its constants as terms.

    The patterns matter: the engine orders a shared join's inputs by their signatures,
    which hold dictionary ids, and two engines number terms differently (a live run's
    queries are planned as they come, a new leader's run plans them all at once).  The
    inputs of ``{?o1 :observedBy :A ...} {?o2 :observedBy :B ...}`` are canonically
    renamed alike, so without the constants their order -- and which input a snapshot's
    relation belongs to -- could differ unnoticed (the state would then join each new
    element with the wrong side: doubled counts, lost rows)."""
    out = []
    for op, _ in order:
        fp: list[Any] = [type(op).__name__, list(op.vars)]
        if isinstance(op, WindowOperator):
            fp.append(repr(op.spec))
        elif isinstance(op, ScanOperator):
            consts = [int(v) for k, v in op.pattern if k == "const"]
            terms = iter(dictionary.decode_many(consts) if consts else [])
            fp.append([[k, next(terms) if k == "const" else v] for k, v in op.pattern])
        out.append(fp)
    return out


def migratable(root: Operator) -> bool:
    """Whether the query planned as ``root`` can have its state migrated (no router)."""
    return all(op.migratable for op, _ in _walk(root)[0])


# ----------------------------------------------------------------------------- snapshot


class StateWriter:
    """Collects the buffers of a snapshot; operators' :meth:`snapshot` register theirs here.

    The entry a relation or batch gets (``[vars, cols, counts, shape]``: its variables and
    the indexes of its two buffers) goes into the operator's header entries; plain values
    (flags, versions, fingerprints: anything msgpack encodes) go there as they are.
    """

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        #: arrays holding dictionary ids: [index, rows that hold no ids (timestamps)]
        self.id_arrays: list[list[Any]] = []
        self.rows = 0
        #: per variable, a number added to its column as written (a count window's buffer
        #: positions made relative to its end: :mod:`linkstream.operators.shared_state`)
        self.shift: dict[str, int] = {}

    def add(self, a: np.ndarray, ids: bool, plain_rows: Sequence[int] = ()) -> int:
        """Registers buffer ``a`` (``ids``: it holds dictionary ids); returns its index."""
        self.arrays.append(np.ascontiguousarray(a, dtype=_I8))
        if ids:
            self.id_arrays.append([len(self.arrays) - 1, sorted(plain_rows)])
        return len(self.arrays) - 1

    def batch(self, b: Batch, times: Sequence[str] = ()) -> list[Any]:
        """The entry of batch ``b``, whose columns hold dictionary ids but those of the
        variables ``times`` and of the shared joins' ``%t`` variables (element timestamps,
        not ids: a restore does not re-encode them)."""
        self.rows += len(b)
        plain = [j for j, v in enumerate(b.vars) if v.startswith(TIME_VAR_PREFIX) or v in times]
        cols = self.add(_shifted(b, self.shift), True, plain)
        return [list(b.vars), cols, self.add(b.counts, False), list(b.cols.shape)]

    def relation(self, r: Relation, times: Sequence[str] = ()) -> list[Any]:
        """The entry of relation ``r`` (its consolidated rows; ``times`` as in :meth:`batch`)."""
        return self.batch(r.rows, times)

    def relations(self, rs: Sequence[Relation]) -> list[list[Any]]:
        """The entries of relations ``rs``, in order."""
        return [self.relation(r) for r in rs]

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


def _shifted(b: Batch, shift: dict[str, int]) -> np.ndarray:
    """``b``'s columns with ``shift[v]`` added to the column of each variable ``v``
    of ``shift`` (a copy; ``b``'s own when there is nothing to add)."""
    js = [(j, shift[v]) for j, v in enumerate(b.vars) if v in shift] if shift and len(b) else []
    if not js:
        return b.cols
    cols = np.array(b.cols, dtype=_I8)
    for j, d in js:
        cols[j] += d
    return cols


def _entries(owner: Stateful, w: StateWriter) -> dict[str, Any]:
    entries = owner.snapshot(w)
    if not isinstance(entries, dict) or not all(isinstance(k, str) for k in entries):
        raise StateError(f"{type(owner).__name__}.snapshot did not return a dict of entries")
    return entries


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
    w = StateWriter()
    nodes: list[dict[str, Any]] = []
    for op, _behind in order:
        if not op.migratable:
            raise StateError(f"{type(op).__name__} state is not migrated (the query is rebuilt)")
        nodes.append(_entries(op, w))
    output = _entries(getattr(rq.output, "view", rq.output), w)
    uniq = w.ids()
    terms = engine.dictionary.decode_many(uniq) if len(uniq) else []
    header = {
        "v": STATE_VERSION,
        "query": name,
        "c": int(c),
        "fp": _fingerprints(order, engine.dictionary),
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


class StateReader:
    """Reads a snapshot's entries back for operators' :meth:`restore` (checking them).

    Attributes:
        c: The report time the snapshot was taken after (windows move there).
    """

    def __init__(self, arrays: Sequence[np.ndarray], c: int) -> None:
        self.arrays = arrays
        self.c = c
        #: per variable, a number added to its column as read (the inverse of
        #: :attr:`StateWriter.shift`: relative positions put into this engine's buffer)
        self.shift: dict[str, int] = {}

    def expect(
        self,
        owner: object,
        entries: dict[str, Any],
        required: Iterable[str] = (),
        optional: Iterable[str] = (),
    ) -> None:
        """Checks that ``entries`` has every key of ``required`` and no key but those."""
        req = set(required)
        if not isinstance(entries, dict):
            raise StateError(f"{type(owner).__name__} state is not a map")
        extra = set(entries) - req - set(optional)
        if extra:
            raise StateError(f"{type(owner).__name__} has no state {sorted(extra)} here")
        missing = req - set(entries)
        if missing:
            raise StateError(f"{type(owner).__name__} state lacks {sorted(missing)}")

    def _buffers(self, enc: Any) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        try:
            vars_, cols, counts, shape = enc
            return tuple(vars_), self.arrays[cols].reshape(shape), self.arrays[counts]
        except (TypeError, ValueError, IndexError) as exc:
            raise StateError(f"malformed state entry: {exc}") from exc

    def batch(self, enc: Any, vars_: Sequence[str]) -> Batch:
        """The batch of entry ``enc`` (from :meth:`StateWriter.batch`) over ``vars_``."""
        got, cols, counts = self._buffers(enc)
        if got != tuple(vars_):
            raise StateError(f"state over {list(got)}, expected {list(vars_)}")
        return Batch(got, _shifted(Batch(got, cols, counts), self.shift), counts)

    def relation(self, enc: Any, like: Relation) -> Relation:
        """A new relation over ``like``'s variables holding entry ``enc``'s rows."""
        r = Relation(like.vars)
        b = self.batch(enc, like.vars)
        if len(b):
            r.replace(b)
        return r

    def relations(self, enc: Any, like: Sequence[Relation]) -> list[Relation]:
        """New relations like ``like`` (one per entry of ``enc``, as many)."""
        if not isinstance(enc, list) or len(enc) != len(like):
            raise StateError(f"{len(enc) if isinstance(enc, list) else '?'} relations, expected {len(like)}")
        return [self.relation(e, r) for e, r in zip(enc, like)]

    def value(self, enc: Any, kind: type | tuple[type, ...]) -> Any:
        """Plain entry ``enc``, checked to be a ``kind`` (``bool`` is not an ``int`` here)."""
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(enc, kinds) and (bool in kinds or not isinstance(enc, bool))
        if not ok:
            raise StateError(f"state entry {enc!r} is not a {'/'.join(k.__name__ for k in kinds)}")
        return enc


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
    if getattr(getattr(rq.output, "view", None), "block", None) is not None:
        # a routed block derived the view's rows from its operators' state before this
        # restore: the view goes through its own operators instead
        engine.replanned(rq)
    order, attaches = _walk(rq.root)
    fps = _fingerprints(order, engine.dictionary)
    if fps != h["fp"]:
        k = next((i for i, (a, b) in enumerate(zip(fps, h["fp"])) if a != b), min(len(fps), len(h["fp"])))
        raise StateError(
            "the query's plan differs between the two engines (operator %d: %s here, %s in the snapshot)"
            % (k, fps[k] if k < len(fps) else "none", h["fp"][k] if k < len(h["fp"]) else "none")
        )
    if not all(op.migratable for op, _ in order):
        raise StateError("the query uses a shared join's router")
    if len(h["nodes"]) != len(order):
        raise StateError("the snapshot does not list every operator")
    reader = StateReader(local_ids(engine, state), c)
    for (op, behind), entries in zip(order, h["nodes"]):
        if behind:
            continue  # it ran here already, with the same state
        op.restore(reader, entries)
    for a in attaches:
        a._attached = True
    getattr(rq.output, "view", rq.output).restore(reader, h["output"])
    rq.last_report = h["last_report"]


def local_ids(engine: Any, state: QueryState) -> list[np.ndarray]:
    """``state``'s arrays with its dictionary ids re-encoded in ``engine``'s dictionary
    (the rows the snapshot lists as plain -- timestamps -- kept as they are)."""
    h = state.header
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
    return arrays


# ----------------------------------------------------------------------------- wire form


def encode_state(state: QueryState) -> list[bytes | memoryview]:
    """Frames of a snapshot: msgpack header, then one raw int64 buffer per array."""
    header = dict(state.header)
    header["shapes"] = [list(a.shape) for a in state.arrays]
    frames: list[bytes | memoryview] = [msgpack.packb(header, use_bin_type=True)]
    # ``a.data`` is ``memoryview(a)`` (numpy types the buffer protocol only for Python >= 3.12)
    frames += [np.ascontiguousarray(a, dtype=_I8).reshape(-1).data for a in state.arrays]
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
        raise StateError(f"state header is not a version-{STATE_VERSION} map")
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
