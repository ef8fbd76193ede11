"""Reports of a dead container, recomputed on a live one (the container's half).

When a container dies (``kill -9``, a crash, a lost host), the reports it owed -- the
tick it was evaluating and the ticks until its queries are ready on their new owner --
are not lost: the driver (:mod:`linkstream.cluster.recovery`) sends a live container a
``recompute`` message with the queries, the retained history of their streams (every
element a window of the report may still read, exactly as the driver routed them) and
the report times to evaluate, each after the elements ingested before it in the run.

Every continuous query here is windowed, so a query's result at a report time is a
function of its windows' contents at that time and of the static graphs.  The container
therefore builds a *scratch* engine next to its replica (sharing its dictionary, static
graphs and static sub-join store), registers the queries there, ingests the history and
evaluates the report times in order: the earlier ones silently, so that an IStream or
DStream delta of the last one is relative to the previous report as in the run; the
last one's lines are the answer.  The scratch engine is dropped afterwards: the replica
and its queries are not touched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from linkstream.containers.messages import Elements, Recompute, Recomputed
from linkstream.containers.protocol import ProtocolError
from linkstream.containers.protofields import CAPS
from linkstream.containers.replica import RunReplica
from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous

logger = logging.getLogger(__name__)


def recompute(replica: RunReplica, texts: dict[str, str], message: Recompute, container: str) -> Recomputed:
    """Answers ``message``: the lines of its last report time for each of its queries.

    Args:
        replica: The run's replica on this container (dictionary, static graphs).
        texts: Text of every query of ``message`` (a query without one is an error).
        message: The driver's request.
        container: This container's id (stamped on the answer).

    Never raises: anything that goes wrong is the answer's ``error``.
    """
    c = message.owe or message.ticks[-1]
    try:
        t0 = time.perf_counter()
        lines, later = _evaluate(replica, texts, message)
        logger.info(
            "%s: recomputed %s at t=%d from %d elements (%d report times) in %.3fs",
            container,
            ", ".join(message.queries),
            c,
            message.elements.meta.shape[1],
            len(message.ticks),
            time.perf_counter() - t0,
        )
        return Recomputed(message.run, container, message.id, c, lines, later=later, caps=CAPS)
    except Exception as exc:  # a bad request or a query that cannot be planned: the driver decides
        logger.error("%s: cannot recompute %s at t=%d: %s", container, ", ".join(message.queries), c, exc)
        return Recomputed(
            message.run, container, message.id, c, {}, f"{type(exc).__name__}: {exc}", caps=CAPS
        )


def _evaluate(
    replica: RunReplica, texts: dict[str, str], message: Recompute
) -> tuple[dict[str, list[str]], dict[int, dict[str, list[str]]]]:
    """The lines of the owed report time and, per later one, of the queries due then."""
    spec = replica.spec
    missing = [n for n in message.queries if n not in texts]
    if missing:
        raise ProtocolError(f"unknown queries {', '.join(missing)}")
    cqs = []
    for name in message.queries:
        cq = parse_continuous(texts[name], default_name=name, base=spec.base)
        cqs.append(cq if cq.name == name else replace(cq, name=name))
    replica._read_static(cqs)  # remote statics: the triples these queries' patterns match
    main = replica.engine
    store = main.static_results
    scratch = Engine(
        main.dictionary,
        default_step=spec.default_step,
        log_fn=lambda _m: None,  # the replica logged the same warnings when it planned them
        static_results=store.store if store is not None else False,
    )
    scratch.share, scratch.share_merged = main.share, main.share_merged
    if main.static_source is not None:  # remote statics: looked up as the replica does
        scratch.use_static_source(main.static_source)
    for iri, parts in main.statics.items():
        for part in parts:
            scratch.add_static(iri, part)
    scratch.declare_streams(set(spec.streams))
    for cq in cqs:
        scratch.register(cq)
    history = History(replica, message.elements)
    names = set(message.queries)
    owe = message.owe or message.ticks[-1]
    out: dict[str, list[str]] = {}
    later: dict[int, dict[str, list[str]]] = {}
    # One pass over every report time: every window advances at each (the reporting set only
    # picks the lines returned), so a later one's lines equal those a request of its own gives.
    for c, upto in zip(message.ticks, message.at):
        history.feed(scratch, upto)
        due = names if c == owe else set()
        if c > owe:
            due = {n for n in names if any(c % s == 0 for s in scratch.queries[n].steps)}
        got = scratch.tick(c, due)
        if c == owe:
            out = {n: list(got[n]) for n in message.queries}
        elif due:
            later[c] = {n: list(got[n]) for n in message.queries if n in due}
    for name in message.queries:
        scratch.unregister(name)
    return out, later


def local_triples(replica: RunReplica, ids: np.ndarray, terms: list[str], triples: np.ndarray) -> np.ndarray:
    """``triples`` (driver ids) in this container's ids, from the message's own terms."""
    if not len(triples):
        return np.empty((0, 3), dtype=np.int64)
    if len(ids) != len(terms):
        raise ProtocolError("dictionary ids do not match their terms")
    local = np.asarray(replica.engine.dictionary.encode_many(terms), dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    sorted_ids, local = np.asarray(ids)[order], local[order]
    pos = np.searchsorted(sorted_ids, triples)
    pos = np.minimum(pos, len(sorted_ids) - 1)
    if len(sorted_ids) == 0 or not (sorted_ids[pos] == triples).all():
        raise ProtocolError("triple ids without a term in the recompute request")
    return local[pos]


class History:
    """A ``recompute`` message's elements in ``replica``'s ids, fed to an engine cut by cut."""

    def __init__(self, replica: RunReplica, elements: Elements) -> None:
        self.streams_iri = replica.spec.streams
        self.triples = local_triples(replica, elements.ids, elements.terms, elements.triples)
        meta = elements.meta
        if meta.shape[1] and (int(meta[0].min()) < 0 or int(meta[0].max()) >= len(self.streams_iri)):
            raise ProtocolError("element of an unknown stream")
        self.offsets = np.concatenate([[0], np.cumsum(meta[2])]).tolist()
        self.streams, self.times = meta[0].tolist(), meta[1].tolist()
        self.done = 0

    def feed(self, engine: Engine, upto: int) -> None:
        """Ingests the elements up to (not including) the ``upto``-th into ``engine``."""
        for j in range(self.done, upto):
            part = self.triples[self.offsets[j] : self.offsets[j + 1]]
            engine.ingest(self.streams_iri[self.streams[j]], self.times[j], part)
        self.done = max(self.done, upto)
