"""The cluster as a live service: ``linkstream run --zk HOST:PORT[/chroot]``.

Every such process is a coordinator (it takes part in the leader election of
:mod:`linkstream.scheduler.coordinator` and schedules while it leads) *and* serves the
HTTP API of ``linkstream run`` -- same routes, same OpenAPI, same client.
:class:`ClusterService` is the object ``api/app.py`` drives (it satisfies
:class:`linkstream.api.backend.LiveBackend`, as :class:`~linkstream.engine.live.runtime.LiveEngine`
does).

Design (first cut of issue 15):

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
  The run (:mod:`linkstream.scheduler.runs`) *grows*: registering a query adds it (and
  its streams) to the published run node and submits its task; containers follow the
  node (:meth:`linkstream.containers.replica.RunReplica.extend`).  The run node is
  claimed at the first query and released with the last one, so ``replay --zk`` still
  works on a cluster whose API holds no query (and is refused while it holds some).
* **Standbys forward.**  A coordinator that does not lead forwards every request but
  ``/healthz``, ``/status``, ``/metrics`` and ``/openapi.json`` to the leader's API (its URL is in
  the leader's ``<root>/coordinators/<id>`` node), streaming SSE / JSONL through
  (:class:`~linkstream.cluster.proxy.LeaderProxy`).  Limit: all ingest and ticks go through one process; a
  standby adds one hop; elements pushed while no leader serves are refused (503), and
  what the old leader had buffered but not yet ticked is lost.
* **Results are read anywhere and resume.**  Every coordinator holds the replicated
  result log of :mod:`linkstream.cluster.results` and serves ``/queries/{name}/results``
  (SSE, JSONL) from it itself: result ids ``<report time>:<line>``, ``Last-Event-ID`` /
  ``?after=`` resume on any coordinator, across leader changes, within
  ``--results-retention`` (see that module for what is guaranteed).

Also missing from this cut: elements pushed before the first query is registered are
not retained for it (no run exists yet); an ISTREAM/DSTREAM query registered while
data flows misses its first report (its container needs one tick to prime it).
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import httpx
from kazoo.exceptions import KazooException, NoNodeError

from linkstream.api.backend import BatchFailed
from linkstream.cluster.driver import task_id
from linkstream.cluster.remote_engine import RemoteEngine
from linkstream.cluster.results import LOG_PATH, Entry, ResultLog
from linkstream.containers.security import Security
from linkstream.engine.embedded import Engine, QueryStats
from linkstream.engine.live.runtime import LiveEngine, QueryConflict, QueryView, UnknownQuery
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
from linkstream.scheduler.registry import QueryExistsError, QueryNotFoundError, QueryRecord, QueryRegistry
from linkstream.scheduler.runs import RunNode
from linkstream.scheduler.state import Policy
from linkstream.scheduler.zkclient import lock_down

logger = logging.getLogger(__name__)

#: the token id of the request being served (set by :class:`~linkstream.cluster.proxy.LeaderProxy`), for ``owner``
OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("linkstream_owner", default=None)


def _registration_order(rec: QueryRecord) -> tuple[int, int, str]:
    return (rec.metadata.get("registered_at") or 0, rec.metadata.get("order") or 0, rec.id)


class NotLeading(TimeoutError):
    """This coordinator does not lead (answered 503, retry later)."""


def token_id(authorization: str | None) -> str | None:
    """A short, non-reversible id of a bearer token (the ``owner`` of what it registers)."""
    if not authorization:
        return None
    return "tok-" + hashlib.sha256(authorization.encode("utf-8")).hexdigest()[:12]


class _Defaults:
    def __init__(self, default_step: int) -> None:
        self.default_step = default_step


class ClusterService:
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
    ) -> None:
        self.identifier = identifier
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
        self.registry = QueryRegistry(self.client, root)
        self.layout = ClusterLayout(root)
        info = dict(meta or {})
        if api_url:
            info["api"] = api_url
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
            if ev:
                try:
                    self._bring_up()
                except Exception:
                    logger.exception("%s: cannot start the live backend", self.identifier)
                    self._teardown()

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
                "wait": "10",
                "follower": self.identifier,
            }
            try:
                r = self._peer().get(url.rstrip("/") + LOG_PATH, params=params)
                r.raise_for_status()
                answer = r.json()
            except (httpx.HTTPError, ValueError) as exc:
                logger.debug("following %s failed: %s", url, exc)
                self.forget_leader()
                time.sleep(0.2)
                continue
            if answer.get("leading"):
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
                    r = self._peer().get(
                        url.rstrip("/") + LOG_PATH, params={"after": str(after)}, timeout=3.0
                    )
                    r.raise_for_status()
                    rows = [Entry.from_json(row) for row in r.json().get("entries") or ()]
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

    def _on_report(self, c: int, out: dict[str, list[str]]) -> None:
        self.log.append(c, {n: tuple(v) for n, v in out.items()})

    def _bring_up(self) -> None:
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
        )
        live = LiveEngine(
            remote,  # type: ignore[arg-type]  # the driver duck-types Engine
            idle_ms=self.idle_ms,
            retention_ms=self.retention_ms,
            base=self.base,
            metrics=self.metrics,
        ).start()
        if latest is not None:  # report times go on from the log's: a result id names one line
            live.advance_to(latest)
        self._live, self._remote = live, remote
        records = self._records()
        ordered = sorted(records.values(), key=_registration_order)
        # Tasks nobody registered (a crashed replay driver's) would hold container slots.
        keep = {r.id for r in ordered}
        for task in AssignmentTable(self.client, self.root).all():
            if task not in keep and RunNode(self.client, self.root).get() is None:
                AssignmentTable(self.client, self.root).withdraw(task)
        cqs, failed = [], {}
        for rec in ordered:
            name = rec.metadata["name"]
            try:
                with self._parse_lock:
                    cq = parse_continuous(rec.text, default_name=name, base=self.base)
                cqs.append(replace(cq, name=name))
            except QueryError as exc:
                failed[name] = f"failed: {exc}"
        while cqs:  # one call of the worker for all (a failure skips that query only)
            done, failure = self._load(live, remote, cqs)
            if failure is None:
                break
            k, error = failure
            failed[cqs[k].name] = f"failed: {error}"
            cqs = cqs[k + 1 :]
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

    def _write_states(self, states: dict[str, str]) -> None:
        """Queues query states for the registry (written by their own thread, coalesced: the
        live engine's worker must not wait for ZooKeeper)."""
        with self._states_lock:
            self._states_due.update(states)
        self._states_wake.set()

    def _state_writer(self) -> None:
        while not self._closed:
            self._states_wake.wait(0.5)
            self._states_wake.clear()
            with self._states_lock:
                due, self._states_due = self._states_due, {}
            if not due:
                continue
            try:
                self.registry.update_states({task_id(n): {"state": st} for n, st in due.items()})
            except KazooException:
                logger.warning("cannot write the states of %d queries", len(due), exc_info=True)
                with self._states_lock:
                    self._states_due = {**due, **self._states_due}
                time.sleep(0.5)

    def _leader_live(self, wait: float = 10.0) -> LiveEngine:
        if not self._ready.wait(wait if self.coordinator.is_leader else 0.0):
            raise NotLeading("this coordinator does not lead (yet); retry later")
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
            ident = self.coordinator.leader()
            if ident is not None:
                data, _ = self.client.get(self.layout.coordinator(ident))
                url = decode(data).get("api")
        except (NoNodeError, KazooException, ValueError):
            pass
        self._leader_cache = (time.monotonic(), ident, url)
        return ident, url

    def forget_leader(self) -> None:
        self._leader_cache = (0.0, None, None)

    # ------------------------------------------------------------------ queries

    def register(self, text: str, name: str | None = None, *, default_name: str | None = None) -> str:
        """Writes the query to the registry, then registers it on the leader's live engine."""
        try:
            return self.register_many([(text, name, default_name)])[0]
        except BatchFailed as exc:
            raise exc.error from None

    def register_many(
        self,
        items: Sequence[tuple[str, str | None, str | None]],
        *,
        parsed: Sequence[ContinuousQuery] | None = None,
    ) -> list[str]:
        """Registers ``(text, name, default_name)`` queries in order; returns their names.

        ``parsed``: the texts parsed already (with ``default_name=""``), as the API's
        compile step does under its limits; else they are parsed here.

        The batch costs a few ZooKeeper transactions, not a few round trips per query:
        the registry records are created together, the leader's run node is rewritten
        once and the tasks are submitted together (the scheduler places them in one pass).

        Raises:
            BatchFailed: Item ``index`` failed (its error in ``error``: a
                :class:`~linkstream.query.errors.QueryError` or
                :class:`~linkstream.engine.live.runtime.QueryConflict`); the queries
                before it are registered (``registered``).
            NotLeading: No leader serves (nothing registered).
        """
        live = self._leader_live()
        remote = self._remote
        now = int(time.time() * 1000)
        owner = OWNER.get()
        taken = set(self.registry.list())
        count = len(taken)
        rows: list[tuple[str, str, str, dict[str, Any]]] = []
        names: list[str] = []
        accepted: list[ContinuousQuery] = []
        failure: tuple[int, Exception] | None = None
        for i, (text, name, default_name) in enumerate(items):
            try:
                for n in (name, default_name):
                    if n is not None and (not n or len(n) > 512 or any(ord(ch) < 32 for ch in n)):
                        raise QueryError("a query name must be 1-512 printable characters")
                if parsed is not None:
                    cq = parsed[i]
                else:
                    with self._parse_lock:
                        cq = parse_continuous(text, default_name="", base=self.base)
                if not cq.windows:
                    raise QueryError(
                        "not a continuous query: it reads no stream window (send one-shot queries to /sparql)"
                    )
                qname = name or cq.name or default_name
                if qname and task_id(qname) in taken:
                    raise QueryConflict("a query named %r is already registered" % qname)
                while not qname:
                    count += 1
                    qname = "q%d" % count if task_id("q%d" % count) not in taken else ""
            except (QueryError, QueryConflict) as exc:
                failure = (i, exc)
                break
            taken.add(task_id(qname))
            meta = {
                "origin": "api",
                "dialect": cq.dialect,
                "owner": owner,
                "registered_at": now,
                "order": len(rows),  # within the batch (one registered_at)
                "state": "pending",
                "name": qname,
            }
            rows.append((task_id(qname), text, cq.dialect, meta))
            names.append(qname)
            accepted.append(cq)
        try:
            stored = self.registry.register_many(rows)
        except QueryExistsError as exc:  # registered by another coordinator meanwhile
            stored = next(k for k, r in enumerate(rows) if r[0] == exc.args[0])
            failure = (stored, QueryConflict("a query named %r is already registered" % names[stored]))
        cqs = [replace(cq, name=n) for cq, n in zip(accepted, names, strict=True)][:stored]
        try:
            done, late = self._load(live, remote, cqs)
        except BaseException:
            kept = set(live.query_names())
            for (qid, *_), n in zip(rows[:stored], names, strict=False):
                if n not in kept:
                    self.registry.unregister(qid)
            raise
        if late is not None:
            failure = late
            for qid, *_ in rows[late[0] : stored]:
                self.registry.unregister(qid)
        if failure is not None:
            raise BatchFailed(failure[0], done, failure[1])
        return done

    @staticmethod
    def _load(
        live: LiveEngine, remote: RemoteEngine | None, cqs: Sequence[ContinuousQuery]
    ) -> tuple[list[str], tuple[int, Exception] | None]:
        """Registers parsed queries on the leader's live engine in one call of its worker (a
        call per query would cost a thread hand-over each), then publishes them once
        (:meth:`RemoteEngine.flush`).  Returns the names registered and the first failure."""

        def apply() -> tuple[list[str], tuple[int, Exception] | None]:
            done: list[str] = []
            failed = None
            try:
                for k, cq in enumerate(cqs):
                    try:
                        done.append(live._do_register(cq))
                    except (QueryError, QueryConflict) as exc:
                        failed = (k, exc)
                        break
            finally:
                if remote is not None:
                    remote.flush()
            return done, failed

        result: tuple[list[str], tuple[int, Exception] | None] = live.call(
            apply, timeout=max(60.0, 0.01 * len(cqs))
        )
        return result

    def unregister(self, name: str) -> None:
        """Removes the query from the registry and from the run."""
        live = self._leader_live()
        existed = self.registry.unregister(task_id(name))
        try:
            live.unregister(name)
        except UnknownQuery:
            if not existed:
                raise
        self.log.append(self.log.max_t or 0, {}, ended=[name])  # its subscriptions end everywhere

    def query_owner(self, name: str) -> str | None:
        """The token (name, or id of an unknown bearer) that registered ``name``, from the registry."""
        try:
            owner = self.registry.get(task_id(name)).metadata.get("owner")
        except QueryNotFoundError:
            return None
        return None if owner is None else str(owner)

    def _records(self) -> dict[str, QueryRecord]:
        """The registry's API queries by name (read pipelined)."""
        out = {}
        for rec in self.registry.get_many(self.registry.list()):
            if rec is not None and rec.metadata.get("origin") == "api" and rec.metadata.get("name"):
                out[rec.metadata["name"]] = rec
        return out

    def query_names(self) -> list[str]:
        """Registered queries: the leader's, then any the registry holds that it does not."""
        live = self._live if self._ready.is_set() else None
        names = live.query_names() if live is not None else []
        recs = self._records()
        seen = set(names)
        extra = [r.metadata["name"] for r in sorted(recs.values(), key=_registration_order)]
        extra = [n for n in extra if n not in seen]
        return names + extra

    def view(self, name: str) -> QueryView:
        """The leader's view of the query, else what the registry says."""
        live, remote = (self._live, self._remote) if self._ready.is_set() else (None, None)
        if live is not None and remote is not None:
            try:
                v = live.view(name)
                return replace(
                    v, state=remote.states.get(name, "pending"), subscribers=self.log.subscribers(name)
                )
            except UnknownQuery:
                pass
        try:
            rec = self.registry.get(task_id(name))
        except QueryNotFoundError:
            raise UnknownQuery(name) from None
        key = (name, rec.text)
        cq = self._cq_cache.get(key)
        if cq is None:
            with self._parse_lock:
                cq = parse_continuous(rec.text, default_name=name, base=self.base)
            cq = self._cq_cache[key] = replace(cq, name=name)
        state = str(rec.metadata.get("state") or "pending")
        return QueryView(cq, QueryStats(), None, None, None, self.log.subscribers(name), 0, state)

    def subscribe(self, name: str, maxlen: int | None = None, after: Cursor | None = None) -> Subscription:
        """Reports of ``name`` from this coordinator's result log (any coordinator serves them)."""
        return self.log.subscribe(name, maxlen, after)

    def push(self, stream: str, t: int, triples: Any, *, timeout: float | None = None) -> bool:
        return self._leader_live().push(stream, t, triples, timeout=timeout)

    def sync(self, timeout: float | None = 60.0) -> None:
        """No durable ingest log on the cluster path yet: the leader's engine has none."""
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
        return out


__all__ = ["OWNER", "ClusterService", "NotLeading", "token_id"]
