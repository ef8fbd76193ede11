"""Recovery of the live engine: the latest checkpoint, then the log records after it.

Used by :meth:`LiveEngine.recover <linkstream.engine.live.runtime.LiveEngine.recover>`
(a restarted ``run --state-dir``) and by ``linkstream restore`` (records read by a Spark
job): :func:`restore_latest` puts the latest usable checkpoint into a fresh engine,
:func:`replay_records` feeds it the records after it, in order, through the engine's public
API, checking that none is missing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from linkstream.engine.live.ingestlog import LogRecord, decode_triples
from linkstream.engine.live.state import QueryConflict, UnknownQuery
from linkstream.query.errors import QueryError
from linkstream.store.checkpoints import Checkpoint, CheckpointError, CheckpointStore

if TYPE_CHECKING:
    from linkstream.engine.live.runtime import LiveEngine

log = logging.getLogger(__name__)

__all__ = ["dropped_pushes", "replay_records", "restore_latest"]


def dropped_pushes(records: Iterable[LogRecord]) -> set[int]:
    """The push records the worker dropped as late after they were taken (named by the
    ``drop`` records among ``records``)."""
    return {int(q) for r in records if r.kind == "drop" for q in r.header["d"]}


def restore_latest(
    live: LiveEngine, store: CheckpointStore, timeout: float | None = None
) -> tuple[int, Checkpoint | None]:
    """Restores the latest usable checkpoint of ``store`` into ``live`` (fresh, static
    graphs loaded); returns the last log record it covers (``-1``: no checkpoint) and it.

    Raises:
        CheckpointError: Checkpoints exist but none is usable, or one does not fit.
    """
    ck = store.load()
    if ck is None:
        return -1, None
    from linkstream.engine.live.checkpoint import restore

    try:
        covered = int(live.call(lambda: restore(live, ck), timeout))
    except CheckpointError:
        raise
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as e:  # checksums fine, content not
        raise CheckpointError(
            "checkpoint %s of %s cannot be restored (written by another version?): %s: %s"
            % (ck.id, store.uri, type(e).__name__, e)
        ) from None
    log.info("restored checkpoint %s of %s (log records through %d)", ck.id, store.uri, covered)
    return covered, ck


def replay_records(
    live: LiveEngine,
    records: Iterable[LogRecord],
    covered: int,
    where: str,
    timeout: float | None = None,
    skip: Collection[int] = (),
    resolve: Callable[[LogRecord], Any] | None = None,
    dropped: Collection[int] = (),
    decide: Callable[[LogRecord], Any] | None = None,
) -> tuple[int, int]:
    """Feeds ``live`` the records after ``covered``, in order; returns how many and the last
    sequence number (``covered`` if none).  Records numbered in ``skip`` are passed over
    (the cluster leader's replay: registrations of queries gone since).  ``resolve`` reads
    the triples of a push record that refers to a body kept elsewhere (``f="ref"``).
    Push records numbered in ``dropped`` (named by the log's ``drop`` records: the worker
    dropped them as late after they were taken) are counted taken and late again, not pushed;
    every other push record is applied without the lateness checks (its worker applied it:
    the replay's report times, which can differ, do not decide again).  ``decide`` gives,
    for a push record that refers to a body (``f="ref"``, dropped ones too: they bound the
    body), the :class:`~linkstream.engine.live.batchpush.Decided` of that body and the
    element's index in it (or ``None``): the worker's decision on it is told to that.

    Raises:
        CheckpointError: The first record after ``covered`` is not ``covered + 1``, or the
            sequence has a hole (records are missing).
    """
    n = 0
    last = covered
    for rec in records:
        if rec.seq <= covered:
            continue
        if rec.seq != last + 1:
            raise CheckpointError(
                "the ingest log in %s %s record %d after record %d: records are missing"
                % (where, "starts at" if n == 0 else "jumps to", rec.seq, last)
                + ("" if covered >= 0 or n else " (and no checkpoint covers them)")
            )
        n += 1
        last = rec.seq
        if rec.seq in skip:
            continue
        h = rec.header
        try:
            told = decide(rec) if decide is not None and rec.kind == "push" and h.get("f") == "ref" else None
            if rec.kind == "push" and rec.seq in dropped:
                live._replayed_drop(h["s"], h["t"], int(h.get("n", 0)), h.get("i"))
            elif rec.kind == "drop":
                pass  # read above
            elif rec.kind == "late":  # refused on the push side: counted, never applied
                live._replayed_late(h["s"], h["t"], h["f"], int(h.get("r", 0)))
            elif rec.kind == "push":
                triples = resolve(rec) if resolve is not None and h.get("f") == "ref" else decode_triples(rec)
                # applied as the logged run applied it: lateness is not decided again
                live._replayed_push(
                    h["s"],
                    h["t"],
                    triples,
                    h.get("i"),
                    timeout=timeout,
                    decided=None if told is None else told[0],
                    position=0 if told is None else int(told[1]),
                )
            elif rec.kind == "register":
                live.register(rec.payload.decode("utf-8"), h["name"], timeout=timeout)
            elif rec.kind == "unregister":
                live.unregister(h["name"], timeout=timeout)
            elif rec.kind == "advance":
                live.advance_to(h["t"], timeout=timeout)
            else:
                log.warning("ingest log: record %d of unknown kind %r skipped", rec.seq, rec.kind)
        except (QueryError, QueryConflict, UnknownQuery, ValueError) as e:  # failed when logged too
            log.info("ingest log: record %d (%s) refused again: %s", rec.seq, rec.kind, e)
    return n, last
