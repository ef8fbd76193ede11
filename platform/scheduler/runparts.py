"""The queries of a run, kept in ZooKeeper nodes of bounded size (*parts*).

The run node (:class:`~linkstream.scheduler.runs.RunNode`) names the parts and their
generations; each part is an ephemeral node ``<root>/runparts/<prefix>-<key>`` holding
``{"queries": {task: name}, "texts": {task: text}}`` for a share of the run's queries.
A run that grows (a live service registers batch after batch) adds its new queries to the
last part until it holds :data:`PART_BYTES`, then opens another one: a registration batch
writes the parts it touched and the small run node, never the whole list again, and no
node comes near ZooKeeper's 1 MB limit (``jute.maxbuffer``) however many queries run.
Removing a query rewrites the one part that names it (deleted once empty).

The texts are a copy of the registry's (the registry stays the truth): a container
reads the text of a query it is assigned from the part, not with one registry read per
query.  A text larger than :data:`TEXT_MOST` is left out (the container reads the
registry for it).

Readers (:class:`PartReader`) keep the parts they read and read again only those whose
generation in the run node changed.  ZooKeeper applies one session's requests in order
and a client never reads older state than it saw, so a reader that saw a run node also
sees the parts it names (or newer ones).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from linkstream.scheduler.layout import decode, encode

#: payload bytes after which a part takes no more queries (well under ZooKeeper's 1 MB node limit)
PART_BYTES = 128 * 1024

#: a query text longer than this is not copied into a part
TEXT_MOST = 16 * 1024


def _size(task: str, name: str, text: str | None) -> int:
    """Approximate encoded bytes of one part entry (JSON escapes may add a little)."""
    n = len(task) * 2 + len(json.dumps(name)) + 8
    return n if text is None else n + len(json.dumps(text))


@dataclass
class _Part:
    gen: int = 0
    queries: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    size: int = 0
    written: bool = False  # exists in ZooKeeper (under this session)


class PartWriter:
    """The driver's side: keeps its run's parts in step with the queries it publishes.

    Args:
        client: The driver's kazoo client (the parts are ephemeral nodes of its session).
        directory: ``<root>/runparts``.
        run_id: Id of the run (part names start with it and a token of this writer: a
            second driver that tries to claim the same run id never touches these parts).
    """

    def __init__(self, client: KazooClient, directory: str, run_id: str) -> None:
        self.client = client
        self.directory = directory
        self.run_id = run_id
        self.prefix = f"{run_id}.{uuid.uuid4().hex[:8]}"
        self.parts: dict[int, _Part] = {}
        self.where: dict[str, int] = {}  # task -> part key
        self.gen = 0
        self._next_key = 0

    def path(self, key: int) -> str:
        """The node of part ``key``."""
        return f"{self.directory}/{self.prefix}-{key}"

    def names(self) -> list[list[int]]:
        """``[key, generation]`` of every part (the run node's ``parts``)."""
        return [[k, p.gen] for k, p in sorted(self.parts.items())]

    def lost(self) -> None:
        """The session that held the parts ended: every part is written afresh next time."""
        for p in self.parts.values():
            p.written = False
            p.gen = self._bump()

    def _bump(self) -> int:
        self.gen += 1
        return self.gen

    def _open_part(self, size: int) -> int:
        if self.parts:
            key = max(self.parts)
            if self.parts[key].size + size <= PART_BYTES or not self.parts[key].queries:
                return key
        key, self._next_key = self._next_key, self._next_key + 1
        self.parts[key] = _Part()
        return key

    def update(self, queries: Mapping[str, str], texts: Mapping[str, str]) -> list[Any]:
        """Brings the parts in line with ``queries`` (task -> name); sends the writes of the
        parts that changed (pipelined) and returns their pending results, which raise on
        :meth:`~kazoo.interfaces.IAsyncResult.get` when a write failed."""
        dirty: set[int] = set()
        for task in [t for t in self.where if t not in queries]:
            key = self.where.pop(task)
            p = self.parts[key]
            name = p.queries.pop(task)
            p.size -= _size(task, name, p.texts.pop(task, None))
            dirty.add(key)
        for task, name in queries.items():
            key_now = self.where.get(task)
            text = texts.get(task)
            if text is not None and len(text) > TEXT_MOST:
                text = None
            if key_now is not None:
                p = self.parts[key_now]
                if p.queries[task] == name and (text is None or p.texts.get(task) == text):
                    continue
                p.size -= _size(task, p.queries.pop(task), p.texts.pop(task, None))
                dirty.add(key_now)
            size = _size(task, name, text)
            key = self._open_part(size)
            p = self.parts[key]
            p.queries[task] = name
            if text is not None:
                p.texts[task] = text
            p.size += size
            self.where[task] = key
            dirty.add(key)
        dirty.update(k for k, p in self.parts.items() if not p.written)
        pending = []
        for key in sorted(dirty):
            p = self.parts[key]
            if not p.queries:
                del self.parts[key]
                if p.written:
                    pending.append(self.client.delete_async(self.path(key)))
                continue
            p.gen = self._bump()
            data = encode({"gen": p.gen, "queries": p.queries, "texts": p.texts})
            if p.written:
                pending.append(self.client.set_async(self.path(key), data))
            else:
                pending.append(self._create(key, data))
                p.written = True
        return pending

    def _create(self, key: int, data: bytes) -> Any:
        self.client.ensure_path(self.directory)
        return _Created(self.client, self.path(key), data)

    def delete_all(self) -> None:
        """Deletes every part of the run (a missing one is fine)."""
        for key, p in self.parts.items():
            if p.written:
                try:
                    self.client.delete(self.path(key))
                except NoNodeError:
                    pass
                p.written = False


class _Created:
    """A pending ephemeral create that overwrites a node of this session left over."""

    def __init__(self, client: KazooClient, path: str, data: bytes) -> None:
        self.client, self.path, self.data = client, path, data
        self.result = client.create_async(path, data, ephemeral=True)

    def get(self) -> None:
        try:
            self.result.get()
        except NodeExistsError:
            self.client.set(self.path, self.data)


class PartReader:
    """A reader's side: the queries (and texts) of the parts a run node names.

    Args:
        client: A started kazoo client.
        directory: ``<root>/runparts``.
    """

    def __init__(self, client: KazooClient, directory: str) -> None:
        self.client = client
        self.directory = directory
        self.prefix: str | None = None
        self.parts: dict[int, tuple[int, dict[str, str], dict[str, str]]] = {}

    def read(self, prefix: str, names: list[Any]) -> tuple[dict[str, str], dict[str, str]]:
        """``(queries, texts)`` of the parts ``<prefix>-<key>`` a run node names (``names``:
        ``[key, gen]``).

        A part missing (the run ended or the part emptied since) counts as empty.

        Raises:
            ValueError: ``names`` or a part is malformed.
        """
        if prefix != self.prefix:
            self.prefix, self.parts = prefix, {}
        try:
            wanted = {int(k): int(g) for k, g in names}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed run parts: {exc}") from None
        for key in [k for k in self.parts if k not in wanted]:
            del self.parts[key]
        stale = [k for k, g in wanted.items() if k not in self.parts or self.parts[k][0] < g]
        pending = [(k, self.client.get_async(f"{self.directory}/{prefix}-{k}")) for k in stale]
        for key, res in pending:
            try:
                data, _ = res.get()
            except NoNodeError:
                self.parts.pop(key, None)
                continue
            body = decode(data)
            queries, texts = body.get("queries", {}), body.get("texts", {})
            if not isinstance(queries, dict) or not isinstance(texts, dict):
                raise ValueError(f"malformed run part {key}")
            self.parts[key] = (
                int(body.get("gen", 0)),
                {str(t): str(n) for t, n in queries.items()},
                {str(t): str(x) for t, x in texts.items()},
            )
        queries_all: dict[str, str] = {}
        texts_all: dict[str, str] = {}
        for key in sorted(self.parts):
            _, q, x = self.parts[key]
            queries_all.update(q)
            texts_all.update(x)
        return queries_all, texts_all


__all__ = ["PART_BYTES", "TEXT_MOST", "PartReader", "PartWriter"]
