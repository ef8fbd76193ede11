"""State records of the live engine: errors, per-query and per-stream bookkeeping.

Kept apart from :mod:`linkstream.engine.live.runtime` (the worker and its command loop) so that
each module stays small; :mod:`~linkstream.engine.live.runtime` re-exports the public names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from linkstream.engine.embedded import QueryStats, RegisteredQuery
from linkstream.engine.live.subscription import Subscription
from linkstream.operators.window import WindowBuffer
from linkstream.query.continuous import ContinuousQuery
from linkstream.query.errors import QueryError

if TYPE_CHECKING:
    from linkstream.engine.live.cohorts import Cohort


class UnknownQuery(KeyError):
    """No query of that name is registered."""

    def __str__(self) -> str:
        return "no query named %r is registered" % (self.args[0] if self.args else "")


class QueryConflict(QueryError):
    """A query of that name is already registered."""


class BatchFailed(Exception):
    """Item ``index`` of a batch registration (``register_many``) failed with ``error`` (a
    ``QueryError`` or ``QueryConflict``); the queries named in ``registered`` went in."""

    def __init__(self, index: int, registered: list[str], error: Exception) -> None:
        super().__init__(f"item {index}: {error}")
        self.index = index
        self.registered = registered
        self.error = error


class EngineClosed(RuntimeError):
    """The live engine has been closed."""


class RetentionGuard:
    """Sits in a stream buffer's window list so that ``StreamBuffer.gc`` (which keeps all
    from the smallest window ``lo`` on) keeps ``retention_ms`` of event time.

    Args:
        retention_ms: Event time (ms) of history to keep.
    """

    def __init__(self, retention_ms: int) -> None:
        self.retention_ms = retention_ms
        self.lo = 0

    def advance(self, buffer: WindowBuffer, now: int) -> None:
        """Lets collection drop what is older than ``now - retention_ms`` in ``buffer``."""
        self.lo = max(self.lo, buffer.search(now - self.retention_ms))


@dataclass(frozen=True)
class QueryView:
    """A snapshot of one registered query: parsed form, live statistics, schedule (report
    times; ``first_report`` is ``None`` until its streams have data), subscriptions and
    the result lines its subscribers lost by not keeping up.  ``state`` is ``running`` in
    one process; a cluster also shows ``pending`` (no container holds it yet) and
    ``failed: <reason>``."""

    cq: ContinuousQuery
    stats: QueryStats
    first_report: int | None
    next_report: int | None
    last_report: int | None
    subscribers: int
    dropped: int
    state: str = "running"


@dataclass
class _Entry:
    """A registered query as the live engine tracks it."""

    cq: ContinuousQuery
    rq: RegisteredQuery
    streams: frozenset[str]
    due: int | None = None  # next report time; None until its streams have data
    first_report: int | None = None
    subscribers: list[Subscription] = field(default_factory=list)
    dropped: int = 0
    #: the last report time offered to subscribers and the result ring: a report at or
    #: before it (recomputed after a restart from a checkpoint) is not delivered twice
    #: (while in a cohort, the cohort's counts too: :meth:`last_emitted`)
    emitted: int | None = None
    #: the queries it is scheduled with (:mod:`linkstream.engine.live.cohorts`); while in
    #: one, ``due``, ``emitted`` and the reports counted are the cohort's
    cohort: Cohort | None = None

    def next_due(self) -> int | None:
        """The next report time (``None``: its streams have no data yet)."""
        k = self.cohort
        return k.due if k is not None else self.due

    def last_emitted(self) -> int | None:
        k = self.cohort
        if k is None or k.emitted is None or not k.reports_of(self.cq.name):
            return self.emitted
        return k.emitted if self.emitted is None else max(k.emitted, self.emitted)

    def reports(self) -> int:
        """Reports so far (counted in its stats, and by its cohort since it last settled)."""
        k = self.cohort
        return self.rq.stats.reports + (k.reports_of(self.cq.name) if k is not None and k.counting else 0)

    def last_report(self) -> int | None:
        k = self.cohort
        last = self.rq.last_report
        if k is None or not k.counting or k.last is None or not k.reports_of(self.cq.name):
            return last
        return k.last if last is None else max(k.last, last)


@dataclass
class _Stream:
    """Worker-side state of one stream: what has really been ingested."""

    watermark: int | None = None
    first: int | None = None
    last_seen: float = 0.0
    #: elements ingested (the stream's applied count: ``--ingest direct`` numbers them by it)
    applied: int = 0


@dataclass
class _Accepted:
    """Push-side state of one stream (under the engine lock)."""

    watermark: int | None = None
    elements: int = 0
    triples: int = 0
    late: int = 0
    late_logged: bool = False
    rejected: int = 0  # elements refused for their event time (range, jump)
