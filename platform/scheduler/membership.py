"""Container membership: who is alive, with what capacity and data-plane address.

Recipe (in the manner of kazoo's ``Party``): each operator container owns an ephemeral
node ``<root>/containers/<id>`` holding JSON ``{"capacity", "address", ...}``.  Graceful
removal is a separate persistent request ``<root>/drain/<id>`` which the coordinator
marks complete once the container owns nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode, encode, validate_name

logger = logging.getLogger(__name__)


class MemberExistsError(RuntimeError):
    """Another live session already holds that container id."""


@dataclass(frozen=True)
class Member:
    """One live container as read from ZooKeeper.

    Attributes:
        id: Container id (node name).
        capacity: Task slots.
        address: Data-plane address.
        draining: A graceful remove was requested.
        meta: Any further fields of the node's JSON (host, pid, version ...).
        session: ZooKeeper session that owns the node; a container that restarted
            under the same id has a new one.
    """

    id: str
    capacity: int
    address: str
    draining: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    session: int = 0


MembersCallback = Callable[[dict[str, "Member"]], object]  # what it returns is ignored


class MemberWatch:
    """Calls back with the full member set whenever it (or a drain request) changes.

    The first call happens before the constructor returns.  Calls run on kazoo's
    callback thread and are serialised; they must not block for long.
    """

    def __init__(self, membership: Membership, callback: MembersCallback) -> None:
        self._membership = membership
        self._callback = callback
        self._lock = threading.Lock()
        self._names: list[str] = []
        self._drains: list[str] = []
        self._last: dict[str, Member] | None = None
        self._ready = False
        self._stopped = False
        client, layout = membership.client, membership.layout
        client.ensure_path(layout.containers)
        client.ensure_path(layout.drain)
        ChildrenWatch(client, layout.containers, self._on_names)
        ChildrenWatch(client, layout.drain, self._on_drains)
        self._ready = True
        self._fire()

    def stop(self) -> None:
        """Stops calling back (the ZooKeeper watches lapse at their next trigger)."""
        self._stopped = True

    def _on_names(self, names: list[str]) -> bool | None:
        if self._stopped:
            return False
        self._names = list(names)
        self._fire()
        return None

    def _on_drains(self, names: list[str]) -> bool | None:
        if self._stopped:
            return False
        self._drains = list(names)
        self._fire()
        return None

    def _fire(self) -> None:
        if not self._ready:
            return
        with self._lock:
            if self._stopped:
                return
            snapshot = self._membership._read(self._names, set(self._drains))
            if snapshot == self._last:
                return
            self._last = snapshot
            try:
                self._callback(snapshot)
            except Exception:
                logger.exception("membership callback failed")


class Membership:
    """A container is listed exactly while its ZooKeeper session lives.

    :meth:`join` creates the ephemeral node; it vanishes when the session ends (a
    clean close at once, a crash after the session timeout), and watchers set with
    :meth:`watch` see the new member set.  After a session expiry the node is created
    again under the new session (``rejoin=True``), so a container that survived a
    network partition re-registers; its tasks will have been reassigned meanwhile.

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        root: Cluster root inside the chroot.
    """

    def __init__(self, client: KazooClient, root: str = DEFAULT_ROOT) -> None:
        self.client = client
        self.layout = ClusterLayout(root)
        self._member_id: str | None = None
        self._payload: bytes = b""
        self._rejoin = False
        self._lost = False

    # ------------------------------------------------------------------ container side

    @property
    def member_id(self) -> str | None:
        """The id this instance joined with, or ``None``."""
        return self._member_id

    def join(
        self,
        capacity: int,
        address: str,
        member_id: str | None = None,
        meta: dict[str, Any] | None = None,
        rejoin: bool = True,
    ) -> str:
        """Registers this process as a container.

        Args:
            capacity: Task slots offered.
            address: Data-plane address other containers connect to.
            member_id: Container id; ``None`` asks ZooKeeper for a sequential
                ``oc-NNNNNNNNNN`` id.
            meta: Extra JSON fields for the node.
            rejoin: Re-create the node after a session expiry.

        Returns:
            The container id.

        Raises:
            MemberExistsError: If another session holds ``member_id``.
        """
        if self._member_id is not None:
            raise RuntimeError(f"already joined as {self._member_id}")
        body = dict(meta or {})
        body.update(capacity=int(capacity), address=address)
        self._payload = encode(body)
        self.client.ensure_path(self.layout.containers)
        if member_id is None:
            path = self.client.create(
                f"{self.layout.containers}/oc-", self._payload, ephemeral=True, sequence=True
            )
            member_id = path.rsplit("/", 1)[1]
        else:
            self._create_named(validate_name(member_id, "container id"))
        self._member_id = member_id
        self._rejoin = rejoin
        self.client.add_listener(self._on_state)
        logger.info("joined as container %s (capacity %d, %s)", member_id, capacity, address)
        return member_id

    def _create_named(self, member_id: str) -> None:
        path = self.layout.container(member_id)
        try:
            self.client.create(path, self._payload, ephemeral=True)
        except NodeExistsError:
            _, stat = self.client.get(path)
            if stat.ephemeralOwner != self.client.client_id[0]:
                raise MemberExistsError(f"container id {member_id!r} is held by another session") from None
            self.client.set(path, self._payload)

    def update(self, **fields: Any) -> None:
        """Merges ``fields`` into this container's node (e.g. a new capacity)."""
        if self._member_id is None:
            raise RuntimeError("not joined")
        body = decode(self._payload)
        body.update(fields)
        self._payload = encode(body)
        self.client.set(self.layout.container(self._member_id), self._payload)

    def leave(self) -> None:
        """Removes this container's node now (rather than at session end)."""
        member_id, self._member_id = self._member_id, None
        self.client.remove_listener(self._on_state)
        if member_id is None:
            return
        try:
            self.client.delete(self.layout.container(member_id))
        except NoNodeError:
            pass

    def _on_state(self, state: str) -> None:
        # Listeners run on the connection thread: never block here.
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            if self._rejoin and self._member_id is not None:
                self.client.handler.spawn(self._recreate)

    def _recreate(self) -> None:
        member_id = self._member_id
        if member_id is None:
            return
        try:
            self._create_named(member_id)
            logger.warning("session expired; container %s registered again", member_id)
        except (KazooException, MemberExistsError):
            logger.exception("could not register container %s again", member_id)

    # ------------------------------------------------------------------ observer side

    def members(self) -> dict[str, Member]:
        """Reads the current member set (sorted by id)."""
        self.client.ensure_path(self.layout.containers)
        names = self.client.get_children(self.layout.containers)
        try:
            drains = set(self.client.get_children(self.layout.drain))
        except NoNodeError:
            drains = set()
        return self._read(names, drains)

    def watch(self, callback: MembersCallback) -> MemberWatch:
        """Calls ``callback(members)`` now and after every change of the member set.

        Returns:
            A handle whose ``stop()`` ends the callbacks.
        """
        return MemberWatch(self, callback)

    def _read(self, names: list[str], drains: set[str]) -> dict[str, Member]:
        members: dict[str, Member] = {}
        for name in sorted(names):
            try:
                data, stat = self.client.get(self.layout.container(name))
                body = decode(data)
            except NoNodeError:
                continue  # left between listing and reading
            except ValueError:
                logger.warning("ignoring container %s with a malformed node", name)
                continue
            capacity = int(body.pop("capacity", 0))
            address = str(body.pop("address", ""))
            members[name] = Member(name, capacity, address, name in drains, body, stat.ephemeralOwner)
        return members

    # ------------------------------------------------------------------ graceful removal

    def request_drain(self, member_id: str) -> None:
        """Asks the coordinator to move everything off ``member_id`` (idempotent)."""
        try:
            self.client.create(
                self.layout.drain_request(member_id), encode({"complete": False}), makepath=True
            )
        except NodeExistsError:
            pass

    def mark_drained(self, member_id: str) -> None:
        """Records that ``member_id`` owns nothing any more and may stop."""
        path = self.layout.drain_request(member_id)
        try:
            self.client.set(path, encode({"complete": True}))
        except NoNodeError:
            self.client.create(path, encode({"complete": True}), makepath=True)

    def clear_drain(self, member_id: str) -> None:
        """Forgets a drain request (once the container has gone)."""
        try:
            self.client.delete(self.layout.drain_request(member_id))
        except NoNodeError:
            pass

    def drain_state(self, member_id: str) -> str | None:
        """``None`` (no request), ``"requested"`` or ``"complete"``."""
        try:
            data, _ = self.client.get(self.layout.drain_request(member_id))
        except NoNodeError:
            return None
        return "complete" if decode(data).get("complete") else "requested"

    def watch_drain(self, member_id: str, callback: Callable[[str | None], None]) -> DataWatch:
        """Calls ``callback(state)`` with :meth:`drain_state` values as they change.

        A container uses this to learn that it should stop (``"complete"``).
        """

        def on_data(data: bytes | None, _stat: object) -> None:
            if data is None:
                callback(None)
            else:
                callback("complete" if decode(data).get("complete") else "requested")

        return DataWatch(self.client, self.layout.drain_request(member_id), on_data)
