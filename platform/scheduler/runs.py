"""The running replay: one ephemeral node that describes it to every operator container.

Recipe: the driver of a cluster replay creates the ephemeral node ``<root>/run`` holding
a :class:`RunSpec` (JSON): the run id, the driver's result endpoint, the static graph
files every container loads (same order, same blank-node prefixes as the embedded
replay, so each container builds the same static graphs), the replayed streams and
their retention horizons.  The node lives exactly as long as the driver's ZooKeeper
session, so containers that watch it (:meth:`RunNode.watch`) drop a run whose driver
died (at once when they hold none of its tasks, else after a grace period: a driver whose
session expired in a ZooKeeper outage publishes its run again under its new session,
:meth:`RunNode.keep_across_expiry`).  Creating it fails while another replay runs: one
driver per cluster at a time.

The queries of a run are ordinary registry records (:mod:`.registry`) whose metadata
names the run; their tasks are ordinary assignment entries (:mod:`.assignment`).  The run
node itself stays small: the task -> name list (with a copy of each text) lives in nodes of
bounded size that it names, written only where they changed (:mod:`.runparts`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode, encode
from linkstream.scheduler.registry import QueryNotFoundError, QueryRegistry
from linkstream.scheduler.runparts import PartReader, PartWriter
from linkstream.scheduler.state import TaskSpec

logger = logging.getLogger(__name__)

#: how a run's driver sends stream elements to its containers (``RunSpec.route``)
ROUTES = ("streams", "broadcast")


class RunActiveError(RuntimeError):
    """Another replay already drives this cluster."""


@dataclass(frozen=True)
class RunSpec:
    """What every container must know about the running replay.

    Attributes:
        id: Run id (unique per replay).
        driver: ZeroMQ endpoint of the driver's result PULL socket.
        base: Base IRI of the queries.
        default_step: Report step of windows without STEP/SLIDE.
        statics: ``(iri or None, path)`` static graph files, in load order.
        streams: IRIs of the replayed streams; elements name them by index.
        horizons: Per stream, how many ms of history a newly registered query may need
            (largest range plus step of any window of the run on it), or ``None`` when
            a count or NOW window reads it: then nothing of it is ever collected.
        queries: Task id to query name, for every query of the run.
        route: How the driver sends stream elements: ``"broadcast"`` (every element to
            every container) or ``"streams"`` (each element only to the containers that
            subscribed to its stream; a container subscribes to the streams of the
            queries ZooKeeper assigns it, see :mod:`linkstream.cluster.fanout`).
        driver_key: The driver's CURVE public key (Z85), ``""`` in an insecure cluster:
            containers connect to ``driver`` with it and admit the driver's connections
            (:mod:`linkstream.scheduler.keyring`).
        texts: Task id to query text, for queries whose text the driver publishes with the
            run (a copy of the registry's, so that containers need not read it per query);
            not part of equality.
    """

    id: str
    driver: str
    base: str
    default_step: int
    statics: tuple[tuple[str | None, str], ...] = ()
    streams: tuple[str, ...] = ()
    horizons: tuple[int | None, ...] = ()
    queries: dict[str, str] = field(default_factory=dict)
    route: str = "broadcast"
    driver_key: str = ""
    texts: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The node payload."""
        return {
            "id": self.id,
            "driver": self.driver,
            "base": self.base,
            "default_step": self.default_step,
            "statics": [list(s) for s in self.statics],
            "streams": list(self.streams),
            "horizons": list(self.horizons),
            "queries": dict(self.queries),
            "route": self.route,
            "driver_key": self.driver_key,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> RunSpec:
        """Parses :meth:`to_json` output.

        Raises:
            ValueError: A field is missing or of the wrong type.
        """
        try:
            statics = tuple((None if i is None else str(i), str(p)) for i, p in body.get("statics", []))
            horizons = tuple(None if h is None else int(h) for h in body.get("horizons", []))
            streams = tuple(str(s) for s in body.get("streams", []))
            if len(horizons) != len(streams):
                raise ValueError("one horizon per stream")
            route = str(body.get("route", "broadcast"))
            if route not in ROUTES:
                raise ValueError(f"unknown route {route!r}")
            return cls(
                id=str(body["id"]),
                driver=str(body["driver"]),
                base=str(body["base"]),
                default_step=int(body["default_step"]),
                statics=statics,
                streams=streams,
                horizons=horizons,
                queries={str(k): str(v) for k, v in dict(body.get("queries", {})).items()},
                route=route,
                driver_key=str(body.get("driver_key", "")),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed run description: {exc}") from exc


@dataclass(frozen=True)
class RunQuery:
    """One query of a run: the task placed by the scheduler and its registry record."""

    task: TaskSpec
    name: str
    text: str
    language: str


class RunNode:
    """At most one replay runs per cluster, and it is visible exactly while its driver lives.

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        root: Cluster root inside the chroot.
    """

    def __init__(self, client: KazooClient, root: str = DEFAULT_ROOT) -> None:
        self.client = client
        self.layout = ClusterLayout(root)
        prefix = "" if self.layout.root == "/" else self.layout.root
        self.path = prefix + "/run"
        self.parts_path = prefix + "/runparts"
        self._writer: PartWriter | None = None

    def _head(self, spec: RunSpec) -> bytes:
        assert self._writer is not None
        w = self._writer
        return encode({**spec.to_json(), "queries": {}, "parts": w.names(), "parts_of": w.prefix})

    def claim(self, spec: RunSpec) -> None:
        """Publishes ``spec`` as the running replay (ephemeral nodes of this session).

        Raises:
            RunActiveError: Another driver's run node exists.
        """
        if self._writer is None or self._writer.run_id != spec.id:
            self._writer = PartWriter(self.client, self.parts_path, spec.id)
        else:
            self._writer.lost()  # published again under a new session
        for result in self._writer.update(spec.queries, spec.texts):
            result.get()
        try:
            self.client.create(self.path, self._head(spec), ephemeral=True, makepath=True)
        except NodeExistsError:
            self._writer.delete_all()
            self._writer = None
            current = self.get(queries=False)
            raise RunActiveError(
                f"replay {current.id if current else '?'} is already running on this cluster"
            ) from None

    def open(self, spec: RunSpec, queries: Sequence[RunQuery]) -> None:
        """Claims the run, clears what a dead driver left, registers and submits the queries.

        Raises:
            RunActiveError: Another driver's run node exists (nothing was changed).
        """
        self.claim(spec)
        table, registry = (
            AssignmentTable(self.client, self.layout.root),
            QueryRegistry(self.client, self.layout.root),
        )
        # Queries registered through the HTTP API of a live service (``linkstream run --zk``)
        # are not a dead driver's leftovers: they stay registered.
        kept = set()
        for query in registry.list():
            try:
                if registry.get(query).metadata.get("origin") == "api":
                    kept.add(query)
                    continue
            except QueryNotFoundError:
                continue
            registry.unregister(query)
        for task in table.all():
            if task not in kept:
                table.withdraw(task)
        for q in queries:
            registry.register(q.task.id, q.text, q.language, {"name": q.name, "run": spec.id})
        for q in queries:
            table.submit(q.task)

    def close(self, spec: RunSpec) -> None:
        """Withdraws the run's queries, then ends it (logs, never raises, on ZooKeeper errors).

        The tasks go first: a container that sees the run node go while it still holds
        tasks of the run keeps the run for a while (its driver's session may have expired
        in a ZooKeeper outage: :meth:`keep_across_expiry`), one that holds none ends it.
        """
        table, registry = (
            AssignmentTable(self.client, self.layout.root),
            QueryRegistry(self.client, self.layout.root),
        )
        try:
            for task in spec.queries:
                table.withdraw(task)
                registry.unregister(task)
            self.release()
        except KazooException:
            logger.warning("could not clean up run %s in ZooKeeper", spec.id, exc_info=True)

    def keep_across_expiry(self, current: Callable[[], RunSpec | None]) -> Callable[[], None]:
        """Publishes the run again after this session expired; returns what stops that.

        A ZooKeeper outage longer than the session timeout (or a driver cut off from
        ZooKeeper that long) ends the session and with it the ephemeral run node.  Once
        the client is connected again under a new session, ``current()`` (the run as it is
        now; ``None`` when it is over) is claimed again, so the containers, which keep a
        run whose node vanished while they hold its tasks, carry on with it.
        """
        lost = threading.Event()

        def reclaim() -> None:
            spec = current()
            if spec is None:
                return
            try:
                self.claim(spec)
                logger.warning("ZooKeeper session expired; run %s published again", spec.id)
            except RunActiveError as exc:
                logger.error("cannot publish run %s again: %s", spec.id, exc)
            except KazooException as exc:
                logger.error("cannot publish run %s again: %s", spec.id, exc)

        def on_state(state: str) -> None:  # kazoo's connection thread: never block here
            if state == KazooState.LOST:
                lost.set()
            elif state == KazooState.CONNECTED and lost.is_set():
                lost.clear()
                self.client.handler.spawn(reclaim)

        self.client.add_listener(on_state)
        return lambda: self.client.remove_listener(on_state)

    def update(self, spec: RunSpec) -> None:
        """Publishes a newer description of this session's run (a live service grows its run)."""
        for result in self.update_async(spec):
            result.get()

    def update_async(self, spec: RunSpec) -> list[Any]:
        """Sends the writes of :meth:`update` (the parts that changed, then the run node) and
        returns their pending results (``get()`` raises when a write failed)."""
        if self._writer is None or self._writer.run_id != spec.id:
            raise RuntimeError(f"run {spec.id} was not claimed by this node")
        pending = self._writer.update(spec.queries, spec.texts)
        return [*pending, self.client.set_async(self.path, self._head(spec))]

    def release(self) -> None:
        """Ends the run (deletes its nodes; containers drop its state)."""
        try:
            self.client.delete(self.path)
        except NoNodeError:
            pass
        if self._writer is not None:
            self._writer.delete_all()
            self._writer = None

    def get(self, queries: bool = True) -> RunSpec | None:
        """The running replay, or ``None``; ``queries=False``: without its queries (the run
        node alone: id, driver, streams ...)."""
        try:
            data, _ = self.client.get(self.path)
        except NoNodeError:
            return None
        try:
            return self._spec(data, PartReader(self.client, self.parts_path) if queries else None)
        except ValueError:
            logger.warning("ignoring a malformed run node")
            return None

    @staticmethod
    def _spec(data: bytes, reader: PartReader | None) -> RunSpec:
        body = decode(data)
        spec = RunSpec.from_json(body)
        if reader is None or "parts" not in body:
            return spec
        if not isinstance(body["parts"], list) or not isinstance(body.get("parts_of"), str):
            raise ValueError("malformed run parts")
        queries, texts = reader.read(body["parts_of"], body["parts"])
        return replace(spec, queries=queries, texts=texts)

    def watch(self, callback: Callable[[RunSpec | None], None]) -> DataWatch:
        """Calls ``callback(spec)`` now and whenever the run starts or ends."""
        self.client.ensure_path(self.layout.root)
        reader = PartReader(self.client, self.parts_path)

        def on_data(data: bytes | None, _stat: object) -> None:
            spec = None
            if data is not None:
                try:
                    spec = self.client.retry(self._spec, data, reader)
                except ValueError:
                    logger.warning("ignoring a malformed run node")
                except KazooException as exc:  # the watch fires again once reconnected
                    logger.warning("cannot read the queries of the run: %s", exc)
                    return
            callback(spec)

        return DataWatch(self.client, self.path, on_data)


class VanishedRun:
    """A container's view of a run whose node vanished while its tasks are still submitted.

    A driver that ends its run withdraws the tasks first (:meth:`RunNode.close`), so a run
    node that goes while they remain means the driver died or its session expired; in a
    ZooKeeper outage it publishes the run again (:meth:`RunNode.keep_across_expiry`), so
    the container keeps the run for ``grace`` seconds rather than dropping its state.

    Args:
        client: The container's kazoo client.
        root: Cluster root inside the chroot.
        grace: Seconds to keep a vanished run.
    """

    def __init__(self, client: KazooClient, root: str, grace: float) -> None:
        self.client = client
        self.layout = ClusterLayout(root)
        self.grace = grace
        self.since: float | None = None

    def hold(self, spec: RunSpec) -> bool:
        """The node of ``spec`` vanished: whether to keep the run for now."""
        if self.since is None:
            try:
                remain = bool(set(self.client.get_children(self.layout.tasks)) & set(spec.queries))
            except NoNodeError:
                remain = False
            except KazooException:
                remain = True  # cannot tell: keep it
            if not remain:
                return False
            self.since = time.monotonic()
            logger.warning(
                "run %s vanished with its tasks submitted; kept %gs for its driver", spec.id, self.grace
            )
        return True

    def over(self) -> bool:
        """Whether a kept run's grace has run out (the caller ends the run)."""
        return self.since is not None and time.monotonic() > self.since + self.grace

    def clear(self) -> None:
        """The run changed or came back."""
        self.since = None
