"""Cluster-wide settings shared through ZooKeeper.

Not the process configuration (that is ``linkstream.config``, from files and
``LINKSTREAM_*`` variables): these are the few knobs every coordinator and container
must agree on at run time, such as the rebalance tolerance or the checkpoint interval.

Recipe: one persistent node ``<root>/config`` holding a JSON object.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode, encode

logger = logging.getLogger(__name__)


class ClusterConfigNode:
    """Every reader sees one committed version of the settings; merges never lose writes.

    :meth:`update` is a compare-and-set merge retried on conflict, so two processes
    changing different keys at once both take effect.  :meth:`watch` reports each
    version a reader observes (ZooKeeper may coalesce quick successive changes).

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        root: Cluster root inside the chroot.
    """

    def __init__(self, client: KazooClient, root: str = DEFAULT_ROOT) -> None:
        self.client = client
        self.layout = ClusterLayout(root)

    def get(self) -> dict[str, Any]:
        """The current settings (``{}`` when never set)."""
        try:
            data, _ = self.client.get(self.layout.config)
        except NoNodeError:
            return {}
        return decode(data)

    def set(self, values: Mapping[str, Any]) -> None:
        """Replaces all settings with ``values``."""
        payload = encode(dict(values))
        try:
            self.client.set(self.layout.config, payload)
        except NoNodeError:
            try:
                self.client.create(self.layout.config, payload, makepath=True)
            except NodeExistsError:
                self.client.set(self.layout.config, payload)

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Merges ``changes`` (a ``None`` value deletes the key) and returns the result."""
        while True:
            try:
                data, stat = self.client.get(self.layout.config)
            except NoNodeError:
                merged = _merge({}, changes)
                try:
                    self.client.create(self.layout.config, encode(merged), makepath=True)
                    return merged
                except NodeExistsError:
                    continue
            merged = _merge(decode(data), changes)
            try:
                self.client.set(self.layout.config, encode(merged), version=stat.version)
                return merged
            except (BadVersionError, NoNodeError):
                continue

    def watch(self, callback: Callable[[dict[str, Any]], bool | None]) -> DataWatch:
        """Calls ``callback(settings)`` now and after every change.

        A callback that returns ``False`` ends the watch.
        """

        def on_data(data: bytes | None, _stat: object) -> bool | None:
            try:
                return callback(decode(data))
            except ValueError:
                logger.warning("ignoring malformed cluster config")
                return None

        return DataWatch(self.client, self.layout.config, on_data)


def _merge(base: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged
