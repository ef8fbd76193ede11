"""Per-stream ingest of ``run --zk`` (issue 15, item 3): owners sequence, the leader applies.

Every stream has one **owner coordinator** (placed and recorded in ZooKeeper by
:class:`~linkstream.cluster.streamowners.StreamOwners`; its node's creation ``zxid`` is the
ownership's **epoch**, larger for every later owner).

The owner **sequences** the stream: under one lock per stream it gives each element
the next offset ``(epoch, n)`` (``n`` from 0 per epoch; the pair only grows), and
hands the elements, in that order, to the leader's live engine -- itself when it
leads, else in one ``POST /_cluster/ingest`` per request body (the parsed terms in
msgpack: the leader does not parse N-Triples again).  The leader applies a stream's bodies in
offset order, skips offsets it applied already (an owner's retry after a lost answer
is not taken twice) and refuses an older epoch than the newest it has seen (a stale
owner).  A push that reaches another coordinator is forwarded to the owner by
:class:`~linkstream.cluster.proxy.LeaderProxy` (the leader forwards too, so one
process sequences each stream).

What stays on the leader: the live engine (event time, watermarks, ``--idle-ms``,
late elements, report times) decides on every element and drives the ticks, so the
answers and results are those of embedded ``run``.  With ``--ingest leader`` the elements
pass through it to the containers' data plane; with ``--ingest direct`` the owner sends
the elements the leader's worker applied to the containers itself
(:class:`~linkstream.cluster.ownersender.OwnerSender`; ``docs/architecture.md``, "Direct
ingest").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import httpx
import msgpack
from kazoo.exceptions import KazooException, NoNodeError

from linkstream.cluster.decisions import DECIDED_HEADER, DecisionPoller, OwnerDecisions, Pending
from linkstream.cluster.ingestwire import (
    META_FIELDS,
    meta_elements,
    pack_elements,
    split_elements,
    unpack_elements,
    with_refs,
)
from linkstream.cluster.leaderbook import _Applied, rebuild_decision, restore_decisions, saved_decisions
from linkstream.cluster.ownersender import OwnerSender
from linkstream.cluster.streamowners import (
    ZK_WAIT_S,
    NotOwner,
    Owner,
    StreamOwners,
    ZooKeeperAway,
    stream_key,
    zk_read,
)
from linkstream.engine.live.batchpush import Decided, RefRows, TermRows
from linkstream.rdf.eventtime import EventTimeError
from linkstream.scheduler.layout import decode

if TYPE_CHECKING:
    from linkstream.cluster.service import ClusterService
    from linkstream.cluster.streamlog import BodyStore, StreamLog
    from linkstream.engine.live.ingestlog import LogRecord

logger = logging.getLogger(__name__)

#: the leader's internal route for an owner's sequenced elements
INGEST_PATH = "/_cluster/ingest"
#: media type of the bodies an owner sends to ``INGEST_PATH``
MSGPACK = "application/x-msgpack"
#: seconds an owner keeps retrying a body the leader could not take (no leader, connection lost)
HANDOFF_S = 15.0
#: seconds the leader waits for room in its input queue per element before answering "full"
ROOM_S = 5.0


@dataclass
class _Sequence:
    """An owned stream: its epoch and the next offset (``lock`` orders its bodies);
    ``book``: ``--ingest direct``, the leader's decisions on its bodies known so far."""

    epoch: int
    next: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    book: OwnerDecisions = field(default_factory=OwnerDecisions)


class StreamIngest:
    """A coordinator's part of the ingest: routing, sequencing owned streams, and (on the
    leader) applying the owners' bodies."""

    def __init__(self, service: ClusterService) -> None:
        self.service = service
        self.owners = StreamOwners(service.client, service.root, service.identifier, service.api_url)
        self._seqs: dict[str, _Sequence] = {}
        self._applied: dict[str, _Applied] = {}
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None
        self._url: tuple[str, httpx.URL] | None = None
        #: ``run --zk --ingest direct``: the owned streams' bodies are logged here (``None``: leader)
        self.stream_log: StreamLog | None = None
        self._poller: DecisionPoller | None = None
        self._poll_http: httpx.Client | None = None
        #: ``--ingest owners``: sends the owned streams' decided elements to the containers
        self.owners_send = False
        self.sender: OwnerSender | None = None
        #: ``--ingest meta`` (owners, and the leader gets a meta body: times, sizes, references)
        self.meta = False

    # ------------------------------------------------------------------ routing

    def route(self, iri: str) -> str | None:
        """The API URL a push of ``iri`` must be forwarded to; ``None``: handle it here.

        Raises:
            ZooKeeperAway: The owner is not known and ZooKeeper cannot tell (503: retry).
        """
        own = self.owners.owner(iri)
        if own is None:
            winner = self.owners.place(iri)
            if winner == self.service.identifier:
                return None
            try:
                data, _ = zk_read(self.service.client, "get", self.service.layout.coordinator(winner))
                url = decode(data).get("api")
            except (NoNodeError, KazooException, ValueError):
                return None
            return str(url) if url else None
        if own.ident == self.service.identifier or not own.url:
            return None
        return own.url

    # ------------------------------------------------------------------ the owner

    def _sequence(self, iri: str) -> _Sequence:
        own = self.owners.claim(iri)
        with self._lock:
            seq = self._seqs.get(iri)
            if seq is None or seq.epoch != own.epoch:
                seq = self._seqs[iri] = _Sequence(own.epoch)
                if self.owners_send:  # --ingest owners: this owner sends the elements
                    if self.sender is None:
                        svc = self.service
                        self.sender = OwnerSender(svc.client, svc.root, svc.security)
                    seq.book.sink = partial(self.sender.decided, iri, own.epoch)
            return seq

    def push_elements(
        self,
        iri: str,
        elements: Sequence[tuple[int, Any]],
        *,
        timeout: float | None = 60.0,
        key: str | None = None,
    ) -> tuple[list[bool], Exception | None]:
        """Sequences one body of ``iri`` (this coordinator owns the stream, claiming it if
        nobody does) and hands it to the leader's live engine.

        Returns:
            Per element applied, whether it was taken (``False``: late), and the error that
            stopped the body (:class:`EventTimeError`, or :class:`TimeoutError` when the
            leader's input queue stayed full), after which nothing was taken.

        Raises:
            NotOwner: Another coordinator owns the stream.
            NotLeading: No leader took the body within :data:`HANDOFF_S` seconds.
        """
        from linkstream.cluster.service import NotLeading

        seq = self._sequence(iri)
        with seq.lock:
            offset = seq.next
            packed = None
            heard: list[tuple[int | None, list[list[Any]], str | None]] | None = None
            if self.stream_log is not None:  # --ingest direct: the body is durable here first
                packed, elements = self._log_body(iri, seq.epoch, offset, elements, key)
                if self.sender is not None:
                    self.sender.add(iri, seq.epoch, offset, elements)
                if self.meta:  # the leader (this one too) holds references, not terms
                    elements = [(t, RefRows(len(rows), rows.ref)) for t, rows in elements]  # type: ignore[arg-type]  # with_refs gave every element its ref
                heard = []
                if self._poller is None:
                    self._start_poller()
            # direct: the decisions below ``after`` are known here (the leader may drop them)
            after = seq.book.decided
            unanswered = [False]  # a try of the hand-off may have reached a leader, no answer came
            try:
                if self.service.leading() and self.service._ready.is_set():
                    flags, error = self.apply(
                        iri, seq.epoch, offset, elements, key, owner=self.service.identifier, heard=heard
                    )
                    if heard is not None:
                        heard.append((*self.decisions(iri, seq.epoch, after), self.run_id()))
                else:
                    flags, error = self._hand_off(
                        iri, seq.epoch, offset, elements, key, timeout, packed, heard, after, unanswered
                    )
            except Exception as exc:
                if unanswered[0] or not isinstance(exc, (NotLeading, NotOwner)):
                    # the leader may have applied the body (and died, or failed after it): its
                    # offsets are never given to another body, which it would skip as a retry
                    seq.next = offset + len(elements)
                raise
            seq.next = offset + len(flags) + (1 if isinstance(error, EventTimeError) else 0)
            for floor, decisions, run in heard or ():  # decisions on this stream's earlier bodies
                seq.book.learn(floor, decisions, offset, run)
        return flags, error

    def _body(
        self, iri: str, epoch: int, offset: int, elements: Sequence[tuple[int, Any]], key: str | None
    ) -> dict[str, Any]:
        """The hand-off form of one body (see :func:`pack_elements`)."""
        return {
            "stream": iri,
            "owner": self.service.identifier,
            "epoch": epoch,
            "offset": offset,
            "key": key,
            **pack_elements(elements),
        }

    def _log_body(
        self, iri: str, epoch: int, offset: int, elements: Sequence[tuple[int, Any]], key: str | None
    ) -> tuple[bytes, list[tuple[int, TermRows]]]:
        """``--ingest direct``: appends the body to this owner's stream log and fsyncs it;
        returns its hand-off bytes (naming the record) and its elements, each referring to
        the record (the leader's ingest log keeps the reference, not the terms)."""
        assert self.stream_log is not None
        record = self.stream_log.reserve(iri, epoch)
        body = self._body(iri, epoch, offset, elements, key)
        body["record"] = record
        packed = msgpack.packb(body, use_bin_type=True)
        self.stream_log.append(iri, epoch, offset, packed, record)
        if self.meta:  # --ingest meta: the hand-off carries no terms (the leader reads no body)
            packed = msgpack.packb({k: body[k] for k in META_FIELDS}, use_bin_type=True)
        # the parts were just built here: no second validation (unpack_elements is for peers' bytes)
        return packed, with_refs(split_elements(body), epoch, record)

    def _ingest_url(self, api: str) -> httpx.URL:
        """The leader's ingest URL, parsed once per leader (httpx parses a string per request)."""
        if self._url is None or self._url[0] != api:
            self._url = (api, httpx.URL(api.rstrip("/") + INGEST_PATH))
        return self._url[1]

    def _peer_client(self, timeout: httpx.Timeout) -> httpx.Client:
        """An HTTP client to other coordinators (the cluster's peer token, its TLS check)."""
        token = self.service.peer_token
        return httpx.Client(
            headers={"Authorization": "Bearer " + token} if token else {},
            timeout=timeout,
            verify=self.service.peer_verify,
        )

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = self._peer_client(httpx.Timeout(5.0, read=120.0))
        return self._http

    def _hand_off(
        self,
        iri: str,
        epoch: int,
        offset: int,
        elements: Sequence[tuple[int, Any]],
        key: str | None,
        timeout: float | None,
        packed: bytes | None = None,
        heard: list[tuple[int | None, list[list[Any]], str | None]] | None = None,
        after: int = 0,
        unanswered: list[bool] | None = None,
    ) -> tuple[list[bool], Exception | None]:
        """Hands one body to the leader.  ``heard`` (``--ingest direct``): appended the
        leader's completed decisions on the stream's bodies from offset ``after`` on (the
        ones below it are acknowledged by the request's :data:`DECIDED_HEADER`).
        ``unanswered[0]`` is set when a try may have reached a leader that did not answer
        (connection lost after sending, an unreadable answer, a failure but 409/503)."""
        from linkstream.cluster.service import NotLeading

        if packed is None:
            # msgpack with the body's distinct terms once and the triples as a raw int32 buffer
            # of indexes into them: the leader decodes few strings, encodes each term once
            packed = msgpack.packb(self._body(iri, epoch, offset, elements, key), use_bin_type=True)
        deadline = time.monotonic() + HANDOFF_S
        while True:
            # while ZooKeeper is away, the leader last known (asking would hold the thread)
            service = self.service
            ident, url = service.leader() if service.client.connected else service._leader_cache[1:]
            if url and ident != self.service.identifier:
                try:
                    headers = {"content-type": MSGPACK}
                    if heard is not None:
                        headers[DECIDED_HEADER] = str(after)
                    r = self._client().post(self._ingest_url(url), content=packed, headers=headers)
                    if r.status_code == 200:
                        doc = r.json()
                        if heard is not None and doc.get("decided"):
                            floor, decisions, *run = doc["decided"]
                            heard.append((floor, decisions, run[0] if run else None))
                        return self._answer(doc)
                    if r.status_code == 409:  # a newer owner took the stream over
                        self.owners.forget(iri)
                        raise NotOwner(r.json().get("error", f"stream <{iri}>: not the owner"))
                    if r.status_code != 503 and unanswered is not None:  # 503: not leading, nothing taken
                        unanswered[0] = True
                    logger.debug("leader %s refused a body of <%s>: %s", ident, iri, r.text[:200])
                except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                    logger.debug("handing a body of <%s> to %s failed: %s", iri, url, exc)
                except (httpx.HTTPError, ValueError) as exc:  # sent: the leader may have taken it
                    if unanswered is not None:
                        unanswered[0] = True
                    logger.debug("handing a body of <%s> to %s failed: %s", iri, url, exc)
            if self.service.leading() and self.service._ready.is_set():  # we lead now
                got = self.apply(
                    iri, epoch, offset, elements, key, owner=self.service.identifier, heard=heard
                )
                if heard is not None:
                    heard.append((*self.decisions(iri, epoch, after), self.run_id()))
                return got
            self.service.forget_leader()
            if not service.client.connected:  # no leader can be found until ZooKeeper is back
                raise NotLeading("ZooKeeper is unreachable and no leader took the elements; retry")
            if time.monotonic() > deadline:
                raise NotLeading("no leader takes the stream's elements; retry later")
            time.sleep(0.1)

    @staticmethod
    def _answer(doc: dict[str, Any]) -> tuple[list[bool], Exception | None]:
        flags = [bool(x) for x in doc.get("flags") or ()]
        err = doc.get("error")
        if not err:
            return flags, None
        if err.get("kind") == "time":
            return flags, EventTimeError(str(err.get("message")), err.get("t"), str(err.get("reason")))
        return flags, TimeoutError(str(err.get("message") or "the engine's input queue is full"))

    # ------------------------------------------------------------------ the leader

    def apply(
        self,
        iri: str,
        epoch: int,
        offset: int,
        elements: Sequence[tuple[int, Any]],
        key: str | None,
        *,
        owner: str,
        heard: list[Any] | None = None,
    ) -> tuple[list[bool], Exception | None]:
        """The leader's side: pushes one sequenced body into the live engine, in offset order.
        ``heard`` not ``None`` (``--ingest direct``): the worker's decision on the body is
        kept in the stream's :class:`DecisionBook` for its owner (nothing waits for it).

        Raises:
            NotOwner: ``epoch`` is older than one already seen for the stream.
            NotLeading: This coordinator does not lead.
        """
        live = self.service._leader_live(wait=5.0)
        with self._lock:
            st = self._applied.setdefault(iri, _Applied())
        try:
            with st.lock:
                return self._apply(live, st, iri, epoch, offset, elements, key, owner, heard is not None)
        finally:
            live.sync(timeout=60.0)  # --state-dir: answered once the leader's ingest log holds them

    @staticmethod
    def _apply(
        live: Any,
        st: _Applied,
        iri: str,
        epoch: int,
        offset: int,
        elements: Sequence[tuple[int, Any]],
        key: str | None,
        owner: str,
        decide: bool = False,
    ) -> tuple[list[bool], Exception | None]:
        if epoch < st.epoch:
            raise NotOwner(f"stream <{iri}>: {owner} is no longer its owner")
        if epoch > st.epoch:  # a new owner (or this leader's first body of the stream)
            st.epoch, st.next = epoch, offset
        skip = max(0, min(len(elements), st.next - offset))  # applied before: the owner's retry
        flags = [True] * skip
        if skip == len(elements):
            return flags, None
        # Each element's idempotency key: the client's, else its (epoch, offset), which names
        # it for good -- an owner's retry after the leader died is not taken twice by the
        # next leader either (the keys are in the durable ingest log it replays).
        if key is None:
            keys = ["~%d.%d" % (epoch, offset + k) for k in range(skip, len(elements))]
        else:
            keys = ["%s#%d" % (key, k) for k in range(skip, len(elements))]
        # one call for the body: the engine lock taken once per run, the terms encoded at once
        if not decide:
            got, error = live.push_many(iri, elements[skip:], keys=keys, timeout=ROOM_S)
        else:  # --ingest direct: the worker's decision is kept for the owner, not waited for
            # in the book before its first command: a checkpoint barrier between two of its
            # commands saves what the worker applied of it (a body covered in part)
            decided = Decided(skip)
            decided.expect()  # held until the body is handed whole (see Decided.handed)
            pending = Pending(offset + skip, offset + len(elements), offset, decided)
            st.book.add(epoch, pending)
            try:
                got, error = live.push_many(iri, elements[skip:], keys=keys, timeout=ROOM_S, decided=decided)
            except BaseException:
                st.book.discard(pending)
                decided.handed()
                raise
        flags += got
        done = offset + len(flags) + (1 if isinstance(error, EventTimeError) else 0)
        if done > offset + skip:
            st.next = max(st.next, done)
        if decide:
            if done > offset + skip:
                pending.end = done
            else:
                st.book.discard(pending)
            decided.handed()
        return flags, error

    def rebuild(self, bodies: BodyStore) -> Callable[[LogRecord], tuple[Decided, int]]:
        """``--ingest direct``: the hook of a new leader's replay (``IngestLog.decide``) that
        rebuilds the decisions on the logged bodies as the worker applies them again (see
        :func:`rebuild_decision`): the old leader's book died with it, and an owner would
        count the decisions it had not received yet lost."""
        return partial(rebuild_decision, self._applied, self._lock, bodies)

    def bodies(self) -> BodyStore | None:
        """``--ingest meta``: where the leader reads the elements it holds by reference."""
        from linkstream.cluster.streamlog import BodyStore

        return BodyStore(self.service.state_dir) if self.meta and self.service.state_dir else None

    def saved_decisions(self) -> dict[str, list[Any]]:
        """What a cluster checkpoint keeps of the decisions (:func:`saved_decisions`)."""
        return saved_decisions(self._applied, self._lock)

    def restore_decisions(self, saved: dict[str, list[Any]]) -> None:
        """Puts a restored checkpoint's decisions back (:func:`restore_decisions`)."""
        restore_decisions(self._applied, self._lock, saved)

    def decisions(self, iri: str, epoch: int, after: int) -> tuple[int | None, list[list[Any]]]:
        """The leader's completed decisions on ``iri``'s bodies of ``epoch`` from offset
        ``after`` on (:meth:`DecisionBook.take <linkstream.cluster.decisions.DecisionBook.take>`)."""
        with self._lock:
            st = self._applied.get(iri)
        live = self.service._live
        log = None if live is None else live.ingest_log
        return (
            (None, [])
            if st is None
            else st.book.take(epoch, after, None if log is None else log.durable_seq())
        )

    def serve(self, doc: dict[str, Any], after: int | None = None) -> tuple[int, dict[str, Any]]:
        """``POST /_cluster/ingest`` on the leader: ``(status, JSON answer)``.  ``after``:
        the owner's :data:`DECIDED_HEADER` (``--ingest direct``)."""
        from linkstream.cluster.service import NotLeading

        if "poll" in doc:
            return self._serve_poll(doc["poll"])
        try:
            iri = str(doc["stream"])
            if "terms" in doc:
                elements = unpack_elements(doc)
                if "record" in doc:  # --ingest direct: durable in the owner's stream log
                    elements = with_refs(elements, int(doc["epoch"]), int(doc["record"]))
            elif "n" in doc:  # --ingest meta: event times, sizes and the body's record only
                if not self.meta:
                    return 400, {"error": "ingest body: a meta body, and this cluster is not --ingest meta"}
                elements = meta_elements(doc)
            else:  # the nested [[t, [[s, p, o], ...]], ...] of earlier coordinators
                elements = [(int(t), triples) for t, triples in doc["elements"]]
            epoch, offset = int(doc["epoch"]), int(doc["offset"])
            key = doc.get("key")
            owner = str(doc.get("owner") or "?")
        except (KeyError, TypeError, ValueError) as exc:
            return 400, {"error": f"ingest body: {exc}"}
        heard: list[Any] | None = [] if "record" in doc else None  # --ingest direct
        try:
            flags, error = self.apply(iri, epoch, offset, elements, key, owner=owner, heard=heard)
        except NotOwner as exc:
            return 409, {"error": str(exc)}
        except NotLeading as exc:
            return 503, {"error": str(exc)}
        except (TypeError, ValueError) as exc:  # a triple that is not three terms
            return 400, {"error": f"ingest body: {exc}"}
        out: dict[str, Any] = {"flags": flags, "error": None}
        if heard is not None:  # [floor, decisions, the run they were made in]
            out["decided"] = [*self.decisions(iri, epoch, offset if after is None else after), self.run_id()]
        if isinstance(error, EventTimeError):
            out["error"] = {"kind": "time", "message": str(error), "t": error.t, "reason": error.reason}
        elif error is not None:
            out["error"] = {"kind": "full", "message": str(error)}
        return 200, out

    def _serve_poll(self, polls: Any) -> tuple[int, dict[str, Any]]:
        """An owner's ``{"poll": [[stream, epoch, after], ...]}``: ``{"decided": {stream:
        [floor, decisions]}}`` (:meth:`decisions`); only the ready leader answers."""
        if not (self.service.leading() and self.service._ready.is_set()):
            return 503, {"error": "this coordinator does not lead; retry later"}
        try:
            asked = [(str(iri), int(epoch), int(after)) for iri, epoch, after in polls]
        except (TypeError, ValueError) as exc:
            return 400, {"error": f"decision poll: {exc}"}
        run = self.run_id()
        return 200, {
            "decided": {iri: [*self.decisions(iri, epoch, after), run] for iri, epoch, after in asked}
        }

    def _start_poller(self) -> None:
        """``--ingest direct``: the owner's thread asking for the decisions no answer brought."""
        with self._lock:
            if self._poller is None:
                self._poller = DecisionPoller(self._undecided, self._ask)

    def _undecided(self) -> list[tuple[str, int, int, int, OwnerDecisions]]:
        with self._lock:
            seqs = list(self._seqs.items())
        return [(iri, s.epoch, s.book.decided, s.next, s.book) for iri, s in seqs if s.book.decided < s.next]

    def run_id(self) -> str | None:
        """The leader's live run (``None``: none open): its decisions are stamped with it, and
        an owner sends the elements they name to that run only (a container of another run
        drops them -- a dead leader's run may hold elements its successor never had)."""
        remote = self.service._remote
        cluster = None if remote is None else remote.cluster
        return None if cluster is None else cluster.spec.id

    def _ask(self, polls: list[list[Any]]) -> dict[str, tuple[Any, ...]] | None:
        """The leader's answer to a decision poll (``None``: no leader answers now)."""
        service = self.service
        if service.leading() and service._ready.is_set():
            run = self.run_id()
            return {iri: (*self.decisions(iri, epoch, after), run) for iri, epoch, after in polls}
        # while ZooKeeper is away, the leader last known (asking would hold the thread)
        ident, url = service.leader() if service.client.connected else service._leader_cache[1:]
        if not url or ident == service.identifier:
            return None
        if self._poll_http is None:  # its own client: the poller's thread, short reads
            self._poll_http = self._peer_client(httpx.Timeout(5.0))
        body = msgpack.packb({"poll": polls}, use_bin_type=True)
        try:
            r = self._poll_http.post(self._ingest_url(url), content=body, headers={"content-type": MSGPACK})
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        return {str(iri): tuple(fd) for iri, fd in r.json()["decided"].items()}

    def status(self) -> dict[str, Any]:
        """Owned streams (epoch, next offset; ``--ingest direct``: what the owner knows of
        the leader's decisions) and, on the leader, applied offsets (and applied counts)."""
        direct = self.stream_log is not None
        live = self.service._live
        with self._lock:
            owned = {
                iri: {"epoch": s.epoch, "offset": s.next} | (s.book.status() if direct else {})
                for iri, s in self._seqs.items()
            }
            applied = {iri: {"epoch": a.epoch, "offset": a.next} for iri, a in self._applied.items()}
        if direct and live is not None:
            for iri, a in applied.items():
                a["count"] = live.applied_count(iri)
        mine = {iri for iri, who in self.owners.all().items() if who == self.service.identifier}
        remote = self.service._remote
        cluster = None if remote is None else remote.cluster
        if cluster is not None and self.service.leading():  # what the leader routed itself
            fan = cluster.fanout
            routed = {
                "routed": {
                    "elements": fan.live_elements,
                    "backlog": fan.elements_sent - fan.live_elements,
                    "read_back": fan.read_back,  # --ingest meta: elements read from the stream logs
                }
            }
        else:
            routed = {}
        return (
            routed
            | {
                "owned": {iri: v for iri, v in owned.items() if iri in mine},
                "applied": applied if self.service.leading() else {},
            }
            | ({"sender": self.sender.status()} if self.sender is not None else {})
        )

    def close(self) -> None:
        if self.sender is not None:
            self.sender.close()
        if self._poller is not None:
            self._poller.close()
        if self._poll_http is not None:
            self._poll_http.close()
        if self._http is not None:
            self._http.close()
        if self.stream_log is not None:
            self.stream_log.close()


__all__ = [
    "INGEST_PATH",
    "_Applied",
    "ZK_WAIT_S",
    "MSGPACK",
    "NotOwner",
    "Owner",
    "StreamIngest",
    "StreamOwners",
    "ZooKeeperAway",
    "pack_elements",
    "rebuild_decision",
    "restore_decisions",
    "saved_decisions",
    "split_elements",
    "stream_key",
    "unpack_elements",
    "with_refs",
    "zk_read",
]
