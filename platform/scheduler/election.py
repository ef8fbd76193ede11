"""Leader election among coordinators, with standbys that take over.

Recipe: kazoo's ``Election`` (a lock of ephemeral sequential nodes under
``<root>/leader``).  Each coordinator process contends; the holder of the lowest node
leads until its session ends, then the next one is elected.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError, KazooException, NoNodeError

from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout
from linkstream.scheduler.zkclient import call_within

logger = logging.getLogger(__name__)


class LeaderElection:
    """At most one contender holds leadership; a standby takes over when it goes.

    The leader's lock node is ephemeral, so a leader that stops (cleanly or not) is
    replaced once ZooKeeper ends its session: at once on a clean close, within the
    session timeout after a crash.  ``is_leader`` is ``False`` while the client is
    disconnected (``SUSPENDED``), because a partitioned leader cannot know whether its
    session still lives; on ``LOST`` the leadership is revoked and this contender
    queues up again under its new session.

    ``on_elected`` and ``on_revoked`` run on this recipe's own thread, in pairs.

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        identifier: Name shown to other contenders (host:pid, say).
        on_elected: Called when this contender becomes leader.
        on_revoked: Called when it stops being leader (stop, session loss).
        root: Cluster root inside the chroot.
    """

    def __init__(
        self,
        client: KazooClient,
        identifier: str,
        on_elected: Callable[[], None] | None = None,
        on_revoked: Callable[[], None] | None = None,
        root: str = DEFAULT_ROOT,
    ) -> None:
        self.client = client
        self.identifier = identifier
        self.layout = ClusterLayout(root)
        self._on_elected = on_elected
        self._on_revoked = on_revoked
        self._election = client.Election(self.layout.leader, identifier)
        self._stop = threading.Event()
        self._term: threading.Event | None = None  # set to end the current leadership
        self._holding = False
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        """Whether this contender leads and its session is connected right now."""
        return self._holding and self.client.state == KazooState.CONNECTED

    def leader(self, timeout: float | None = None) -> str | None:
        """Identifier of the current leader, or ``None`` when nobody leads.

        With ``timeout``, each ZooKeeper read is answered within it or raises
        ``ConnectionLoss`` (see :func:`call_within`); without, it waits as kazoo does.
        """
        if timeout is None:
            contenders = self._election.contenders()
            return contenders[0] if contenders else None
        try:
            kids = call_within(self.client, "get_children", self.layout.leader, timeout=timeout)
        except NoNodeError:
            return None
        # kazoo's lock nodes end in a 10-digit sequence number: the lowest holds the lock
        for node in sorted((k for k in kids if k[-10:].isdigit()), key=lambda k: k[-10:]):
            try:
                data, _ = call_within(self.client, "get", f"{self.layout.leader}/{node}", timeout=timeout)
            except NoNodeError:
                continue  # gone since the listing: the next one leads
            if data:
                return str(data.decode("utf-8"))
        return None

    def start(self) -> None:
        """Starts contending in a background thread."""
        if self._thread is not None:
            return
        self.client.add_listener(self._on_state)
        self._thread = threading.Thread(target=self._run, name=f"election-{self.identifier}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Gives up leadership (or stops waiting for it) and joins the thread."""
        self._stop.set()
        term = self._term
        if term is not None:
            term.set()
        self._election.cancel()
        self.client.remove_listener(self._on_state)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: only flip flags here.
        term = self._term
        if state == KazooState.LOST and term is not None:
            logger.warning("%s: session lost, leadership revoked", self.identifier)
            term.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._election.run(self._lead)
            except ConnectionClosedError:
                logger.info("%s: client closed, leaving the election", self.identifier)
                break
            except KazooException as exc:
                if self._stop.is_set():
                    break
                logger.warning("%s: election interrupted (%s); contending again", self.identifier, exc)
                self._stop.wait(0.2)

    def _lead(self) -> None:
        term = threading.Event()
        self._term = term
        # Checked after publishing the term so that stop() and LOST either see it or
        # are seen here.
        if self._stop.is_set() or not self._still_holds_lock():
            self._term = None
            return
        self._holding = True
        logger.info("%s: elected leader", self.identifier)
        try:
            if self._on_elected is not None:
                self._on_elected()
            term.wait()
        except Exception:
            logger.exception("%s: leader callback failed; stepping down", self.identifier)
        finally:
            self._holding = False
            self._term = None
            if self._on_revoked is not None:
                try:
                    self._on_revoked()
                except Exception:
                    logger.exception("%s: revocation callback failed", self.identifier)
            logger.info("%s: no longer leader", self.identifier)

    def _still_holds_lock(self) -> bool:
        lock = self._election.lock
        try:
            return lock.node is not None and self.client.exists(f"{lock.path}/{lock.node}") is not None
        except KazooException:
            return False
