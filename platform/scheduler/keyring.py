"""The cluster's CURVE public keys, read from the authenticated ZooKeeper tree.

Every process of a secure cluster has its own CURVE key pair; the secret key never
leaves the process.  The public key is published with the node that already says the
process exists:

* an operator container: ``curve`` in its membership node (``<root>/containers/<id>``);
* a driver (``replay --zk``, the leading coordinator's live run): ``driver_key`` of the
  run node (``<root>/run``);
* a coordinator (``run --zk``): ``curve`` in its node (``<root>/coordinators/<id>``) --
  with ``--ingest direct`` a stream's owner sends the containers its elements.

Only cluster members can write those nodes (:mod:`.zkclient` ACLs), so a key found
there is a cluster process's.  :class:`KeyRing` answers the two questions the data plane
asks: *whose public key is this server's* (:meth:`KeyRing.public_key`, a client
connecting to a container) and *is this client key a member's* (``key in keyring``, the
ZAP handler of every bound socket).  Both read ZooKeeper afresh: handshakes are rare
(one per connection) and a stale "no" would lock a legitimate peer out for good (a
ZeroMQ client refused by ZAP does not retry).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, SessionExpiredError

from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode

#: how long a handshake waits for this process's ZooKeeper session to come back
#: before refusing the peer (a refused peer is not admitted again on that connection)
RECONNECT_WAIT_S = 10.0

logger = logging.getLogger(__name__)

#: membership field holding a container's public key (Z85 text)
MEMBER_FIELD = "curve"
#: run-node field holding the driver's public key (Z85 text)
RUN_FIELD = "driver_key"


def _key(value: object) -> bytes | None:
    if isinstance(value, str) and len(value) == 40:
        return value.encode("ascii")
    return None


class KeyRing:
    """Public CURVE keys of the cluster's live processes (see the module).

    Args:
        client: A started, authenticated kazoo client.
        root: Cluster root inside the chroot.
        extra: Keys admitted besides the published ones (this process's own).
    """

    def __init__(self, client: KazooClient, root: str = DEFAULT_ROOT, extra: Iterable[bytes] = ()) -> None:
        self.client = client
        self.layout = ClusterLayout(root)
        self.extra = frozenset(extra)

    def public_key(self, container: str) -> bytes | None:
        """The public key container ``container`` published, or ``None``."""
        try:
            data, _ = self.client.get(self.layout.container(container))
            return _key(decode(data).get(MEMBER_FIELD))
        except (NoNodeError, ValueError):
            return None

    def keys(self) -> set[bytes]:
        """Every published key: the containers', the coordinators' and the running driver's."""
        found = set(self.extra)
        containers = self.layout.containers
        try:
            self.client.sync(self.layout.root)
            children = self.client.get_children(containers)
        except NoNodeError:
            children = []
        try:  # coordinators publish theirs too: a stream's owner sends containers its elements
            coordinators = self.client.get_children(self.layout.coordinators)
        except NoNodeError:
            coordinators = []
        paths = [f"{containers}/{cid}" for cid in children] + [
            f"{self.layout.coordinators}/{ident}" for ident in coordinators
        ]
        for path in paths:
            try:
                data, _ = self.client.get(path)
                key = _key(decode(data).get(MEMBER_FIELD))
            except (NoNodeError, ValueError):
                continue
            if key is not None:
                found.add(key)
        try:
            data, _ = self.client.get(("" if self.layout.root == "/" else self.layout.root) + "/run")
            key = _key(decode(data).get(RUN_FIELD))
            if key is not None:
                found.add(key)
        except (NoNodeError, ValueError):
            pass
        return found

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is a cluster key.  A read that fails because this process's
        session is being re-established (lost connection, expired session) is retried for
        up to :data:`RECONNECT_WAIT_S`: ZeroMQ does not retry a refused handshake, so a peer
        refused in that moment would stay cut off from this socket."""
        if key in self.extra:
            return True
        deadline = time.monotonic() + RECONNECT_WAIT_S
        while True:
            try:
                return key in self.keys()
            except (ConnectionLoss, SessionExpiredError):
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                logger.warning(
                    "cannot read the cluster's keys from ZooKeeper; refusing a peer", exc_info=True
                )
                return False
            except KazooException:
                logger.warning(
                    "cannot read the cluster's keys from ZooKeeper; refusing a peer", exc_info=True
                )
                return False
