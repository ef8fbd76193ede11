"""Who owns each stream of ``run --zk`` (issue 15, item 3), as ZooKeeper records it.

Every stream has one **owner coordinator**, recorded in ZooKeeper as the ephemeral node
``<root>/ingest/<hash of the IRI>`` (``{"stream", "owner", "api"}``).  The node is
created by the first coordinator that must take a push of the stream and finds none:
the live coordinator (with an API) that owns the fewest streams -- the one the push
reached if it is among them, else the one rendezvous hashing of the IRI and the
coordinators' names picks -- so a cluster's streams spread over its coordinators.  When
the owner dies its session ends, the node goes, and the next push of the stream places
it again on a live coordinator -- as tasks are placed, re-placed when their holder dies.
The node's creation ``zxid`` is the ownership's **epoch**: larger for every later owner.

:class:`StreamOwners` reads (cached, one watch per stream) and claims these nodes; what
an owner does with its streams (sequencing, the hand-off to the leader) is
:mod:`linkstream.cluster.ingest`.  Every ZooKeeper call here is bounded
(:func:`zk_read`): a push is answered 503 at once while ZooKeeper is away.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import threading
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import ConnectionLoss, KazooException, NodeExistsError, NoNodeError

from linkstream.scheduler.layout import ClusterLayout, decode, encode
from linkstream.scheduler.zkclient import call_within

logger = logging.getLogger(__name__)

#: seconds a push waits for a ZooKeeper read (owner, placement) before it is answered 503
ZK_WAIT_S = 2.0


class NotOwner(TimeoutError):
    """Another coordinator owns the stream now (answered 503 with Retry-After: retry)."""


class ZooKeeperAway(NotOwner):
    """ZooKeeper does not answer: the stream's owner cannot be known (answered 503: retry)."""


def zk_read(client: Any, call: str, *args: Any, **kw: Any) -> Any:
    """``client.<call>(*args, **kw)`` of kazoo, answered within :data:`ZK_WAIT_S` or
    :class:`ZooKeeperAway`.  While its connection is lost kazoo holds a call until it is
    back (seconds to minutes; after the loss it also drops every watch, so the owners'
    cache is empty): a push then gets a quick 503 instead of a request thread blocked for
    the outage."""
    try:
        return call_within(client, call, *args, timeout=ZK_WAIT_S, **kw)
    except ConnectionLoss as exc:
        raise ZooKeeperAway(f"{exc}: the stream's owner is unknown; retry") from None


@dataclass(frozen=True)
class Owner:
    """The owner of one stream as its ZooKeeper node says."""

    ident: str
    url: str | None
    epoch: int


def stream_key(iri: str) -> str:
    """The ZooKeeper node name of a stream (IRIs may hold ``/``)."""
    return hashlib.sha256(iri.encode("utf-8")).hexdigest()[:24]


def rendezvous(iri: str, ident: str) -> int:
    """Highest-random-weight score of ``ident`` for ``iri``."""
    return int.from_bytes(hashlib.sha256(f"{iri}\n{ident}".encode()).digest()[:8], "big")


class StreamOwners:
    """Reads and claims the owner nodes of the streams (see the module docstring)."""

    def __init__(self, client: Any, root: str, identifier: str, api_url: str | None) -> None:
        self.client = client
        self.identifier = identifier
        self.api_url = api_url
        self.path = posixpath.join(root, "ingest")
        self.layout = ClusterLayout(root)
        self._cache: dict[str, Owner | None] = {}
        self._lock = threading.Lock()

    def node(self, iri: str) -> str:
        return posixpath.join(self.path, stream_key(iri))

    def owner(self, iri: str) -> Owner | None:
        """The stream's owner (cached; a watch on its node drops the cache entry)."""
        with self._lock:
            if iri in self._cache:
                return self._cache[iri]

        def changed(_event: object) -> None:
            with self._lock:
                self._cache.pop(iri, None)

        try:
            data, stat = zk_read(self.client, "get", self.node(iri), watch=changed)
            doc = decode(data)
            found: Owner | None = Owner(str(doc["owner"]), doc.get("api"), int(stat.czxid))
        except NoNodeError:
            # an exists-watch fires when the node is created
            try:
                if zk_read(self.client, "exists", self.node(iri), watch=changed) is not None:
                    return self.owner(iri)
            except KazooException:
                return None
            found = None
        except (KazooException, ValueError, KeyError, TypeError):
            return None  # not cached: asked again next time
        with self._lock:
            self._cache[iri] = found
        return found

    def forget(self, iri: str) -> None:
        """Drops the cached owner of ``iri`` (read again from ZooKeeper next time)."""
        with self._lock:
            self._cache.pop(iri, None)

    def coordinators(self) -> list[str]:
        """The live coordinators that serve the API."""
        out = []
        try:
            kids = zk_read(self.client, "get_children", self.layout.coordinators)
        except (NoNodeError, KazooException):
            return [self.identifier]
        for ident in kids:
            try:
                data, _ = zk_read(self.client, "get", self.layout.coordinator(ident))
                if decode(data).get("api"):
                    out.append(ident)
            except (NoNodeError, KazooException, ValueError):
                continue
        return out or [self.identifier]

    def place(self, iri: str) -> str:
        """Where an unowned stream goes: the coordinator owning fewest streams; among those,
        this one (the push is here: no hop when a client keeps pushing the stream here), else
        the one rendezvous hashing picks."""
        live = self.coordinators()
        load = dict.fromkeys(live, 0)
        try:
            for key in zk_read(self.client, "get_children", self.path):
                try:
                    data, _ = zk_read(self.client, "get", posixpath.join(self.path, key))
                    who = decode(data).get("owner")
                except (NoNodeError, ValueError):
                    continue
                if who in load:
                    load[who] += 1
        except NoNodeError:
            pass
        except KazooException:
            logger.debug("cannot read the stream owners", exc_info=True)
        return min(live, key=lambda c: (load[c], c != self.identifier, -rendezvous(iri, c)))

    def claim(self, iri: str) -> Owner:
        """This coordinator's ownership of ``iri``: its node, created if there is none.

        Raises:
            NotOwner: Another coordinator owns the stream (or ZooKeeper cannot say).
        """
        doc = {"stream": iri, "owner": self.identifier, "api": self.api_url}
        for _ in range(3):
            known = self.owner(iri)
            if known is not None:
                if known.ident != self.identifier:
                    raise NotOwner(f"stream <{iri}> is owned by coordinator {known.ident}; retry")
                return known
            try:
                zk_read(self.client, "ensure_path", self.path)
                zk_read(self.client, "create", self.node(iri), encode(doc), ephemeral=True)
                logger.info("%s: owns stream <%s>", self.identifier, iri)
            except NodeExistsError:
                pass
            except ZooKeeperAway as exc:  # held calls may still land: the owner is read next time
                raise ZooKeeperAway(f"stream <{iri}>: no owner can be recorded: {exc}") from None
            except KazooException as exc:
                raise NotOwner(f"stream <{iri}>: no owner can be recorded ({exc}); retry") from None
            with self._lock:
                self._cache.pop(iri, None)
        raise NotOwner(f"stream <{iri}>: ownership is changing; retry")

    def all(self) -> dict[str, str]:
        """``{stream: owner}`` of every owned stream."""
        out = {}
        try:
            for key in zk_read(self.client, "get_children", self.path):
                try:
                    data, _ = zk_read(self.client, "get", posixpath.join(self.path, key))
                    doc = decode(data)
                    out[str(doc["stream"])] = str(doc["owner"])
                except (NoNodeError, ValueError, KeyError):
                    continue
        except (NoNodeError, KazooException, ZooKeeperAway):
            pass
        return out


__all__ = [
    "ZK_WAIT_S",
    "NotOwner",
    "Owner",
    "StreamOwners",
    "ZooKeeperAway",
    "rendezvous",
    "stream_key",
    "zk_read",
]
