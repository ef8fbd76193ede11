"""Query registry: the continuous queries users registered, shared by all coordinators.

Recipe: one persistent node ``<root>/queries/<id>`` per query, holding JSON
``{"text", "language", "metadata"}`` (the metadata may carry the plan's signatures).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.recipe.watchers import ChildrenWatch

from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode, encode, validate_name

logger = logging.getLogger(__name__)

#: what the operations of a failed transaction other than the failing one report
_NOT_THE_CAUSE = (RolledBackError, RuntimeInconsistency)

#: bytes of node payloads in one ZooKeeper transaction (its request must stay under jute.maxbuffer)
TRANSACTION_BYTES = 256 * 1024


def chunks(payloads: list[tuple[str, bytes]], most: int = TRANSACTION_BYTES) -> list[list[tuple[str, bytes]]]:
    """``(path, data)`` pairs grouped so that each group's data stays under ``most`` bytes."""
    out: list[list[tuple[str, bytes]]] = []
    size = 0
    for path, data in payloads:
        n = len(data) + len(path)
        if not out or (out[-1] and size + n > most):
            out.append([])
            size = 0
        out[-1].append((path, data))
        size += n
    return out


class QueryExistsError(KeyError):
    """A query with that id is already registered."""


class QueryNotFoundError(KeyError):
    """No query with that id is registered."""


class QueryConflictError(RuntimeError):
    """The query changed since the version the caller read."""


@dataclass(frozen=True)
class QueryRecord:
    """A registered query.

    Attributes:
        id: Query id.
        text: Query text as submitted.
        language: ``rsp-ql``, ``cqels-ql``, ``c-sparql`` or ``sparql``.
        metadata: Free JSON (owner, plan signatures, output sink ...).
        version: ZooKeeper version of the node, for compare-and-set updates.
    """

    id: str
    text: str
    language: str = "rsp-ql"
    metadata: dict[str, Any] = field(default_factory=dict)
    version: int = 0


class QueryRegistry:
    """Registered queries are durable and every change is compare-and-set.

    A query id names exactly one record; :meth:`register` fails rather than
    overwrite, and :meth:`update` with ``expected_version`` fails if someone else
    changed the record since it was read.

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        root: Cluster root inside the chroot.
    """

    def __init__(self, client: KazooClient, root: str = DEFAULT_ROOT) -> None:
        self.client = client
        self.layout = ClusterLayout(root)

    def register(
        self, query_id: str, text: str, language: str = "rsp-ql", metadata: dict[str, Any] | None = None
    ) -> QueryRecord:
        """Stores a new query.

        Raises:
            QueryExistsError: If ``query_id`` is taken.
            ValueError: If ``query_id`` is not a valid node name.
        """
        validate_name(query_id, "query id")
        body: dict[str, Any] = {"text": text, "language": language, "metadata": dict(metadata or {})}
        try:
            self.client.create(self.layout.query(query_id), encode(body), makepath=True)
        except NodeExistsError:
            raise QueryExistsError(query_id) from None
        logger.info("registered query %s", query_id)
        return QueryRecord(query_id, text, language, dict(body["metadata"]), 0)

    def register_many(self, items: builtins.list[tuple[str, str, str, dict[str, Any]]]) -> int:
        """Stores new queries ``(id, text, language, metadata)`` in few ZooKeeper transactions.

        Stops at the first id that is taken: the queries before it are stored.

        Returns:
            How many were stored (``len(items)`` unless one was taken).

        Raises:
            QueryExistsError: With the first taken id, after storing the ones before it.
            ValueError: If an id is not a valid node name (nothing stored).
        """
        if not items:
            return 0
        for qid, *_ in items:
            validate_name(qid, "query id")
        self.client.ensure_path(self.layout.queries)
        payloads = [
            (self.layout.query(qid), encode({"text": text, "language": lang, "metadata": dict(meta)}))
            for qid, text, lang, meta in items
        ]
        done = 0
        for group in chunks(payloads):
            tx = self.client.transaction()
            for path, data in group:
                tx.create(path, data)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                done += len(group)
                continue
            bad = [r for r in results if isinstance(r, Exception) and not isinstance(r, _NOT_THE_CAUSE)]
            if not all(isinstance(r, NodeExistsError) for r in bad):
                raise bad[0]
            for _ in group:  # one was taken meanwhile: store in order up to it
                qid, text, lang, meta = items[done]
                self.register(qid, text, lang, meta)
                done += 1
        logger.info("registered %d queries", done)
        return done

    def update_states(self, metadata: dict[str, dict[str, Any]]) -> None:
        """Merges ``metadata[id]`` into many records: pipelined reads, then few transactions
        guarded by the versions read (a record changed meanwhile is updated on its own;
        records that no longer exist are skipped)."""
        ids = [qid for qid in metadata]
        pending = [(qid, self.client.get_async(self.layout.query(qid))) for qid in ids]
        writes: list[tuple[str, bytes]] = []
        versions: dict[str, int] = {}
        for qid, res in pending:
            try:
                data, stat = res.get()
            except NoNodeError:
                continue
            body = decode(data)
            merged = dict(body.get("metadata") or {})
            for key, value in metadata[qid].items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            body["metadata"] = merged
            writes.append((self.layout.query(qid), encode(body)))
            versions[self.layout.query(qid)] = stat.version
        by_path = {self.layout.query(qid): qid for qid in ids}
        for group in chunks(writes):
            tx = self.client.transaction()
            for path, data in group:
                tx.set_data(path, data, version=versions[path])
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                continue
            for path, _ in group:  # someone else wrote one of them: one by one
                try:
                    self.update(by_path[path], metadata=metadata[by_path[path]])
                except QueryNotFoundError:
                    pass

    def get(self, query_id: str) -> QueryRecord:
        """Reads one query.

        Raises:
            QueryNotFoundError: If it is not registered.
        """
        try:
            data, stat = self.client.get(self.layout.query(query_id))
        except NoNodeError:
            raise QueryNotFoundError(query_id) from None
        body = decode(data)
        return QueryRecord(
            query_id,
            str(body.get("text", "")),
            str(body.get("language", "rsp-ql")),
            dict(body.get("metadata") or {}),
            stat.version,
        )

    def get_many(self, query_ids: builtins.list[str]) -> builtins.list[QueryRecord | None]:
        """The records of ``query_ids`` (``None`` for one not registered), read pipelined."""
        reads = [(qid, self.client.get_async(self.layout.query(qid))) for qid in query_ids]
        out: builtins.list[QueryRecord | None] = []
        for qid, res in reads:
            try:
                data, stat = res.get()
            except NoNodeError:
                out.append(None)
                continue
            body = decode(data)
            out.append(
                QueryRecord(
                    qid,
                    str(body.get("text", "")),
                    str(body.get("language", "rsp-ql")),
                    dict(body.get("metadata") or {}),
                    stat.version,
                )
            )
        return out

    def update(
        self,
        query_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> QueryRecord:
        """Replaces the text and/or merges metadata (a ``None`` value deletes a key).

        Args:
            query_id: The query.
            text: New text, or ``None`` to keep it.
            metadata: Keys to set (``None`` values delete).
            expected_version: Fail unless the record is still at this version;
                ``None`` retries on concurrent changes instead.

        Raises:
            QueryNotFoundError: If it is not registered.
            QueryConflictError: If ``expected_version`` is stale.
        """
        while True:
            current = self.get(query_id)
            if expected_version is not None and current.version != expected_version:
                raise QueryConflictError(
                    f"{query_id}: version {current.version}, expected {expected_version}"
                )
            merged = dict(current.metadata)
            for key, value in (metadata or {}).items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            body: dict[str, Any] = {
                "text": current.text if text is None else text,
                "language": current.language,
                "metadata": merged,
            }
            try:
                stat = self.client.set(self.layout.query(query_id), encode(body), version=current.version)
            except BadVersionError:
                if expected_version is not None:
                    raise QueryConflictError(query_id) from None
                continue
            except NoNodeError:
                raise QueryNotFoundError(query_id) from None
            return QueryRecord(query_id, body["text"], current.language, merged, stat.version)

    def unregister(self, query_id: str) -> bool:
        """Deletes a query; returns whether it existed."""
        try:
            self.client.delete(self.layout.query(query_id))
        except NoNodeError:
            return False
        logger.info("unregistered query %s", query_id)
        return True

    def list(self) -> list[str]:
        """Ids of all registered queries, sorted."""
        try:
            return sorted(self.client.get_children(self.layout.queries))
        except NoNodeError:
            return []

    def watch(self, callback: Callable[[builtins.list[str]], bool | None]) -> ChildrenWatch:
        """Calls ``callback(query_ids)`` (sorted) now and on every registration change.

        A callback that returns ``False`` ends the watch.
        """
        self.client.ensure_path(self.layout.queries)
        return ChildrenWatch(self.client, self.layout.queries, lambda names: callback(sorted(names)))
