"""Where the cluster keeps its state in ZooKeeper, and how node payloads are encoded.

Every node under the cluster root holds a JSON object (UTF-8), never a pickle::

    <root>/containers/<container>         ephemeral, a live operator container (membership)
    <root>/drain/<container>              a graceful-remove request, and its completion
    <root>/tasks/<task>                   a task's spec and owner (assignment)
    <root>/assignments/<container>/<task> index of the tasks one container owns
    <root>/migrations/<task>              a stateful hand-over not yet acknowledged
    <root>/queries/<query>                registered query text and metadata (registry)
    <root>/leader/...                     leader election among coordinators
    <root>/leader-session                 ephemeral, the leader's session (cluster/deadleader.py)
    <root>/coordinators/<coordinator>     ephemeral, a live coordinator (its metrics endpoint)
    <root>/config                         cluster-wide settings

``root`` defaults to ``/linkstream`` and is itself inside the client's chroot, so a test
can give every case its own ``/t-<uuid>`` chroot and keep the same layout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_ROOT = "/linkstream"


def validate_name(name: str, what: str = "name") -> str:
    """Checks that ``name`` can be one ZooKeeper path segment.

    Args:
        name: Proposed node name (a container id, task signature id, query id).
        what: What the name identifies, for the error message.

    Returns:
        ``name`` unchanged.

    Raises:
        ValueError: If the name is empty, contains ``/`` or a NUL, or is ``.``/``..``.
    """
    if not isinstance(name, str) or not name or "/" in name or "\x00" in name or name in (".", ".."):
        raise ValueError(f"invalid {what} for a ZooKeeper node: {name!r}")
    return name


def encode(payload: dict[str, Any]) -> bytes:
    """Encodes a node payload as compact, key-sorted JSON."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")


def decode(data: bytes | None) -> dict[str, Any]:
    """Decodes a node payload; an empty node decodes to ``{}``.

    Raises:
        ValueError: If the bytes are not a JSON object.
    """
    if not data:
        return {}
    value = json.loads(data.decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"node payload is not a JSON object: {value!r}")
    return value


@dataclass(frozen=True)
class ClusterLayout:
    """Paths of the cluster's nodes under one root.

    Attributes:
        root: Absolute path of the cluster root inside the client's chroot.
    """

    root: str = DEFAULT_ROOT

    def __post_init__(self) -> None:
        if not self.root.startswith("/") or (len(self.root) > 1 and self.root.endswith("/")):
            raise ValueError(f"cluster root must be an absolute path without trailing '/': {self.root!r}")

    def _join(self, *parts: str) -> str:
        base = "" if self.root == "/" else self.root
        return "/".join((base, *parts))

    @property
    def containers(self) -> str:
        return self._join("containers")

    def container(self, container_id: str) -> str:
        return self._join("containers", validate_name(container_id, "container id"))

    @property
    def drain(self) -> str:
        return self._join("drain")

    def drain_request(self, container_id: str) -> str:
        return self._join("drain", validate_name(container_id, "container id"))

    @property
    def tasks(self) -> str:
        return self._join("tasks")

    def task(self, task_id: str) -> str:
        return self._join("tasks", validate_name(task_id, "task id"))

    def assignments(self, container_id: str) -> str:
        return self._join("assignments", validate_name(container_id, "container id"))

    @property
    def assignments_root(self) -> str:
        return self._join("assignments")

    def assignment(self, container_id: str, task_id: str) -> str:
        return self._join(
            "assignments", validate_name(container_id, "container id"), validate_name(task_id, "task id")
        )

    @property
    def migrations(self) -> str:
        return self._join("migrations")

    def migration(self, task_id: str) -> str:
        return self._join("migrations", validate_name(task_id, "task id"))

    @property
    def queries(self) -> str:
        return self._join("queries")

    def query(self, query_id: str) -> str:
        return self._join("queries", validate_name(query_id, "query id"))

    @property
    def leader(self) -> str:
        return self._join("leader")

    @property
    def coordinators(self) -> str:
        return self._join("coordinators")

    def coordinator(self, coordinator_id: str) -> str:
        return self._join("coordinators", validate_name(coordinator_id, "coordinator id"))

    @property
    def config(self) -> str:
        return self._join("config")
