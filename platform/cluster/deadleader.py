"""A standby's quick verdict on a leader coordinator whose process died.

ZooKeeper ends the session of a client that vanished only after the session timeout, and
the leader's election node (and with it the leadership) lives as long as the session: a
``kill -9`` of the leader left the cluster without one for the whole timeout (2-2.5 s of a
2 s session with ``tickTime`` 500 ms, 10-10.5 s with the default 10 s), most of a take-over.

A standby sees the death sooner: its long poll of the leader's result log breaks.  It then
*proves* that the leader process is gone, and only then ends that session itself, by
attaching to it with the session id and password the leader published when it was elected
(``<root>/leader-session``, ephemeral, private to the cluster credential when secure) and
closing it -- ZooKeeper deletes the session's ephemeral nodes at once and the next
contender is elected.  The proof (all of it, :meth:`LeaderWatch.check`):

* this standby had read the leader's result log from that URL while it led (so its API
  was bound: a process that has not bound it yet, or no longer answers for it, is not
  judged);
* the leader's API refuses TCP connections, twice 50 ms apart (nothing listens on the
  port: a live process keeps its listening socket however loaded or stopped it is -- a
  ``SIGSTOP``-ed or overloaded leader completes handshakes in the kernel and is left to
  the session timeout; so is a host that vanished, which answers nothing);
* the shared ingest log's ``flock`` (``--state-dir``, the fence of the leadership) can be
  taken (then released at once): no process holds it, so no leader writes the log;
* the published session is the one that still owns the node (``ephemeralOwner``) and
  belongs to that leader.

Without ``--state-dir`` there is no fence to check and the leader is replaced at the
session timeout, as before.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from urllib.parse import urlsplit

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from linkstream.containers.security import Security
from linkstream.scheduler.layout import decode, encode
from linkstream.scheduler.zkclient import make_client

logger = logging.getLogger(__name__)

#: consecutive refused connections (this far apart, s) before a leader's API counts as gone
REFUSALS, REFUSAL_GAP_S = 2, 0.05
#: seconds between two verdicts on the same leader
RETRY_S = 0.1


def session_path(root: str) -> str:
    """The node where the leader publishes its ZooKeeper session."""
    return ("" if root == "/" else root) + "/leader-session"


def publish_session(client: KazooClient, root: str, identifier: str) -> None:
    """Publishes ``client``'s session as the leader's (called by a newly elected leader)."""
    sid, password = client.client_id
    data = encode({"id": identifier, "session": f"{sid:x}", "password": password.hex()})
    path = session_path(root)
    client.ensure_path(root)
    try:
        client.create(path, data, ephemeral=True)
    except NodeExistsError:  # an earlier leader's that stepped down without ending its session
        try:
            client.delete(path)
        except NoNodeError:
            pass
        client.create(path, data, ephemeral=True)


def refuses(url: str, timeout: float = 1.0) -> bool:
    """Whether the host of ``url`` refuses a TCP connection to its port (nothing listens)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:  # a timeout, no route, a name not resolved: nothing proven
        return False


def log_unlocked(state_dir: str) -> bool:
    """Whether no process holds the ingest log's ``flock`` of ``state_dir`` (taken and
    released at once to find out; a missing lock file: no log was ever opened)."""
    try:
        fd = os.open(os.path.join(state_dir, "lock"), os.O_RDWR)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


class LeaderWatch:
    """A standby's watch on the leader it follows (see the module text).

    Args:
        client: The standby's started kazoo client.
        hosts: ZooKeeper connection string (with chroot) to attach to the leader's session.
        security: ZooKeeper credential and TLS of the cluster.
        root: Cluster root inside the chroot.
        identifier: This coordinator's name (for log lines).
        state_dir: The shared ingest log directory (``None``: no verdicts).
        session_timeout: Session timeout of the attaching client.
    """

    def __init__(
        self,
        client: KazooClient,
        hosts: str,
        security: Security,
        root: str,
        identifier: str,
        state_dir: str | None,
        session_timeout: float,
    ) -> None:
        self.client, self.hosts, self.security = client, hosts, security
        self.root, self.identifier, self.state_dir = root, identifier, state_dir
        self.session_timeout = session_timeout
        self._seen: tuple[str, str] | None = None  # (leader, url) whose result log we read
        self._tried: dict[str, float] = {}
        #: sessions this watch closed (leader identifiers, oldest first)
        self.closed: list[str] = []

    def followed(self, leader: str, url: str) -> None:
        """The leader ``leader`` answered a poll at ``url`` while leading."""
        self._seen = (leader, url)

    def knows(self, leader: str | None, url: str) -> bool:
        """Whether ``leader`` answered a poll at ``url`` since it leads."""
        return leader is not None and self._seen == (leader, url)

    def check(self, leader: str, url: str) -> bool:
        """After a failed poll of ``leader`` at ``url``: ends its session if its process is
        proven gone; returns whether it did."""
        if not self.state_dir or self._seen != (leader, url):
            return False
        now = time.monotonic()
        if now - self._tried.get(leader, -RETRY_S) < RETRY_S:
            return False
        self._tried[leader] = now
        for k in range(REFUSALS):
            if k:
                time.sleep(REFUSAL_GAP_S)
            if not refuses(url):
                logger.debug("%s: leader %s at %s accepts connections", self.identifier, leader, url)
                return False
        if not log_unlocked(self.state_dir):
            logger.info("%s: leader %s refuses connections but holds the ingest log", self.identifier, leader)
            return False
        try:
            data, stat = self.client.get(session_path(self.root))
            info = decode(data)
            sid, password = int(info["session"], 16), bytes.fromhex(info["password"])
        except (NoNodeError, KazooException, ValueError, KeyError, TypeError):
            return False
        if info.get("id") != leader or stat.ephemeralOwner != sid:
            return False
        logger.warning(
            "%s: leader %s is gone (%s refuses connections, the ingest log is unlocked): "
            "closing its ZooKeeper session 0x%x",
            self.identifier,
            leader,
            url,
            sid,
        )
        self._close(sid, password)
        self._seen = None
        self.closed.append(leader)
        return True

    def _close(self, sid: int, password: bytes) -> None:
        other = make_client(
            self.hosts,
            self.security.zk_auth,
            self.session_timeout,
            self.security.zk_tls,
            client_id=(sid, password),
            connection_retry={"max_tries": 1, "delay": 0.1},
        )
        try:
            other.start(timeout=max(1.0, self.session_timeout))
        except Exception as exc:  # expired meanwhile, ZooKeeper away: the timeout does it
            logger.info("%s: could not attach to session 0x%x: %s", self.identifier, sid, exc)
        finally:
            try:
                other.stop()
                other.close()
            except Exception:
                logger.debug("closing the attached session failed", exc_info=True)
