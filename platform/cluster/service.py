"""The cluster as a live service: ``linkstream run --zk HOST:PORT[/chroot]``.

Every such process is a coordinator (it takes part in the leader election of
:mod:`linkstream.scheduler.coordinator` and schedules while it leads) *and* serves the
HTTP API of ``linkstream run`` -- same routes, same OpenAPI, same client.
:class:`ClusterService` is the object ``api/app.py`` drives (it satisfies
:class:`linkstream.api.backend.LiveBackend`, as :class:`~linkstream.engine.live.runtime.LiveEngine`
does).

Design:

* **The registry is the truth.**  ``POST /queries`` writes the query (text, name,
  dialect, owner token id, registration time) to :mod:`linkstream.scheduler.registry`
  before it is placed; a query survives coordinator restarts and leader fail-over: a
  newly elected leader re-loads every query of the registry whose metadata says
  ``"origin": "api"``.  ``GET /queries/{name}`` shows a ``state``: ``pending`` (no
  container holds it yet), ``running`` or ``failed: <reason>``; the leader writes it
  into the registry record, so a standby that cannot reach the leader still answers
  ``GET /queries`` from ZooKeeper.
* **One leader does the ingest.**  The leader runs a :class:`LiveEngine` whose engine is
  a :class:`~linkstream.cluster.remote_engine.RemoteEngine`: the live engine keeps every rule of embedded ``run`` (event
  time, per-stream watermarks, idle streams, late elements dropped and counted, report
  times, subscriptions), and the remote engine carries its calls to the operator
  containers through the machinery of ``replay --zk``
  (:class:`~linkstream.cluster.driver.ClusterEngine`, :class:`~linkstream.cluster.fanout.Fanout`):
  pushed elements are sequenced per stream and routed to the containers whose queries
  read them, every report time is one tick on every container, and the lines of the
  due queries come back from their answerers and go to the SSE / JSONL subscribers.
  The run (:mod:`linkstream.scheduler.runs`) *grows*: a registration batch adds its
  queries to the run's parts (:mod:`linkstream.scheduler.runparts`) and submits their
  tasks; containers follow the run.  The run is claimed at the first query and released
  with the last one, so ``replay --zk`` still works on a cluster whose API holds no query.
* **Standbys forward; stream owners sequence.**  A coordinator that does not lead forwards
  writes to the leader's API (:class:`~linkstream.cluster.proxy.LeaderProxy`); a push goes to
  its stream's owner coordinator (:mod:`linkstream.cluster.ingest`), which parses and
  sequences it and hands it to the leader.  Limit: the leader applies every element and
  drives every tick.
* **The death of the leader loses nothing** with ``--state-dir DIR`` (one directory every
  coordinator reaches: a shared filesystem).  The leader's live engine writes the
  cluster's durable ingest log there (:class:`~linkstream.engine.live.ingestlog.IngestLog`:
  every accepted element, registration and explicit watermark, in the worker's order,
  group-committed) and a push is acknowledged only once it is fsynced.  Only the leader
  holds the log's lock; a new leader waits for it (the dead leader's lock goes with its
  process), replays the whole log through a new run on the containers -- the same
  windows, the same report times -- and appends nothing to the result log at or before
  the latest report time it holds (those reports were made and replicated by the old
  leader); the reports after it, which the old leader owed, come from the replay.  With
  a ``--state-dir`` per coordinator and a shared ``--checkpoints`` store, the leader ships
  its log there (:mod:`linkstream.engine.live.logship`) and a new leader merges it
  (:meth:`ClusterService._adopt_shipped`): what was acknowledged but not yet shipped is
  lost; without ``--state-dir``, all the old leader had accepted.
* **Results are read anywhere and resume.**  Every coordinator holds the replicated
  result log of :mod:`linkstream.cluster.results` and serves ``/queries/{name}/results``
  (SSE, JSONL) from it itself: result ids ``<report time>:<line>``, ``Last-Event-ID`` /
  ``?after=`` resume on any coordinator, across leader changes, within
  ``--results-retention`` (see that module for what is guaranteed).

Not covered: elements pushed before the first query is registered are
not retained for it (no run exists yet); an ISTREAM/DSTREAM query registered while
data flows misses its first report (its container needs one tick to prime it).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import httpx
from kazoo.exceptions import KazooException, NoNodeError

from linkstream.cluster.deadleader import LeaderWatch, publish_session
from linkstream.cluster.ingest import StreamIngest
from linkstream.cluster.registration import QueriesMixin, registration_order, stale_registrations
from linkstream.cluster.remote_engine import RemoteEngine
from linkstream.cluster.results import Entry, ResultLog, fetch_log
from linkstream.cluster.streamlog import BodyStore
from linkstream.cluster.streamowners import ZK_WAIT_S
from linkstream.containers.security import Security
from linkstream.engine.embedded import Engine
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.subscription import RESULTS_RETENTION_S, Cursor, Subscription
from linkstream.engine.oneshot.embedded import evaluate_one_shot, parse_one_shot
from linkstream.metrics import CoordinatorMetrics, LiveMetrics
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.query.errors import QueryError
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.static import load_graph
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.coordinator import Coordinator
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode
from linkstream.scheduler.load import LoadReporter
from linkstream.scheduler.registry import QueryRegistry
from linkstream.scheduler.runs import RunNode
from linkstream.scheduler.state import Policy
from linkstream.scheduler.zkclient import call_within, lock_down

logger = logging.getLogger(__name__)


class NotLeading(TimeoutError):
    """This coordinator does not lead (answered 503, retry later)."""


class _Defaults:
    def __init__(self, default_step: int) -> None:
        self.default_step = default_step


class ClusterService(QueriesMixin):
    """A coordinator that serves the HTTP API (see the module docstring).

    Args:
        hosts: ZooKeeper connection string (with chroot).
        identifier: This coordinator's name in the election.
        api_url: The URL other coordinators forward requests to (published in ZooKeeper).
        statics: ``(iri or None, path)`` static graph files (containers load them; this
            process too, for one-shot ``/sparql``).
        base: Base IRI.
        default_step: Report step of windows without STEP.
        idle_ms: As for ``linkstream run``.
        retention_ms: As for ``linkstream run``.
        root: Cluster root inside the chroot.
        session_timeout: ZooKeeper session timeout (how fast a dead leader is replaced).
        tick_interval: Scheduler tick while leading.
        policy: Scheduler policy.
        meta: More fields for the coordinator's ZooKeeper node (metrics endpoint ...).
        coordinator_metrics: The scheduler's metrics.
        ready_timeout: See :class:`~linkstream.cluster.remote_engine.RemoteEngine`.
        results_retention_s: Wall-clock seconds of results kept for resuming readers.
        security: ZooKeeper credential and CURVE keys (``None``: insecure).  Secure: the
            coordinator's nodes are private to the credential, it makes older open nodes
            of the tree private at start (:func:`~linkstream.scheduler.zkclient.lock_down`),
            and its live run's sockets speak CURVE.
    """

    def __init__(
        self,
        hosts: str,
        *,
        identifier: str,
        api_url: str | None,
        statics: Sequence[tuple[str | None, str]] = (),
        base: str = "http://localhost/",
        default_step: int = 1000,
        idle_ms: int | None = 5000,
        retention_ms: int = 60_000,
        root: str = DEFAULT_ROOT,
        session_timeout: float = 10.0,
        tick_interval: float = 1.0,
        policy: Policy | None = None,
        meta: dict[str, Any] | None = None,
        coordinator_metrics: CoordinatorMetrics | None = None,
        ready_timeout: float = 30.0,
        results_retention_s: float = RESULTS_RETENTION_S,
        security: Security | None = None,
        state_dir: str | None = None,
        checkpoints: str | None = None,
        checkpoint_interval: float = 10.0,
        log_ship_interval: float = 1.0,
    ) -> None:
        self.identifier = identifier
        #: the cluster's durable ingest log (``run --zk --state-dir``: one directory every
        #: coordinator reaches), replayed by each new leader; ``None``: pushes are not durable
        self.state_dir = state_dir
        #: where the leader checkpoints the cluster (with ``state_dir``), every ``checkpoint_interval`` s
        self.checkpoints, self.checkpoint_interval = checkpoints, checkpoint_interval
        #: the leader ships the ingest log to ``checkpoints`` (when outside ``state_dir``) every this s
        self.log_ship_interval = log_ship_interval
        #: what this coordinator's last take-over restored and replayed (``/status``)
        self.takeover: dict[str, Any] | None = None
        self.session_timeout = session_timeout
        #: report times at or before this were made by an earlier leader (never appended again)
        self._floor: int | None = None
        self.security = security or Security.insecure()
        self.coordinator_metrics = coordinator_metrics
        self.api_url = api_url
        self.statics = tuple(statics)
        self.base = base
        self.engine = _Defaults(default_step)
        self.idle_ms = idle_ms
        self.retention_ms = retention_ms
        self.root = root
        self.ready_timeout = ready_timeout
        self.metrics = LiveMetrics()
        self.log = ResultLog(results_retention_s)
        #: bearer secret this coordinator sends to the others (set by :func:`~linkstream.cluster.proxy.create_service_app`)
        self.peer_token: str | None = None
        #: how this coordinator checks the others' HTTPS certificates (``run --zk --tls-cert``)
        self.peer_verify: Any = True
        self._peer_http: httpx.Client | None = None
        self.client = self.security.kazoo(hosts, session_timeout)
        #: a dead leader's session is closed at once by its follower, not at the timeout
        self.leader_watch = LeaderWatch(
            self.client, hosts, self.security, root, identifier, state_dir, session_timeout
        )
        self.registry = QueryRegistry(self.client, root)
        self.layout = ClusterLayout(root)
        #: per-stream owners: sequencing and hand-off of pushed elements (:mod:`~linkstream.cluster.ingest`)
        self.ingest = StreamIngest(self)
        info = dict(meta or {})
        if api_url:
            info["api"] = api_url
        if self.security.enabled:  # containers admit it (a stream's owner sends them elements)
            info["curve"] = self.security.public_text
        self.coordinator = Coordinator(
            self.client,
            identifier,
            root=root,
            policy=policy,
            tick_interval=tick_interval,
            metrics=coordinator_metrics,
            meta=info,
            on_leading=self._leading_changed,
        )
        self._static = Engine(MemoryDictionary(), default_step=default_step, log_fn=logger.warning)
        for k, (iri, path) in enumerate(self.statics):
            self._static.add_static(iri, load_graph(path, self._static.dictionary, bnode_prefix=f"s{k}_"))
        self._static_lock = threading.Lock()
        self._parse_lock = threading.Lock()
        self._events: queue.Queue[bool | None] = queue.Queue()
        self._live: LiveEngine | None = None
        self._remote: RemoteEngine | None = None
        self._ready = threading.Event()
        self._cq_cache: dict[tuple[str, str], ContinuousQuery] = {}
        self._leader_cache: tuple[float, str | None, str | None] = (0.0, None, None)
        self._started = False
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._states_lock = threading.Lock()
        self._states_due: dict[str, str] = {}
        self._states_wake = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ClusterService:
        """Connects to ZooKeeper and joins the election (idempotent)."""
        if self._started:
            return self
        self._started = True
        self.client.start(timeout=30)
        if self.security.enabled:
            self.client.ensure_path(self.root)
            lock_down(self.client, self.root, self.security.zk_auth)
        threads = (
            (self._control, "service-control"),
            (self._upkeep, "service-upkeep"),
            (self._follow, "service-follow"),
            (self._report_load, "service-load"),
            (self._state_writer, "service-states"),
        )
        for target, name in threads:
            th = threading.Thread(target=target, name=name, daemon=True)
            th.start()
            self._threads.append(th)
        self.coordinator.start()
        logger.info("coordinator %s serves the API at %s", self.identifier, self.api_url)
        return self

    def close(self) -> None:
        """Leaves the election, ends the leader's run and closes the session."""
        if self._closed:
            return
        self._closed = True
        self._events.put(None)
        self._states_wake.set()
        for th in self._threads:
            th.join(10)
        self.log.close()
        self.ingest.close()
        try:
            self.coordinator.stop()
        finally:
            self.client.stop()
            self.client.close()

    def _leading_changed(self, leading: bool) -> None:
        self._events.put(leading)

    def _control(self) -> None:
        while True:
            ev = self._events.get()
            self._teardown()
            if ev is None:
                return
            while ev:  # leading: bring the backend up, again after a failure while still leading
                try:
                    self._bring_up()
                    break
                except Exception:
                    logger.exception("%s: cannot start the live backend; retrying", self.identifier)
                    self._teardown()
                time.sleep(1.0)
                if self._closed or not self.coordinator.is_leader or not self._events.empty():
                    break

    def _report_load(self) -> None:
        """While leading, publishes the autoscaler's figures once a second (its own thread, so a
        busy live worker cannot delay them): the tick lag, elements queued, queries."""
        reporter = LoadReporter(self.client, "leader", self.root)
        published = False
        while not self._closed:
            time.sleep(0.2)
            live = self._live
            if live is None or not self._ready.is_set():
                if published:
                    reporter.withdraw()
                    published = False
                continue
            if not reporter.due():
                continue
            try:
                st = live.status()
            except Exception:  # closed meanwhile
                continue
            marks = [s["watermark"] for s in st["streams"].values() if s.get("watermark") is not None]
            newest, last = max(marks, default=None), st.get("last_report")
            lag = 0 if newest is None or last is None else max(0, int(newest) - int(last))
            figures = {"role": "leader", "lag_ms": lag, "queued": live.backlog(), "queries": st["queries"]}
            published = reporter.publish(figures) or published

    def _upkeep(self) -> None:
        """Lets the leader read its containers' messages while no tick or push does."""
        while not self._closed:
            time.sleep(0.25)
            self.log.expire()
            live, remote = self._live, self._remote
            if live is not None and remote is not None and self._ready.is_set():
                try:
                    live.call(remote.poll, timeout=30)
                except Exception:  # closed meanwhile, or a ZooKeeper hiccup: next round
                    logger.debug("upkeep poll failed", exc_info=True)

    def _peer(self) -> httpx.Client:
        if self._peer_http is None:
            headers = {"Authorization": "Bearer " + self.peer_token} if self.peer_token else {}
            self._peer_http = httpx.Client(
                headers=headers, timeout=httpx.Timeout(5.0, read=40.0), verify=self.peer_verify
            )
        return self._peer_http

    def _follow(self) -> None:
        """While standing by: copies the leader's result log (long polls on its API)."""
        while not self._closed:
            if self.coordinator.is_leader or self._ready.is_set():
                time.sleep(0.1)
                continue
            ident, url = self.leader()
            if not url or ident == self.identifier:
                time.sleep(0.1)
                continue
            params = {
                "after": str(self.log.last),
                "committed": str(self.log.committed),
                # the first poll of a leader answers at once: its watch knows it (deadleader.py)
                "wait": "10" if self.leader_watch.knows(ident, url) else "0",
                "follower": self.identifier,
            }
            try:
                answer = fetch_log(self._peer(), url, params)  # (msgpack: see ResultLog.answer_packed)
            except (httpx.HTTPError, ValueError) as exc:
                logger.debug("following %s failed: %s", url, exc)
                self.forget_leader()
                if not isinstance(exc, httpx.TransportError):
                    time.sleep(0.2)
                elif not (ident and self.leader_watch.check(ident, url)):
                    time.sleep(0.1)  # the leader's process may be exiting: look again soon
                continue
            if answer.get("leading"):
                if ident:
                    self.leader_watch.followed(ident, url)
                self.log.follow(answer)
            else:
                self.forget_leader()
                time.sleep(0.1)

    def _repair(self) -> list[Entry]:
        """The entries after ours that another live coordinator holds (the longest run)."""
        best: list[Entry] = []
        try:
            kids = self.client.get_children(self.layout.coordinators)
        except (NoNodeError, KazooException):
            kids = []
        for ident in kids:
            if ident == self.identifier:
                continue
            try:
                data, _ = self.client.get(self.layout.coordinator(ident))
                url = decode(data).get("api")
            except (NoNodeError, KazooException, ValueError):
                continue
            got: list[Entry] = []
            after = self.log.last
            while url:
                try:
                    answer = fetch_log(self._peer(), url, {"after": str(after)}, timeout=3.0)
                    rows = [Entry.from_json(row) for row in answer.get("entries") or ()]
                except (httpx.HTTPError, ValueError, TypeError, KeyError) as exc:
                    logger.info("%s: no result log from %s: %s", self.identifier, ident, exc)
                    break
                rows = [e for e in rows if e.seq > after]
                if not rows or rows[0].seq != after + 1:
                    break
                got += rows
                after = rows[-1].seq
            if len(got) > len(best):
                best = got
        if best:
            logger.info(
                "%s: repaired the result log up to %d from the other coordinators",
                self.identifier,
                best[-1].seq,
            )
        return best

    def _on_report(self, c: int, out: dict[str, Sequence[str]]) -> None:
        if self._floor is not None and c <= self._floor:
            return  # replayed from the ingest log: the result log holds this report time already
        self.log.append(c, dict(out))  # (the lines as they came: no copy per query)

    def _adopt_shipped(self, ingest: IngestLog) -> None:
        """What the local ingest log lacks (no shared ``state_dir``: another leader wrote it)
        comes from the log the previous leaders shipped to the checkpoint store."""
        from linkstream.engine.live.logship import adopt_shipped, ship_enabled
        from linkstream.store.checkpoints import open_checkpoints

        if self.checkpoints and self.state_dir and ship_enabled(self.checkpoints, self.state_dir):
            adopt_shipped(ingest, open_checkpoints(self.checkpoints).backend)

    def _replay_log(self, live: LiveEngine) -> int:
        """Opens the shared ingest log (waiting for the previous leader's lock: it is released
        when that process dies or steps down), replays it through ``live`` and attaches it;
        returns the number of records replayed."""
        assert self.state_dir is not None
        t_lock = time.perf_counter()
        deadline = time.monotonic() + max(30.0, 3 * self.session_timeout)
        while True:
            try:
                ingest = IngestLog(self.state_dir)
                bodies = BodyStore(self.state_dir)
                ingest.resolve = bodies.resolve  # --ingest direct's references
                ingest.decide = self.ingest.rebuild(bodies)  # and the owners' decisions on them
                break
            except OSError as exc:
                if "in use" not in str(exc) or time.monotonic() > deadline or not self.coordinator.is_leader:
                    raise
                time.sleep(0.1)
        logger.info("%s: opened the ingest log (%.2f s)", self.identifier, time.perf_counter() - t_lock)
        from linkstream.cluster.checkpoints import recover_leader

        t0 = time.perf_counter()
        try:
            self._adopt_shipped(ingest)
            registered = set(self._records())
            skip = stale_registrations(ingest.pending_records(), registered)
            assert self._remote is not None
            self.takeover = recover_leader(self, live, self._remote, ingest, skip, registered)
        except BaseException:
            ingest.close()
            raise
        n = int(self.takeover["replayed"])
        logger.info(
            "%s: replayed %d ingest log records of %s after %s (%.2f s; reports up to t=%s were delivered before)",
            self.identifier,
            n,
            self.state_dir,
            self.takeover["checkpoint"] or "no checkpoint",
            time.perf_counter() - t0,
            self._floor,
        )
        return n

    def _bring_up(self) -> None:
        try:  # lets a standby end this session at once if this process dies (deadleader.py)
            publish_session(self.client, self.root, self.identifier)
        except KazooException as exc:
            logger.warning("%s: cannot publish the leader session: %s", self.identifier, exc)
        latest = self.log.lead(self._repair())
        remote = RemoteEngine(
            self.client,
            base=self.base,
            default_step=self.engine.default_step,
            statics=self.statics,
            retention_ms=self.retention_ms,
            root=self.root,
            ready_timeout=self.ready_timeout,
            on_states=self._write_states,
            on_report=self._on_report,
            security=self.security,
            on_reject=None
            if self.coordinator_metrics is None
            else self.coordinator_metrics.on_reject("results"),
            cuts=self.ingest.stream_log is not None,  # --ingest direct (or owners)
            owners=self.ingest.owners_send,
        )
        live = LiveEngine(
            remote,  # type: ignore[arg-type]  # the driver duck-types Engine
            idle_ms=self.idle_ms,
            retention_ms=self.retention_ms,
            base=self.base,
            metrics=self.metrics,
        )
        live.keep_rings = False  # (readers are served from the result log: self.log)
        live.start()
        self._live, self._remote = live, remote
        remote.applied = live.applied_count  # --ingest direct: the run numbers elements as owners do
        remote.bodies = self.ingest.bodies()  # --ingest meta: elements held by reference are read there
        self._floor = latest
        if self.state_dir:
            # Every acknowledged element, registration and watermark, in the old leader's order:
            # the containers get the same windows; reports up to ``latest`` are not sent again.
            remote.replaying = True  # --ingest owners: the leader sends what it replays itself
            self._replay_log(live)
            live.call(lambda: setattr(remote, "replaying", False))
        if latest is not None:  # report times go on from the log's: a result id names one line
            live.advance_to(latest)
        records = self._records()
        replayed = set(live.query_names())
        for name in sorted(replayed - set(records)):  # unregistered when the old leader died
            live.unregister(name)
        ordered = sorted((r for n, r in records.items() if n not in replayed), key=registration_order)
        # Tasks nobody registered (a crashed replay driver's) would hold container slots.
        keep = {r.id for r in ordered}
        for task in AssignmentTable(self.client, self.root).all():
            if task not in keep and RunNode(self.client, self.root).get() is None:
                AssignmentTable(self.client, self.root).withdraw(task)
        cqs, texts, failed = [], [], {}
        for rec in ordered:
            name = rec.metadata["name"]
            try:
                with self._parse_lock:
                    cq = parse_continuous(rec.text, default_name=name, base=self.base)
                cqs.append(replace(cq, name=name))
                texts.append(rec.text)
            except QueryError as exc:
                failed[name] = f"failed: {exc}"
        while cqs:  # one call of the worker for all (a failure skips that query only)
            done, failure = self._load(live, remote, cqs, texts)
            if failure is None:
                break
            k, error = failure
            failed[cqs[k].name] = f"failed: {error}"
            cqs, texts = cqs[k + 1 :], texts[k + 1 :]
        for name, state in failed.items():
            logger.error("%s: cannot re-load query %s: %s", self.identifier, name, state)
        if failed:
            self._write_states(failed)
        self._ready.set()
        logger.info(
            "%s: leading; %d queries re-loaded from the registry", self.identifier, len(records) - len(failed)
        )

    def _teardown(self) -> None:
        self._ready.clear()
        self.log.step_down()
        live, remote = self._live, self._remote
        self._live = self._remote = None
        if live is not None:
            live.close()
        if remote is not None:
            try:
                remote.close()
            except Exception:
                logger.warning("closing the live run failed", exc_info=True)

    def _leader_live(self, wait: float = 10.0) -> LiveEngine:
        if not self._ready.wait(wait if self.coordinator.is_leader else 0.0):
            raise NotLeading(
                "this coordinator leads but is still starting; retry later"
                if self.coordinator.is_leader
                else "no coordinator leads the cluster now (an election is under way); retry later"
            )
        live = self._live
        if live is None:
            raise NotLeading("this coordinator does not lead; retry later")
        return live

    # ------------------------------------------------------------------ leader discovery

    def leading(self) -> bool:
        """Whether this coordinator leads (its backend may still be starting)."""
        return self.coordinator.is_leader

    def leader(self, max_age: float = 1.0) -> tuple[str | None, str | None]:
        """``(identifier, API URL)`` of the leader (cached for ``max_age`` seconds)."""
        at, ident, url = self._leader_cache
        if time.monotonic() - at < max_age:
            return ident, url
        ident = url = None
        try:
            # bounded: a request thread asks, and kazoo holds calls while ZooKeeper is away
            ident = self.coordinator.leader(timeout=ZK_WAIT_S)
            if ident is not None:
                data, _ = call_within(self.client, "get", self.layout.coordinator(ident), timeout=ZK_WAIT_S)
                url = decode(data).get("api")
        except (NoNodeError, KazooException, ValueError):
            pass
        self._leader_cache = (time.monotonic() if url else 0.0, ident, url)  # "none" is not kept
        return ident, url

    def forget_leader(self) -> None:
        self._leader_cache = (0.0, None, None)

    # ------------------------------------------------------------------ queries
    def subscribe(self, name: str, maxlen: int | None = None, after: Cursor | None = None) -> Subscription:
        """Reports of ``name`` from this coordinator's result log (any coordinator serves them)."""
        return self.log.subscribe(name, maxlen, after)

    def push_many(
        self,
        stream: str,
        elements: Sequence[tuple[int, Any]],
        *,
        keys: Any = None,
        timeout: float | None = None,
    ) -> tuple[list[bool], Exception | None]:
        return self._leader_live().push_many(stream, elements, keys=keys, timeout=timeout)

    def push_elements(
        self,
        stream: str,
        elements: Sequence[tuple[int, Any]],
        *,
        timeout: float | None = 60.0,
        key: str | None = None,
    ) -> tuple[list[bool], Exception | None]:
        """One body of ``stream``, sequenced by the stream's owner (this coordinator: the proxy
        forwarded the push here), applied by the leader (see :mod:`~linkstream.cluster.ingest`)."""
        return self.ingest.push_elements(stream, elements, timeout=timeout, key=key)

    def sync(self, timeout: float | None = 60.0) -> None:
        """Waits until the pushes so far are durable in the shared ingest log (``--state-dir``;
        without one, until the leader's worker took them)."""
        self._leader_live().sync(timeout)

    def advance_to(self, t: int) -> int | None:
        return self._leader_live().advance_to(t)

    def one_shot(
        self,
        sparql: str,
        *,
        default_graphs: Sequence[str] | None = None,
        named_graphs: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """One-shot SPARQL over the static graphs (any coordinator answers it itself)."""
        with self._parse_lock:
            cq = parse_one_shot(sparql, self.base)
        dflt = tuple(default_graphs) if default_graphs else None
        named = tuple(named_graphs) if named_graphs else None
        with self._static_lock:
            return evaluate_one_shot(self._static, cq, dflt, named)

    def status(self) -> dict[str, Any]:
        ident, url = self.leader()
        out: dict[str, Any] = {
            "role": "leader" if self._ready.is_set() else "standby",
            "coordinator": self.identifier,
            "leader": ident,
            "leader_api": url,
        }
        live = self._live if self._ready.is_set() else None
        if live is not None:
            out.update(live.status())
            remote = self._remote
            cluster = remote.cluster if remote is not None else None
            out["run"] = None if cluster is None else cluster.spec.id
            out["containers"] = [] if cluster is None else sorted(cluster.fanout.peers)
        else:
            out["queries"] = len(self._records())
        out["result_log"] = {
            "last": self.log.last,
            "committed": self.log.committed,
            "followers": sorted(self.log.followers),
        }
        out["ingest"] = self.ingest.status()
        if self.takeover is not None:
            out["takeover"] = self.takeover
        return out


__all__ = ["ClusterService", "NotLeading"]
