"""The messages between a cluster's driver and its operator containers, as Python values.

One frozen dataclass per message kind (:data:`Message` is their union); how each travels --
a msgpack header and raw buffers, one ZeroMQ multipart message -- is
:mod:`linkstream.containers.protocol` (:func:`~linkstream.containers.protocol.encode`,
:func:`~linkstream.containers.protocol.decode`), whose docstring describes every kind's
header fields and frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Elements:
    """A run of stream elements with the dictionary entries they introduce.

    Attributes:
        run: Replay id.
        ids: Driver ids of ``terms`` (int64, one per term).
        terms: N-Triples strings of ``ids``.
        meta: ``(3, k)`` int64: stream index, event time and triple count per element.
        triples: ``(n, 3)`` int64 triples of all elements, in the driver's ids.
        sync_tick: For a ``sync`` message the last tick sequence number sent, else ``None``.
        streams: For a ``sync`` message, every stream of the subscription it answers (it
            carries the backlog of those new to the container): the driver sends the
            container every later element of them.
        version: For a ``sync`` message, the subscription version it answers.
        counts: For a ``sync`` message, per stream of ``streams`` (same order), how many of
            its elements the run had routed once this message is applied: the container's
            count of the stream from here on (a tick's ``cuts`` are in these counts).
    """

    run: str
    ids: np.ndarray
    terms: list[str]
    meta: np.ndarray
    triples: np.ndarray
    sync_tick: int | None = None
    streams: tuple[int, ...] = ()
    version: int = 0
    counts: tuple[int, ...] = ()
    #: ``sync`` of a run whose streams' owners send the elements (``--ingest direct``): the
    #: counts of streams received before this ``sync`` stay the container's own
    owners: bool = False


@dataclass(frozen=True)
class Tick:
    """Report time ``c`` (tick ``seq``); see the module docstring.

    ``cuts`` (``run --zk --ingest direct``, empty otherwise and then not on the wire): per
    stream IRI, how many of its elements the leader's worker had applied before this tick
    (its applied counts, as the leader's :class:`~linkstream.cluster.fanout.Fanout` and the
    owners' ``owned`` messages number them) -- a container evaluates the tick
    only once it applied that many elements of each stream it receives
    (:class:`~linkstream.containers.cuts.CutGate`).
    """

    run: str
    seq: int
    c: int
    due: list[str]
    owners: dict[str, str]
    rel: dict[str, int] = field(default_factory=dict)
    cuts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Owned:
    """Elements of one stream from its owner coordinator, numbered by the leader's applied
    counts (``first`` is the first one's); see the module docstring (``owned``).

    Attributes:
        meta: ``(2, k)`` int64: event time and triple count per element.
        triples: ``(n, 3)`` int64 indexes into ``terms``.
    """

    run: str
    stream: str
    first: int
    terms: list[str]
    meta: np.ndarray
    triples: np.ndarray


@dataclass(frozen=True)
class Hello:
    """A container is set up for ``run`` and listens at ``address``."""

    run: str
    container: str
    address: str
    #: what the container does (:data:`~linkstream.containers.protofields.CAPS`; empty: an
    #: older container, which the driver names only for queries it announced ready)
    caps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Subscribe:
    """``container`` needs the elements of ``streams`` (its subscription ``version``)."""

    run: str
    container: str
    version: int
    streams: tuple[int, ...]


@dataclass(frozen=True)
class Ready:
    """``container`` may answer ``query`` from tick ``first_tick`` on."""

    run: str
    container: str
    query: str
    first_tick: int


@dataclass(frozen=True)
class Unready:
    """``container`` lost ``query`` in ZooKeeper; it drops it once ``token`` is released."""

    run: str
    container: str
    query: str
    token: int


@dataclass(frozen=True)
class Result:
    """The answers of one container to tick ``seq``."""

    run: str
    container: str
    seq: int
    c: int
    lines: Mapping[str, Sequence[str]]
    missing: list[str] = field(default_factory=list)
    #: queries of ``missing`` it holds but answers only from a later tick (named before it
    #: announced them ready): that first tick
    first: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Failed:
    """``query`` could not be registered on ``container``."""

    run: str
    container: str
    query: str
    error: str


@dataclass(frozen=True)
class Handover:
    """Driver to the source of a move: snapshot ``query`` after tick ``seq`` for ``dst``."""

    run: str
    query: str
    dst: str
    seq: int


@dataclass(frozen=True)
class State:
    """A query's operator state on its way from ``container`` to ``dst`` (see above)."""

    run: str
    container: str
    query: str
    dst: str
    seq: int
    frames: list[Any] = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True)
class Recompute:
    """Driver to a live container: rebuild ``queries`` from ``elements`` and report (see above).

    Attributes:
        run: Replay id.
        id: Request id (echoed by the answer).
        queries: Names of the run's queries to rebuild.
        ticks: Report times to evaluate, increasing; only the last one is answered.
        at: Per tick, how many of the elements are ingested before it (non-decreasing).
        elements: The history, as an ``els`` message carries it (``sync_tick`` unused);
            its dictionary delta holds every term of its triples.
        rebuild: Those of ``queries`` the driver will not restore from a checkpoint: their
            new owner (if this container) builds them from its stream buffers now.
        owe: The report time answered (``0``: the last); later ones' come in ``later``.
    """

    run: str
    id: int
    queries: list[str]
    ticks: list[int]
    at: list[int]
    elements: Elements
    rebuild: list[str] = field(default_factory=list)
    owe: int = 0


@dataclass(frozen=True)
class Forward(Recompute):
    """Driver to a dead container's new owner: a :class:`Recompute` whose first report time
    is the last complete checkpoint's, with the queries' task snapshots there to restore,
    feed forward and keep (:mod:`linkstream.containers.forwarding`).

    Attributes:
        uri: The checkpoint store.
        objects: Per query, its snapshot's shared object (``key``, ``size``, ``sha256``).
    """

    uri: str = ""
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Recomputed:
    """A container's answer to :class:`Recompute` ``id``: the lines of report time ``c``."""

    run: str
    container: str
    id: int
    c: int
    lines: Mapping[str, Sequence[str]]
    error: str = ""
    #: lines of the report times after ``c`` it evaluated (ticks sent with the owed one), of
    #: the queries due then
    later: dict[int, dict[str, list[str]]] = field(default_factory=dict)
    #: what the answering container does (:data:`~linkstream.containers.protofields.CAPS`;
    #: empty: an older container's answer)
    caps: tuple[str, ...] = ()
    #: (``forward`` only, with capability ``kept``) the queries the container kept
    kept: tuple[str, ...] | None = None


Message = (
    Elements
    | Owned
    | Tick
    | Hello
    | Subscribe
    | Ready
    | Unready
    | Result
    | Failed
    | Handover
    | State
    | Recompute
    | Recomputed
)
