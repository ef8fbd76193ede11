"""Reports a dead container owed, recomputed elsewhere (the driver's half).

A container that dies (``kill -9``, a crash) takes with it the operator state of its
queries and the answers of the tick it was evaluating.  The coordinator reassigns its
queries (its ephemeral node went) and their new owners rebuild them from the retained
backlog of their streams, answering from the tick after they announced them *ready*
(:mod:`linkstream.cluster.driver`).  The reports in between -- the tick in flight when
the container died and the few ticks until the new owners are ready -- are
**recomputed**: the driver sends a live container a ``recompute`` message with

* the queries (by name: every container can read their text in the registry);
* the retained history of the streams they read, as the driver routed it: each stream's
  backlog (:class:`~linkstream.cluster.fanout.Fanout`) keeps every element a window
  opened at the next report can still read -- the largest RANGE plus STEP of the run's
  windows on that stream, everything for count and NOW windows;
* the report times to evaluate: the previous tick of the run (silently: an IStream or
  DStream report is the difference to it) and the tick whose lines are owed, each after
  exactly the elements the run had sent before it (the per-stream counts recorded at
  every tick, :meth:`Recovery.record`).

The container evaluates them in a scratch engine (:mod:`linkstream.containers.recovery`)
and answers with the lines of the owed report, which the driver writes in its place: the
output equals that of a run nothing happened to.  The driver sequences every element and
every report time, so nothing but this history is needed -- no checkpoint.  The limit:
a query whose result depends on more than its windows' contents at the previous and the
current report (none here: every continuous query is windowed) could not be recomputed
this way.  A report is recorded lost only when no live container can recompute it within
the answer timeout.

**Restored and fed forward.**  Once a cluster checkpoint with task snapshots is complete
(:meth:`Recovery.checkpointed`), the driver keeps every tick's cut since the checkpoint's
and the fan-out keeps the backlog a window at its report time reads (:meth:`Recovery.floor`).
A query of a *dead* container whose new ZooKeeper owner is live is then sent there as a
``forward`` message (:class:`~linkstream.containers.messages.Forward`): the recompute
request from the checkpoint's cut on, with the store and keys of its snapshot.  The new
owner restores it, feeds it forward to the owed report (its answer is the same
``recomputed``) and keeps the state (:mod:`linkstream.containers.forwarding`).  Anything
missing -- no complete checkpoint, no snapshot of the query, the cut not kept, the owed tick
the checkpoint's own, no live new owner -- leaves the plain recompute, one log line per
query saying why.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from linkstream.cluster.fanout import Fanout, table
from linkstream.containers.messages import Elements, Forward, Recompute, Recomputed
from linkstream.containers.protocol import encode
from linkstream.containers.transport import Sender
from linkstream.rdf.dictionary import Dictionary

logger = logging.getLogger(__name__)

#: ticks whose per-stream cuts are kept (the owed tick and the one before are needed)
KEEP_CUTS = 4
#: at most this many ticks' cuts are kept for a checkpoint to restore from (checkpoints that
#: keep failing must not grow the cuts and the fan-out's backlog without bound)
MAX_HELD_CUTS = 4096
#: ``forward`` messages per query and checkpoint while its new owner has not announced it
#: ready, one per batch of ticks at most (one that came before the container saw its
#: assignment, or before its streams were live there, is not kept there)
MAX_FORWARDS = 3
#: reasons not to restore a query that may pass by a later tick; on any other the ``recompute``
#: request tells the new owner to rebuild it (``Recompute.rebuild``) rather than wait
TRANSIENT = ("its new owner", "the owed tick is the checkpoint's")
#: seconds after which a query forwarded between ticks and not ready yet is forwarded again
#: before the next tick (the forward may have come before its new owner saw its assignment)
REFORWARD_S = 1.0
#: why a query forwarded to an older container is not forwarded there again
OLDER = "an older container, whose answer does not say whether it kept it (it rebuilds it if not)"


#: between ticks, the dead container's queries no live container is assigned yet (no free
#: slot anywhere) are looked up again after a delay doubling from the first to the second
#: of these seconds while the owners and peers stand (at once when they change)
ORPHAN_POLL_S = (0.1, 1.0)


class Backoff:
    """Says when a poll may be skipped: while its ``key`` (what it depends on) stands, for a
    delay that doubles each time the poll found nothing to do (:meth:`wait`)."""

    def __init__(self, first: float = ORPHAN_POLL_S[0], most: float = ORPHAN_POLL_S[1]) -> None:
        self.first, self.most = first, most
        self._key: object = None
        self._next = 0.0
        self._delay = 0.0

    def due(self, key: object) -> bool:
        """Whether to poll now."""
        return key != self._key or time.monotonic() >= self._next

    def wait(self, key: object) -> None:
        """The poll found nothing to do: the next one waits longer while ``key`` stands."""
        self._delay = min(self._delay * 2, self.most) if key == self._key else self.first
        self._key, self._next = key, time.monotonic() + self._delay

    def reset(self) -> None:
        """The poll did something: the next one is not held back."""
        self._key = None


@dataclass(frozen=True)
class RestorePoint:
    """The last complete cluster checkpoint, as a dead container's new owners restore it.

    Attributes:
        seq: The tick its task snapshots follow.
        c: That tick's report time.
        uri: The checkpoint store.
        objects: Per query, its snapshot's manifest entry (``key``, ``size``, ``sha256``).
        missing: Queries without a snapshot in it.
    """

    seq: int
    c: int
    uri: str
    objects: dict[str, dict[str, object]]
    #: queries of the run it holds no snapshot of (a later checkpoint than a container's
    #: death lacks that container's queries: the earlier one stays for them)
    missing: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Recovered:
    """Lines of ``query`` at report time ``t`` recomputed because ``src`` did not answer.

    Attributes:
        query: The query.
        t: The report time.
        src: The container that owed the report (``None``: none held the query).
        dst: The container that recomputed it.
        elements: Stream elements of the history it was sent.
        seconds: From the request to the answer.
    """

    query: str
    t: int
    src: str | None
    dst: str
    elements: int
    seconds: float


@dataclass
class _Sent:
    """A query's last ``forward``: request ``id`` to ``dst`` (that incarnation: its fan-out
    socket ``sender``) for the death of ``src``, sent at ``t`` (monotonic); ``state`` is
    ``sent`` (no answer yet), ``kept`` / ``not kept`` (the answer says), or ``answered`` (by
    an older container, which does not say)."""

    id: int
    src: str | None
    dst: str
    sender: object
    t: float
    state: str = "sent"


class Recovery:
    """Recomputes owed reports on live containers (see the module docstring).

    Args:
        run: The run id.
        fanout: The driver's sockets and the streams' retained backlog.
        dictionary: The driver's dictionary (terms of the history shipped).
        pump: Receives and dispatches queued messages, waiting up to the given seconds
            (``Recomputed`` messages must be handed to :meth:`on_answer`).
        timeout: Seconds to wait for an answer before asking another container.
        is_dead: Tells whether a container is known to be gone.
    """

    def __init__(
        self,
        run: str,
        fanout: Fanout,
        dictionary: Dictionary,
        pump: Callable[[float], None],
        timeout: float,
        is_dead: Callable[[str], bool],
    ) -> None:
        self.run = run
        self.fanout = fanout
        self.dictionary = dictionary
        self.pump = pump
        self.timeout = timeout
        self.is_dead = is_dead
        self.done: list[Recovered] = []
        self._cuts: deque[tuple[int, int, np.ndarray]] = deque()
        self._answers: dict[int, Recomputed] = {}
        self._next = 0
        #: the last complete checkpoint with task snapshots, after the newest earlier one
        #: holding a query it lacks (a dead container's); none: plain recompute only
        self.points: list[RestorePoint] = []
        self._held: int | None = None  # the tick of a checkpoint being written
        #: per query, the tick of the checkpoint it was last restored from, how often, and
        #: the first tick of the batch it was last sent in
        self.forwarded: dict[str, tuple[int, int, int]] = {}
        self._forward_t: dict[str, float] = {}  # per query, when it was last forwarded
        #: whether a container announced a query ready (the driver's ``_ready``)
        self.is_ready: Callable[[str, str], bool] = lambda _name, _cid: False
        #: whether the driver sends a container every stream a query reads (its subscription
        #: answered: a forward before the streams' backlog would not be kept there)
        self.is_live: Callable[[str, str], bool] = lambda _name, _cid: True
        #: per query, why its last recovery was not restored (logged once per reason)
        self.not_restored: dict[str, str] = {}
        #: queries whose new owner is to rebuild them: not restored (or not kept) from a checkpoint
        self.refused: set[str] = set()
        #: lines of later report times a ``forward`` answered, by (query, report time)
        self._early: dict[tuple[str, int], tuple[str, Sequence[str]]] = {}
        self._ahead: list[tuple[int, int]] = []  # (seq, c) of ticks sent with the same cut
        #: ``forward`` requests whose answer nobody waits for (queries not due when sent)
        self._idle: set[int] = set()
        #: per query, its last ``forward`` (sent at most once per death and new owner while
        #: it is unanswered or kept there: a second one would restore it there again)
        self._sent: dict[str, _Sent] = {}
        #: unanswered ``forward`` requests: id -> their queries
        self._forwards: dict[int, list[str]] = {}
        #: incarnations (fan-out sockets) of older containers, which answer a ``recompute`` of
        #: several ticks with the last one only (no ``owe`` in their answer's ``caps``): asked
        #: one tick per request
        self._per_tick: set[Sender] = set()

    def forget(self, name: str) -> None:
        """Query ``name`` left the run: what was kept about its recoveries goes."""
        for kept in (self.forwarded, self._forward_t, self.not_restored, self._sent):
            kept.pop(name, None)
        self.refused.discard(name)

    def ahead(self, ticks: list[tuple[int, int]]) -> None:
        """Ticks ``(seq, c)`` sent together, after the same elements (the live driver's
        ``tick_many``): a container may have evaluated the later ones before it reads a
        ``forward`` message of an earlier one, which then feeds forward to the last."""
        self._ahead = list(ticks)

    def record(self, seq: int, c: int, counts: np.ndarray) -> None:
        """Tick ``seq`` (report time ``c``) comes after ``counts`` elements of each stream."""
        self._cuts.append((seq, c, counts))
        keep = seq - KEEP_CUTS + 1
        points = self.points  # (replaced, never changed in place: the checkpointer's thread sets it)
        for old in [p for p in points if seq - p.seq > MAX_HELD_CUTS]:
            logger.warning(
                "driver: the checkpoint at t=%d is %d ticks old; a dead container's tasks are "
                "recomputed and rebuilt, not restored from it",
                old.c,
                seq - old.seq,
            )
            self.points = [p for p in points if seq - p.seq <= MAX_HELD_CUTS]
        if self._held is not None and seq - self._held > MAX_HELD_CUTS:
            self._held = None
        for held in self._holds():
            keep = min(keep, held)
        while self._cuts and self._cuts[0][0] < keep:
            self._cuts.popleft()

    def hold(self, seq: int) -> None:
        """A checkpoint's task snapshots follow tick ``seq``: its cut is kept until the next."""
        self._held = seq

    @property
    def point(self) -> RestorePoint | None:
        """The last complete checkpoint with task snapshots."""
        return self.points[-1] if self.points else None

    def checkpointed(self, point: RestorePoint) -> None:
        """The checkpoint whose tick was held is complete (from the checkpointer's thread)."""
        carried = [p for p in self.points if set(p.objects) & point.missing][-1:]
        self.points = [*carried, point]
        if self._held is not None and self._held <= point.seq:
            self._held = None

    def _holds(self) -> list[int]:
        return [p.seq for p in self.points] + ([self._held] if self._held is not None else [])

    def floor(self, c: int) -> int:
        """The report time the fan-out prunes its backlog at, at report time ``c``: the
        held or restorable checkpoints' (their windows' elements stay), else ``c``."""
        for seq in self._holds():
            got = next((x[1] for x in self._cuts if x[0] == seq), None)
            if got is not None:
                c = min(c, got)
        return c

    def on_answer(self, message: Recomputed) -> None:
        """Takes a container's answer to a ``recompute`` request."""
        for name in self._forwards.pop(message.id, ()):
            sent = self._sent.get(name)
            if sent is None or sent.id != message.id:
                continue  # forwarded again since (an answer of an earlier incarnation)
            if message.kept is None and not message.error:
                sent.state = "answered"  # (an older container: not forwarded there again)
            else:
                sent.state = "kept" if name in (message.kept or ()) else "not kept"
        if message.id in self._idle:  # only its later report times' lines are of use
            self._idle.discard(message.id)
            if message.error:
                logger.warning(
                    "driver: %s cannot restore and feed forward: %s", message.container, message.error
                )
            self._take_later(message)
            return
        self._answers[message.id] = message

    def _take_later(self, answer: Recomputed, names: list[str] | None = None) -> None:
        """A forward's lines of the report times after the owed one (fed forward there: not
        recomputed again)."""
        for later, got in answer.later.items():
            self._early.update({(n, later): (answer.container, got[n]) for n in names or got if n in got})

    def _live(self) -> list[str]:
        return [cid for cid in sorted(self.fanout.peers) if not self.is_dead(cid)]

    def recompute(
        self,
        seq: int,
        owed: Mapping[str, str | None],
        reads: Mapping[str, frozenset[int]],
        prefer: Callable[[str], str | None],
        admit: Callable[[], None] | None = None,
        idle: Mapping[str, str] | None = None,
        until: Mapping[str, int] | None = None,
    ) -> dict[str, Sequence[str]]:
        """The lines of tick ``seq`` of the ``owed`` queries (query -> container that owed them).

        Each query is asked of one live container at a time (its new owner first), and of
        each *incarnation* of a container at most once: a container whose ZooKeeper session
        expired restarts its run on a new socket and says hello again under the same id, so
        a request sent to its old socket is never answered.  Such a request is dropped as
        soon as the driver admits the new incarnation (``admit``), which is then asked
        afresh, and the wait starts over.  While no container is live at all (every one is
        restarting) the call waits for one to come back.

        Args:
            seq: The current tick (recorded with :meth:`record`).
            owed: The queries whose lines are missing, with the container that did not answer.
            reads: Stream indexes each query reads.
            prefer: The container to ask first for a query (its new owner), if alive.
            admit: Admits the containers that said hello again meanwhile (the driver's
                mid-tick admission: each gets a new socket in the fan-out).
            idle: Queries of a dead container that owe nothing at this tick (query -> that
                container): those its new owner can restore from the last checkpoint go to
                it now, with the forward of the owed ones if any (one restore), else in a
                ``forward`` of their own whose answer is not awaited (see :meth:`forward_idle`).
            until: Per owed query, the tick from which the container named answers it itself
                (named before it announced the query ready: ``ClusterEngine.choose_owners``): the
                ticks of the batch from it on are not evaluated with it.

        Returns:
            Lines by query, for the queries some live container recomputed within the
            timeout (counted from the last restart of a container asked); the caller
            records the others lost.
        """
        cuts = [x for x in self._cuts if x[0] in (seq - 1, seq)]
        if not cuts or cuts[-1][0] != seq:
            logger.warning("driver: tick %d was not recorded; cannot recompute its reports", seq)
            return {}
        c = cuts[-1][1]
        out: dict[str, Sequence[str]] = {}
        for key in [k for k in self._early if k[1] <= c]:  # a forward's answers of later ticks
            dst, lines = self._early.pop(key)
            if key[1] == c and key[0] in owed:
                out[key[0]] = lines
                self.done.append(Recovered(key[0], c, owed[key[0]], dst, 0, 0.0))
        # Incarnations (fan-out sockets) asked for each query that failed it or still owe it.
        tried: dict[str, set[Sender]] = {name: set() for name in owed}
        sent: dict[int, tuple[str, Sender, list[str], int, float]] = {}  # answers taken even late
        pending: set[int] = set()  # requests still awaited
        batched: set[int] = set()  # plain requests of several ticks (answered in one pass)
        deadline = time.monotonic() + self.timeout
        extra = dict(idle or {})  # sent once, with the first forward to their new owner
        while len(out) < len(owed) and time.monotonic() < deadline:
            if admit is not None:
                admit()
            peers = self.fanout.peers
            live = self._live()
            asked = {name for rid in pending for name in sent[rid][2]}
            groups: dict[str, list[str]] = {}
            for name in sorted(owed):
                fresh = [x for x in live if peers[x] not in tried[name]]
                if name in out or name in asked or not fresh:
                    continue  # done, being answered, or every live container failed it
                first = prefer(name)
                dst = first if first in fresh else fresh[0]
                groups.setdefault(dst, []).append(name)
            for dst, names in groups.items():
                sender = peers[dst]
                for name in names:
                    tried[name].add(sender)
                mine = {n: extra.pop(n) for n in [n for n in extra if prefer(n) == dst]}
                restore = self._restorable(seq, [*names, *mine], {**owed, **mine}, dst, prefer)
                taken = {n for _, part in restore for n in part}
                plain: dict[int | None, list[str]] = {}  # by the tick they are answered from
                for name in names:
                    if name not in taken:
                        plain.setdefault((until or {}).get(name), []).append(name)
                parts: list[tuple[RestorePoint | None, list[str], int | None]] = [
                    *((p, part, None) for p, part in restore),
                    *((None, x, u) for u, x in plain.items()),
                ]
                for point, part, upto in parts:
                    streams = frozenset().union(*(reads.get(n, frozenset()) for n in part))
                    message, n_el = self._request(part, streams, cuts, point, sender in self._per_tick, upto)
                    if point is None and message.owe:
                        batched.add(message.id)
                    self._send(dst, message, {**owed, **mine})
                    sent[message.id] = (dst, sender, part, n_el, time.perf_counter())
                    pending.add(message.id)
            if not pending and live:
                break  # every live container answered the rest with an error
            for rid in [r for r in sent if r in self._answers]:
                dst, asked_at, names, n_el, t0 = sent.pop(rid)
                pending.discard(rid)
                answer = self._answers.pop(rid)
                if rid in batched and not answer.error and "owe" not in answer.caps:
                    # An older container: it answered the last tick of the batch only.  Asked
                    # again, one tick per request from now on (as an older driver asked).
                    self._per_tick = {x for x in self._per_tick if x in self.fanout.peers.values()} | {
                        asked_at
                    }
                    logger.warning(
                        "driver: %s answered a recompute of several ticks with t=%d only (an older "
                        "container): asking it one tick at a time",
                        dst,
                        answer.c,
                    )
                    for name in names:
                        tried[name].discard(asked_at)
                    continue
                if not answer.error and answer.c != c:
                    answer = replace(answer, error=f"answered t={answer.c}, not t={c}")
                if answer.error:
                    logger.warning("driver: %s cannot recompute %s: %s", dst, names, answer.error)
                    continue
                dt = time.perf_counter() - t0
                self._take_later(answer, names)
                for name in names:
                    if name in owed and name in answer.lines and name not in out:
                        out[name] = answer.lines[name]
                        self.done.append(Recovered(name, c, owed[name], dst, n_el, dt))
            for rid in sorted(pending):
                dst, sender, names, _, _ = sent[rid]
                if self.is_dead(dst) or self.fanout.peers.get(dst) is not sender:
                    # Not awaited any more (an answer that comes anyway is still taken); the
                    # container may be asked again if it turns out alive or comes back.
                    pending.discard(rid)
                    for name in names:
                        tried.get(name, set()).discard(sender)
                    if dst in self.fanout.peers and not self.is_dead(dst):
                        # It restarted its run (new hello, new socket): ask it again, with time to answer.
                        logger.warning("driver: %s restarted before recomputing %s; asking again", dst, names)
                        deadline = max(deadline, time.monotonic() + self.timeout)
                    else:
                        logger.warning("driver: %s left before recomputing %s", dst, names)
            if len(out) < len(owed):
                self.pump(0.02 if pending else 0.05)
        for rid in [r for r, x in sent.items() if set(x[2]) - set(owed)]:  # later lines of idle ones
            if rid in self._answers:
                self._take_later(self._answers.pop(rid))
            else:
                self._idle.add(rid)
        if extra:
            self.forward_idle(seq, extra, reads, prefer, cuts)
        if len(out) < len(owed):
            logger.warning("driver: no live container recomputed %s at t=%d", sorted(set(owed) - set(out)), c)
        elif owed:
            logger.info("driver: recomputed %s at t=%d (tick %d)", ", ".join(sorted(out)), c, seq)
        return out

    def forward_idle(
        self,
        seq: int,
        idle: Mapping[str, str],
        reads: Mapping[str, frozenset[int]],
        prefer: Callable[[str], str | None],
        cuts: list[tuple[int, int, np.ndarray]] | None = None,
    ) -> None:
        """Sends the queries ``idle`` of a dead container (query -> that container), due at
        no report of tick ``seq``, to their live new owners to be restored from the last
        checkpoint and fed forward to tick ``seq`` (and the ticks sent with it) -- as soon as
        the death is known, not at their next report (a query of a long STEP would wait for
        it, and its new owner might rebuild it meanwhile).  The answers are not awaited;
        lines they give for later report times are taken (:meth:`on_answer`)."""
        if cuts is None:
            cuts = [x for x in self._cuts if x[0] in (seq - 1, seq)]
            if not cuts or cuts[-1][0] != seq:
                return
        live = set(self._live())
        groups: dict[str, list[str]] = {}
        for name in sorted(idle):
            dst = prefer(name)
            if dst is not None and dst in live:
                groups.setdefault(dst, []).append(name)
        for dst, names in groups.items():
            for point, part in self._restorable(seq, names, idle, dst, prefer, REFORWARD_S):
                streams = frozenset().union(*(reads.get(n, frozenset()) for n in part))
                message, _ = self._request(part, streams, cuts, point)
                self._send(dst, message, idle)
                self._idle.add(message.id)

    def _send(self, dst: str, message: Recompute, src: Mapping[str, str | None]) -> None:
        """Sends ``message`` to ``dst``; a ``forward`` is remembered per query (``src``: the
        container each query's report was owed by, dead)."""
        if not isinstance(message, Forward):
            self.fanout.send(dst, encode(message))
            return
        sender = self.fanout.peers.get(dst)
        now = time.monotonic()
        latest = {x.id for x in self._sent.values()}
        for rid in [r for r in self._forwards if r not in latest]:
            del self._forwards[rid]  # (each of its queries forwarded again since: its answer tells nothing)
        self._forwards[message.id] = list(message.queries)
        for name in message.queries:
            self._sent[name] = _Sent(message.id, src.get(name), dst, sender, now)
        self.fanout.send(dst, encode(message))

    def _restorable(
        self,
        seq: int,
        names: list[str],
        owed: Mapping[str, str | None],
        dst: str,
        prefer: Callable[[str], str | None],
        again: float = 0.0,
    ) -> list[tuple[RestorePoint, list[str]]]:
        """The queries of ``names`` that ``dst`` restores from the last checkpoint holding
        them and feeds forward, by checkpoint (see the module docstring); the log says why
        each other one is not.  ``again``: seconds after which one forwarded in this batch
        already is forwarded again (0: once per batch)."""
        out: dict[int, list[str]] = {}
        now = time.monotonic()
        for name in names:
            src = owed[name]
            self.refused.discard(name)
            point = next((p for p in reversed(self.points) if name in p.objects), self.point)
            if point is None:
                why = "no complete checkpoint with task snapshots"
            elif (held := self._held_back(name, point, src, dst, seq, again, now)) is not None:
                if held:
                    self.refused.add(name)  # not kept by then: its owner rebuilds it
                continue  # restored on its new owner already: the reports until it is ready are recomputed
            elif src is not None and not self.is_dead(src):
                why = f"{src} did not die (stalled or restarted)"
            elif name not in point.objects:
                why = f"checkpoint at t={point.c} holds no snapshot of it"
            elif seq <= point.seq:
                why = f"the owed tick is the checkpoint's (t={point.c})"
            elif not any(x[0] == point.seq for x in self._cuts):
                why = f"the cut of the checkpoint at t={point.c} is not kept"
            elif prefer(name) != dst:
                why = f"its new owner ({prefer(name)}) is not the container asked ({dst})"
            elif not self.is_live(name, dst):
                why = f"its new owner ({dst}) does not receive its streams yet"
            else:
                out.setdefault(point.seq, []).append(name)
                continue
            if not why.startswith(TRANSIENT):  # the new owner is told to rebuild it
                self.refused.add(name)
            if self.not_restored.get(name) != why:
                self.not_restored[name] = why
                logger.info("driver: %s recomputed from the history, not restored: %s", name, why)
        groups = [(p, out[p.seq]) for p in self.points if p.seq in out]
        for point, part in groups:
            for name in part:
                done = self.forwarded.get(name, (-1, 0, 0))
                n = done[1] + 1 if done[0] == point.seq else 1
                self.forwarded[name] = (point.seq, n, self._batch(seq))
                self._forward_t[name] = now
                self.not_restored.pop(name, None)
            logger.info(
                "driver: %s restored on %s from the checkpoint at t=%d (tick %d) and fed forward to tick %d",
                ", ".join(part),
                dst,
                point.c,
                point.seq,
                seq,
            )
        return groups

    def _held_back(
        self, name: str, point: RestorePoint, src: str | None, dst: str, seq: int, again: float, now: float
    ) -> bool | None:
        """Whether ``name`` is not forwarded to ``dst`` now (``False``), nor any more (``True``:
        forwarded ``MAX_FORWARDS`` times, not kept), or is (``None``).  A forward for the same
        death to the same incarnation of the same new owner is not sent again while it is
        unanswered (within the answer timeout) or kept there: the next batch's forward of a
        query forwarded between ticks restored it there twice.  One answered by an older container
        (which does not say whether it kept it) is not forwarded there again either: its new
        owner is told to rebuild it (``True``), which it does only if it did not keep it.  One
        not kept there goes again once per batch of ticks, and between ticks after ``again``
        seconds."""
        last = self._sent.get(name)
        if (
            last is not None
            and (last.src, last.dst) == (src, dst)
            and last.sender is self.fanout.peers.get(dst)
        ):
            if last.state == "kept" or (last.state == "sent" and now - last.t < self.timeout):
                return False
            if last.state == "answered":
                # An older container's answer does not say whether it kept the query: another
                # forward could restore it there a second time.  It is told to rebuild it instead
                # (``Recompute.rebuild``), which a container that kept it ignores.
                if self.not_restored.get(name) != OLDER:
                    self.not_restored[name] = OLDER
                    logger.info("driver: %s not forwarded to %s again: %s", name, dst, OLDER)
                return True
        done = self.forwarded.get(name, (-1, 0, 0))
        if done[0] != point.seq:
            return None
        if self.is_ready(name, dst):
            return False
        if done[1] >= MAX_FORWARDS:
            return done[2] != self._batch(seq)
        if done[2] == self._batch(seq) and not 0 < again <= now - self._forward_t.get(name, now):
            return False
        return None

    def _batch(self, seq: int) -> int:
        """The first tick of the batch ``seq`` was sent in (nothing is admitted within one)."""
        if not self._ahead or not self._ahead[0][0] <= seq <= self._ahead[-1][0]:
            return seq
        return self._ahead[0][0]

    def _request(
        self,
        names: list[str],
        streams: frozenset[int],
        cuts: list[tuple[int, int, np.ndarray]],
        point: RestorePoint | None = None,
        one: bool = False,
        until: int | None = None,
    ) -> tuple[Recompute, int]:
        """A recompute request over ``cuts`` or, with ``point``, a forward request from its
        cut on to the last of ``cuts``; either also evaluates the ticks sent after it with
        the same elements (:meth:`ahead`), whose lines answer them (``later``, one pass) --
        but a plain one for ``one`` tick only (an older container's), or those before tick
        ``until`` only (answered live from then on)."""
        last = cuts[-1]
        if point is not None:
            cuts = [x for x in self._cuts if point.seq <= x[0] <= last[0]]
        later = [] if one and point is None else [(s, c, last[2]) for s, c in self._ahead if s > last[0]]
        if until is not None and point is None:
            later = [x for x in later if x[0] < until]
        owe = last[1] if point is not None or later else 0
        cuts = [*cuts, *later]
        rows, at = self.fanout.history(streams, [x[2] for x in cuts])
        meta, triples = table(rows)
        ids = np.unique(triples) if len(triples) else np.empty(0, dtype=np.int64)
        terms = self.dictionary.decode_many(ids) if len(ids) else []
        self._next += 1
        els = Elements(self.run, ids, list(terms), meta, triples)
        ticks = [x[1] for x in cuts]
        if point is not None:
            objects = {n: dict(point.objects[n]) for n in names}
            forward = Forward(
                self.run, self._next, names, ticks, at, els, uri=point.uri, objects=objects, owe=owe
            )
            return forward, len(rows)
        rebuild = sorted(self.refused.intersection(names))
        return Recompute(self.run, self._next, names, ticks, at, els, rebuild, owe), len(rows)
