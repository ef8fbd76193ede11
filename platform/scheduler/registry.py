"""Query registry: the continuous queries users registered, shared by all coordinators.

Recipe: one persistent node ``<root>/queries/<id>`` per query, holding JSON
``{"text", "language", "metadata"}`` (the metadata may carry the plan's signatures).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import uuid
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
        #: records this object created, with their node versions, not yet updated: the first
        #: :meth:`update_states` of one writes it without reading it first (guarded by the
        #: version; :meth:`forget_written` drops them when another process may write the registry)
        self._written: dict[str, tuple[dict[str, Any], int]] = {}

    def forget_written(self) -> None:
        """Drops the records kept by :meth:`register_many` (e.g. when leadership changes)."""
        self._written.clear()

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
        bodies = [
            {"text": text, "language": lang, "metadata": dict(meta)} for _qid, text, lang, meta in items
        ]
        payloads = [
            (self.layout.query(qid), encode(body)) for (qid, *_), body in zip(items, bodies, strict=True)
        ]
        # The transactions are sent together (pipelined: ZooKeeper logs them in one go), chained
        # so that none applies after one that failed: each leaves an ephemeral marker that the
        # next one checks and deletes.
        groups = chunks(payloads)
        marks = ("" if self.layout.root == "/" else self.layout.root) + "/txmarks"
        if len(groups) > 1:
            self.client.ensure_path(marks)
        token = uuid.uuid4().hex
        pending = []
        for k, group in enumerate(groups):
            tx = self.client.transaction()
            if k:
                tx.check(f"{marks}/{token}-{k - 1}", 0)
                tx.delete(f"{marks}/{token}-{k - 1}")
            for path, data in group:
                tx.create(path, data)
            if k < len(groups) - 1:
                tx.create(f"{marks}/{token}-{k}", b"", ephemeral=True)
            pending.append(tx.commit_async())
        done = 0
        for k, (group, res) in enumerate(zip(groups, pending, strict=True)):
            results = res.get()
            if not any(isinstance(r, Exception) for r in results):
                for i in range(done, done + len(group)):
                    self._written[items[i][0]] = (bodies[i], 0)
                done += len(group)
                continue
            for later in pending[k + 1 :]:  # failed with it (their check)
                later.get()
            if k:
                with contextlib.suppress(NoNodeError):
                    self.client.delete(f"{marks}/{token}-{k - 1}")
            bad = [r for r in results if isinstance(r, Exception) and not isinstance(r, _NOT_THE_CAUSE)]
            if not all(isinstance(r, NodeExistsError) for r in bad):
                raise bad[0]
            for _ in group:  # one was taken meanwhile: store in order up to it
                qid, text, lang, meta = items[done]
                self.register(qid, text, lang, meta)
                done += 1
            return done + self.register_many(items[done:])  # the rest, as a batch again
        logger.info("registered %d queries", done)
        return done

    def update_states(self, metadata: dict[str, dict[str, Any]]) -> None:
        """Merges ``metadata[id]`` into many records: pipelined reads, then few transactions
        guarded by the versions read (a record changed meanwhile is updated on its own;
        records that no longer exist are skipped)."""
        ids = [qid for qid in metadata]
        known = {qid: self._written.pop(qid) for qid in ids if qid in self._written}
        pending = [(qid, self.client.get_async(self.layout.query(qid))) for qid in ids if qid not in known]
        writes: list[tuple[str, bytes]] = []
        versions: dict[str, int] = {}
        for qid, res in [*pending, *known.items()]:
            if isinstance(res, tuple):  # as this object wrote it: a newer version fails the write
                body, version = dict(res[0]), res[1]
            else:
                try:
                    data, stat = res.get()
                except NoNodeError:
                    continue
                body, version = decode(data), stat.version
            merged = dict(body.get("metadata") or {})
            for key, value in metadata[qid].items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            body["metadata"] = merged
            writes.append((self.layout.query(qid), encode(body)))
            versions[self.layout.query(qid)] = version
        by_path = {self.layout.query(qid): qid for qid in ids}
        sent = []
        for group in chunks(writes):  # independent transactions: sent together (pipelined)
            tx = self.client.transaction()
            for path, data in group:
                tx.set_data(path, data, version=versions[path])
            sent.append((group, tx.commit_async()))
        for group, res in sent:
            if not any(isinstance(r, Exception) for r in res.get()):
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
        self._written.pop(query_id, None)
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
        self._written.pop(query_id, None)
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
