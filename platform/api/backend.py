"""What the HTTP API needs of the engine it serves: :class:`LiveBackend`.

Two classes satisfy it: :class:`linkstream.engine.live.runtime.LiveEngine` (``linkstream
run``, one process) and :class:`linkstream.cluster.service.ClusterService` (``linkstream run
--zk``, a coordinator of a cluster).  ``api/app.py`` codes against this protocol only; a backend that also has
``register_many(items, parsed=...)`` (both do: one worker command, or a few ZooKeeper transactions,
per batch, with the queries the API parsed already) gets the JSON-array form of ``POST /queries``
in one call, failing with :class:`BatchFailed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from linkstream.engine.live.runtime import QueryView
from linkstream.engine.live.state import BatchFailed
from linkstream.engine.live.subscription import Cursor, Subscription
from linkstream.metrics import LiveMetrics


class _Engine(Protocol):
    @property
    def default_step(self) -> int: ...


class LiveBackend(Protocol):
    """The engine calls of ``api/app.py`` (see :class:`~linkstream.engine.live.runtime.LiveEngine`)."""

    @property
    def engine(self) -> _Engine: ...  # read-only here: implementations hold their own engine type

    metrics: LiveMetrics

    def start(self) -> Any: ...

    def close(self) -> None: ...

    def register(self, text: str, name: str | None = None, *, default_name: str | None = None) -> str: ...

    def unregister(self, name: str) -> None: ...

    def query_names(self) -> list[str]: ...

    def view(self, name: str) -> QueryView: ...

    def subscribe(self, name: str, maxlen: int | None = None, after: Cursor | None = None) -> Subscription:
        """Reports of ``name`` from the next on, or after result id ``after`` (raises
        :class:`~linkstream.engine.live.subscription.ResultsGone` if no longer kept)."""
        ...

    def push_many(
        self,
        stream: str,
        elements: Sequence[tuple[int, Any]],
        *,
        keys: Sequence[str | None] | None = None,
        timeout: float | None = None,
    ) -> tuple[list[bool], Exception | None]:
        """``push`` of each element in order, stopping at the first refused: per element
        taken (``False``: late) and the error that stopped the body (event time, full queue)."""
        ...

    def sync(self, timeout: float | None = 60.0) -> None:
        """Waits until the elements pushed so far are durable (``run --state-dir``), else returns."""
        ...

    def advance_to(self, t: int) -> int | None: ...

    def one_shot(
        self,
        sparql: str,
        *,
        default_graphs: Sequence[str] | None = None,
        named_graphs: Sequence[str] | None = None,
    ) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...


__all__ = ["BatchFailed", "LiveBackend"]
