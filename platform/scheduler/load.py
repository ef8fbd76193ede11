"""Load figures the cluster's processes publish for the autoscaler.

Each process that has a load figure to tell writes one ephemeral JSON node,
``<root>/load/<id>``, at most about once a second; nothing watches them (the autoscaler
reads them all on its own clock), so they cost one small ZooKeeper write per process and
second.  Two kinds of writers:

* an operator container (:mod:`linkstream.containers.runtime`): ``{"role": "container",
  "busy": fraction of wall time spent applying messages since its last report, "queue":
  inbox backlog, "tasks": tasks held}``;
* the leading coordinator (:mod:`linkstream.cluster.service`): ``{"role": "leader",
  "lag_ms": event time pushed but not yet reported (the newest accepted timestamp minus
  the last report time fired), "queued": elements waiting for the live worker,
  "queries": queries registered}``.

Every node also carries ``"at"``: the writer's wall clock (seconds since the epoch), so a
reader can leave out figures older than it trusts.  :func:`read_loads` reads them.

Each running ``linkstream autoscaler`` advertises itself (pid, driver, ``/metrics``
endpoint) at ``<root>/autoscalers/<id>`` (ephemeral); :func:`autoscaler_nodes` reads them
(``linkstream status`` and the Prometheus targets of a local cluster).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from linkstream.scheduler.layout import DEFAULT_ROOT, decode, encode, validate_name

logger = logging.getLogger(__name__)

#: seconds between two writes of one reporter
PUBLISH_S = 1.0


def load_root(root: str = DEFAULT_ROOT) -> str:
    """``<root>/load``: the parent of every load node."""
    return ("" if root == "/" else root) + "/load"


class LoadReporter:
    """Publishes one process's load figures as an ephemeral node (throttled).

    Args:
        client: A started kazoo client.
        ident: The node's name (a container id, ``"leader"``).
        root: Cluster root inside the chroot.
        interval: Minimum seconds between two writes.
        clock: Monotonic clock (tests pass their own).
    """

    def __init__(
        self,
        client: KazooClient,
        ident: str,
        root: str = DEFAULT_ROOT,
        interval: float = PUBLISH_S,
        clock: Any = time.monotonic,
    ) -> None:
        self.client = client
        self.path = f"{load_root(root)}/{validate_name(ident, 'load node name')}"
        self.interval = interval
        self.clock = clock
        self._last = float("-inf")

    def due(self) -> bool:
        """Whether :meth:`publish` would write now."""
        return self.clock() - self._last >= self.interval

    def publish(self, figures: dict[str, Any], force: bool = False) -> bool:
        """Writes ``figures`` (plus ``"at"``) unless the last write is too recent.

        ZooKeeper errors are logged, never raised: load figures are advisory.  Nothing is
        written while the client is disconnected: kazoo would hold the call until the
        connection is back, and a container calls this from the loop that answers ticks
        (a ZooKeeper outage must not stall the data plane).

        Returns:
            Whether it wrote.
        """
        if not force and not self.due():
            return False
        self._last = self.clock()
        if not self.client.connected:
            return False
        data = encode({**figures, "at": time.time()})
        try:
            try:
                self.client.set(self.path, data)
            except NoNodeError:
                try:
                    self.client.create(self.path, data, ephemeral=True, makepath=True)
                except NodeExistsError:  # another session's node (a restarted process)
                    self.client.set(self.path, data)
        except KazooException:
            logger.debug("cannot publish load figures at %s", self.path, exc_info=True)
            return False
        return True

    def withdraw(self) -> None:
        """Deletes the node (a leader that stops leading)."""
        try:
            self.client.delete(self.path)
        except (NoNodeError, KazooException):
            pass


def autoscalers_path(root: str = DEFAULT_ROOT) -> str:
    """``<root>/autoscalers``: where each ``linkstream autoscaler`` advertises itself."""
    return ("" if root == "/" else root) + "/autoscalers"


def autoscaler_nodes(client: KazooClient, root: str = DEFAULT_ROOT) -> list[dict[str, Any]]:
    """The running autoscalers' advertised nodes: ``{"id", "pid", "metrics", ...}`` each."""
    parent = autoscalers_path(root)
    try:
        names = sorted(client.get_children(parent))
    except NoNodeError:
        return []
    out = []
    for name in names:
        try:
            data, _ = client.get(f"{parent}/{name}")
            out.append({"id": name, **decode(data)})
        except (NoNodeError, ValueError):
            continue
    return out


def read_loads(client: KazooClient, root: str = DEFAULT_ROOT) -> dict[str, dict[str, Any]]:
    """Every load node under ``root``, by name (unreadable ones left out)."""
    parent = load_root(root)
    try:
        names = client.get_children(parent)
    except NoNodeError:
        return {}
    out = {}
    for name in sorted(names):
        try:
            data, _ = client.get(f"{parent}/{name}")
            out[name] = decode(data)
        except (NoNodeError, ValueError):
            continue
    return out


__all__ = ["PUBLISH_S", "LoadReporter", "autoscaler_nodes", "autoscalers_path", "load_root", "read_loads"]
