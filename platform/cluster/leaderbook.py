"""The leader's side of ``run --zk`` ingest bookkeeping (split from
:mod:`linkstream.cluster.ingest`): per stream, the newest owner epoch and next offset it
applied (:class:`_Applied`), and, with ``--ingest direct``, its worker's decisions kept for
the owner -- rebuilt by a new leader's replay (:func:`rebuild_decision`), saved in and
restored from a cluster checkpoint (:func:`saved_decisions`, :func:`restore_decisions`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from linkstream.cluster.decisions import DecisionBook, Pending
from linkstream.engine.live.batchpush import Decided

if TYPE_CHECKING:
    from linkstream.cluster.streamlog import BodyStore
    from linkstream.engine.live.ingestlog import LogRecord


@dataclass
class _Applied:
    """What the leader applied of one stream: the newest epoch and the next offset;
    ``book``: ``--ingest direct``, its worker's decisions the owner has not acknowledged."""

    epoch: int = -1
    next: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    book: DecisionBook = field(default_factory=DecisionBook)
    #: a new leader's replay: the body ``(epoch, record)`` it is rebuilding the decision of
    rebuilt: tuple[tuple[int, int], Pending] | None = None


def rebuild_decision(
    applied: dict[str, _Applied], lock: threading.Lock, bodies: BodyStore, rec: LogRecord
) -> tuple[Decided, int]:
    """``--ingest direct``, a new leader's replay of push record ``rec`` (``f="ref"``):
    the :class:`Decided` of its body in the stream's :class:`DecisionBook` (added at the
    body's first record, as its old leader added it at the body's push) and the element's
    index in the body.  A body's offsets run from its offset (read in the owner's stream
    log) to the next body's, the last body's to its last logged element."""
    h = rec.header
    iri, epoch, q, j = str(h["s"]), int(h["e"]), int(h["r"]), int(h["j"])
    with lock:
        st = applied.setdefault(iri, _Applied())
    with st.lock:
        cur = st.rebuilt
        if cur is not None and cur[0] == (epoch, q):
            p = cur[1]
            p.end = max(p.end, p.offset + j + 1)
        else:
            offset = bodies.offset(iri, epoch, q)
            if cur is not None and cur[0][0] == epoch:
                cur[1].end = max(cur[1].end, offset)  # the elements between were the last body's
            if epoch > st.epoch:
                st.epoch, st.next = epoch, offset
            # a body the restored checkpoint covered in part: its decision goes on
            resumed = st.book.resume(epoch, offset)
            if resumed is not None:
                p = resumed
                p.end = max(p.end, offset + j + 1)
            else:
                p = Pending(offset, offset + j + 1, offset, Decided())
                st.book.add(epoch, p)
            st.rebuilt = ((epoch, q), p)
        st.next = max(st.next, p.end)
        return p.decided, j


def saved_decisions(applied: dict[str, _Applied], lock: threading.Lock) -> dict[str, list[Any]]:
    """``--ingest direct``, on the worker at a cluster checkpoint's barrier: per stream
    ``[epoch, end, decisions]`` (:meth:`DecisionBook.saved`); streams with none left out.
    Only the books' locks are taken (a push holds its stream's lock while it waits for
    room in the worker's queue)."""
    with lock:
        items = list(applied.items())
    out: dict[str, list[Any]] = {}
    for iri, st in items:
        epoch, end, decisions = st.book.saved()
        if epoch >= 0 and (decisions or end is not None):
            out[iri] = [epoch, end, decisions]
    return out


def restore_decisions(
    applied: dict[str, _Applied], lock: threading.Lock, saved: dict[str, list[Any]]
) -> None:
    """A new leader that restored a cluster checkpoint: the decisions its old leader had
    completed and the owners had not acknowledged (:func:`saved_decisions`) -- the bodies
    the checkpoint covers are not replayed, so nothing else would give them -- and each
    stream's epoch and next offset (the end of the last body decided before the barrier)."""
    for iri, (epoch, end, decisions) in saved.items():
        with lock:
            st = applied.setdefault(iri, _Applied())
        with st.lock:
            st.book.restore(int(epoch), end, decisions)
            if epoch > st.epoch:
                st.epoch, st.next = int(epoch), 0
            if epoch == st.epoch:
                st.next = max([st.next, *(d[1] for d in decisions), *([end] if end is not None else [])])


__all__ = ["_Applied", "rebuild_decision", "restore_decisions", "saved_decisions"]
