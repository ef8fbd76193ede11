"""The driver's ticks in a cluster replay: :class:`ClusterEngine`.

:class:`ClusterEngine` is the engine interface that :func:`linkstream.engine.replay.replay`
drives in cluster mode (:func:`linkstream.cluster.replay.replay_on_cluster` sets it up).
What it knows of the cluster between ticks -- ZooKeeper's membership and assignment, the
containers' messages, their admission, stateful moves -- is its base class's
(:class:`~linkstream.cluster.driverstate.DriverState`).  Here: it routes the stream
elements (:class:`~linkstream.cluster.fanout.Fanout`), names one answerer per query and
tick, collects the ticks' result lines, has what a dead container owed recomputed and
writes each report once.

Each tick names one answerer per query.  The answerer changes only on a tick boundary
and only to a container that announced the query *ready* from that tick on.  A container
announces a query ready only once it holds the query's streams: when the run routes by
stream (the default) it first subscribes to them and the driver, between two ticks,
sends it their retained backlog; when the run broadcasts, it holds every stream anyway.
Either way the query's windows on its new container are full, so the lines from the
switch on are those of the old one -- no loss, no duplicates.  Stateful hand-overs are
acknowledged in ZooKeeper once the switch is sent, which lets the coordinator complete a
graceful drain; they start only once the new owner subscribed to the query's streams,
so the state arrives after their backlog.  A container that dies (its ephemeral node
goes) or does not answer within ``answer_timeout`` does not cost the lines of the
ticks it owed: a live container recomputes them from the driver's retained history of
the queries' streams (:mod:`linkstream.cluster.recovery`) until the coordinator has
reassigned the queries and their new owners are ready; only a report no live container
can recompute is recorded as lost.  Results are deduplicated at the result edge by
(query, report time): a report time at or before the last one written for a query is
never written again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from itertools import compress, repeat
from operator import eq, is_not

import numpy as np
from kazoo.exceptions import KazooException

from linkstream.cluster.driverstate import ClusterError, DriverState, Lost, Switch
from linkstream.containers.messages import Hello, Tick
from linkstream.containers.protocol import encode

logger = logging.getLogger(__name__)


class ClusterEngine(DriverState):
    """The engine interface of :func:`~linkstream.engine.replay.replay`, backed by containers.

    Its constructor is :class:`~linkstream.cluster.driverstate.DriverState`'s.
    """

    # ------------------------------------------------------------------ engine interface

    def buffer(self, iri: str) -> None:
        """Checks that ``iri`` is one of the run's streams (the buffers live on the containers)."""
        if iri not in self._stream_index:
            raise ValueError(f"stream <{iri}> is not part of the run")

    def ingest(self, stream: str, t: int, triples: np.ndarray) -> None:
        """Buffers one element for the containers subscribed to ``stream``."""
        self.fanout.ingest(self._stream_index[stream], t, triples)

    def gc(self) -> None:
        """Handles what arrived meanwhile (the replay calls this every 256 elements)."""
        self.pump(0.0)
        self._check_failures()
        self.forward_orphans()

    def _idle_orphans(self, due: Sequence[str] = ()) -> dict[str, str]:
        """The queries a dead container answered that are not ``due`` and not ready on their
        ZooKeeper owner yet (their restore from the last checkpoint is sent at once)."""
        if not self.recovery.points and not self._orphans:
            return {}
        with self._lock:
            gone = self._departed - self._seen_dead
            self._seen_dead = (self._seen_dead & self._departed) | gone
        if gone and self.recovery.points:  # (once per death: not a pass over every query per tick)
            self._orphans.update((n, a) for n, a in self._answerer.items() if a in gone)
        for name, dead in list(self._orphans.items()):
            owner = self.owner_in_zookeeper(name)  # (may still name the dead one for a while)
            ready = owner != dead and owner in self._ready.get(name, ())
            if ready or name not in self.queries or name in self.recovery.refused:
                del self._orphans[name]
        skip = set(due)
        return {n: cid for n, cid in self._orphans.items() if n not in skip}

    def forward_orphans(self) -> None:
        """Between ticks: a dead container's queries sent to their new owners to be restored
        from the last checkpoint as soon as the driver and ZooKeeper know of the death, not
        at their next report (:meth:`Recovery.forward_idle`)."""
        if not self._orphans:
            if not self.recovery.points:
                return  # no checkpoint to restore from
            with self._lock:
                if self._departed <= self._seen_dead:
                    return  # (the usual case: nothing died)
        key = (self.owners.version, tuple(self._peers), len(self._departed))
        if not self._orphan_poll.due(key):
            return  # (none of them had a live new owner, and nothing changed since)
        self.pump(0.0)  # ready announcements: a query kept by its new owner is not sent again
        self.admit()  # subscriptions answered: the streams' backlog goes before the forward
        idle = self._idle_orphans()
        if idle and self.seq > 0:
            self.recovery.forward_idle(self.seq, idle, self.reads, self.owner_in_zookeeper)
        owners = {self.owner_in_zookeeper(n) for n in idle}
        if idle and not any(o in self._peers and not self._dead(o) for o in owners if o is not None):
            self._orphan_poll.wait(key)  # (no free slot anywhere yet: looked up less often)
        else:
            self._orphan_poll.reset()

    def choose_owners(self, seq: int) -> dict[str, str]:
        """The answerer of every query at tick ``seq`` (switching only to ready containers).

        Once every query is answered by its owner in ZooKeeper, ready there, nothing can
        change until the owners, the peers, the queries or their ready announcements do:
        the ticks until then skip the pass over every query.

        A query whose answerer left (died, or stalled and was dropped) is named, for this
        tick only, to its ZooKeeper owner if that is a live container which answers a query
        only from the first tick it announced (``from`` in its hello's ``caps``): its ready
        announcement may still be on its way -- the live driver sends a batch of the ticks
        that piled up meanwhile, which would all name the container that left and be
        recomputed, although the new owner evaluates them with the query registered (rebuilt
        from its buffers, or kept from the ``forward`` the driver sent before these ticks).
        One it does not answer yet it lists as missing, with the tick it answers from: those
        reports are recomputed (:meth:`_collect`)."""
        key = (self.owners.version, self._owning, tuple(self._peers))
        if self._chosen is not None and self._chosen == key:
            return dict(self._answerer)
        settled = True
        early: dict[str, tuple[str, str]] = {}
        caps = self.fanout.caps
        for name in sorted(self.queries):
            cur = self._answerer.get(name)
            ready = self._ready[name]

            def ok(cid: str | None, ready: dict[str, int] = ready) -> bool:
                return cid is not None and cid in self._peers and ready.get(cid, seq + 1) <= seq

            target = self.owner_in_zookeeper(name)
            new = cur
            if target != cur and ok(target):
                new = target
            elif cur is None or cur not in self._peers:
                new = next((c for c in sorted(ready) if ok(c)), cur)
            if new is not None and new != cur:
                self._answerer[name] = new
                self.switches.append(Switch(seq, name, cur, new))
                logger.info("driver: %s answered by %s from tick %d (was %s)", name, new, seq, cur)
            if settled and (new != target or not ok(target)):
                settled = False
            if (
                new is not None
                and new not in self._peers
                and target is not None
                and "from" in caps.get(target, ())
            ):
                if not self._dead(target):
                    early[name] = (target, new)
        self._chosen = key if settled else None
        owners = dict(self._answerer)
        if early:
            self._early[seq] = early
            owners.update((name, dst) for name, (dst, _) in early.items())
            for name, (dst, src) in sorted(early.items()):
                if self._early_last.get(name) != (dst, src):
                    logger.info(
                        "driver: %s named to %s at tick %d before it said ready (%s left)",
                        name,
                        dst,
                        seq,
                        src,
                    )
        self._early_last = early
        if self._early_told:
            self._early_told &= {(name, dst) for name, (dst, _) in early.items()}
        return owners

    def _ack_handovers(self, owners: dict[str, str]) -> None:
        if not self.owners.migrating():  # (no marker: nothing to acknowledge)
            return
        for name, owner in owners.items():
            tid = self._tid(name)
            container, src = self.owners.placed(tid)
            if src is None or container != owner or owner != self._answerer.get(name):
                continue  # (named before it said ready: not switched to yet)
            key = (tid, container, src)
            if key in self._acked:
                continue
            self._acked.add(key)
            try:
                self.table.complete_migration(tid)
            except KazooException as exc:
                logger.warning("driver: cannot acknowledge the hand-over of %s: %s", name, exc)

    def tick(self, c: int, reporting: Sequence[str]) -> dict[str, Sequence[str]]:
        """Sends report time ``c`` to every container; returns the lines of the ``reporting`` queries."""
        self.fanout.flush()
        self.pump(0.0)
        self._check_failures()
        for cid in [c_ for c_ in self._peers if self._dead(c_)]:
            self.fanout.drop(cid)
            self._forget(cid)
        self.admit()
        self.migrate()
        self.seq += 1
        seq = self.seq
        owners = self.choose_owners(seq)
        due = sorted(reporting)
        t0 = time.perf_counter()
        self.recovery.record(seq, c, self.fanout.counts())
        self.fanout.broadcast(encode(Tick(self.spec.id, seq, c, due, owners, dict(self._released))))
        self._ack_handovers(owners)
        self.fanout.prune(self.recovery.floor(c))  # a checkpoint's windows stay (restore-forward)
        out = self._collect(seq, c, due, owners)
        self._delivered(seq, c, due, out, time.perf_counter() - t0)
        return out

    def _delivered(self, seq: int, c: int, due: list[str], out: dict[str, Sequence[str]], dt: float) -> None:
        """Accounts the answers of tick ``seq`` at ``c``: a report already written is emptied
        (the result edge: each report once), the others are counted in their statistics.

        A report time after every one written (the usual case) is recorded once in the
        ledger, with the line counts of the queries that wrote lines: no step per due query
        (:mod:`linkstream.cluster.ledger`); else query by query."""
        ledger = self.ledger
        if ledger.fresh(c):
            # (the reports with lines: the empty ones, the shared empty tuple, skipped at C speed)
            rows = [(name, len(out[name])) for name in compress(out, map(is_not, out.values(), repeat(())))]
            ledger.record(c, due, rows, dt)
        else:
            ledger.settle()
            written, queries = ledger.written, self.queries
            for name in due:
                if c <= written.get(name, c - 1):
                    self.duplicates += len(out[name])
                    out[name] = ()
                    continue
                ledger.wrote(name, c)
                q = queries[name]
                st = q.stats
                st.reports += 1
                st.rows += len(out[name])
                st.eval_seconds += dt
                st.latencies.append(dt)
                q.last_report = c
        if self.on_tick is not None:
            self.on_tick(seq, c)

    def _waiting(
        self, due: list[str], owners: dict[str, str], owed: dict[str, tuple[str | None, str]]
    ) -> dict[str, list[str]]:
        """The ``due`` queries each live container answers (in ``due``'s order), the others
        added to ``owed``.  Grouped at C speed: no Python step per due query."""
        cids = list(map(owners.get, due))
        distinct = sorted(set(cids), key=cids.index) if cids else []  # (in order of appearance)
        peers = self._peers
        live = [cid for cid in distinct if cid is not None and cid in peers]
        if len(live) != len(distinct):
            waiting: dict[str, list[str]] = {}
            for name, cid in zip(due, cids, strict=True):
                if cid is None or cid not in self._peers:
                    owed[name] = (cid, "no live container holds the query")
                else:
                    waiting.setdefault(cid, []).append(name)
            return waiting
        if len(live) == 1:
            return {live[0]: due}  # (read, never changed)
        return {cid: list(compress(due, map(eq, repeat(cid), cids))) for cid in live}

    def _collect(self, seq: int, c: int, due: list[str], owners: dict[str, str]) -> dict[str, Sequence[str]]:
        # (no lines yet: one shared empty tuple, not a list per due query and tick)
        out: dict[str, Sequence[str]] = dict.fromkeys(due, ())
        owed: dict[str, tuple[str | None, str]] = {}  # recomputed elsewhere (or lost)
        early = self._early.pop(seq, {})  # (named before they said ready: see choose_owners)
        for old in [s for s in self._early if s < seq]:
            del self._early[old]
        until: dict[str, int] = {}  # per owed query named early, the tick its owner answers from
        waiting = self._waiting(due, owners, owed)
        deadline = time.monotonic() + self.answer_timeout
        while waiting:
            got = self._results.get(seq, {})
            for cid in [x for x in waiting if x in got]:
                result = got[cid]
                lines = result.lines
                names = waiting.pop(cid)
                if not early and len(lines) == len(names) and all(map(lines.__contains__, names)):
                    out.update(lines)  # (its answer names exactly these: at C speed)
                    continue
                for name in names:
                    if name in lines:
                        out[name] = lines[name]
                        if name in early and early[name][0] == cid and (name, cid) not in self._early_told:
                            self._early_told.add((name, cid))  # (logged once: what the benches read)
                            logger.info(
                                "driver: %s answered by %s at tick %d, before it said ready", name, cid, seq
                            )
                    elif early.get(name, ("",))[0] == cid:  # owed by the container that left
                        owed[name] = (
                            early[name][1],
                            f"{cid}, named before it said ready, did not answer it yet",
                        )
                        if name in result.first:
                            until[name] = result.first[name]
                    else:
                        owed[name] = (cid, "the container did not hold the query")
            for cid in [x for x in waiting if self._dead(x) or self._restarted(x, seq)]:
                for name in waiting.pop(cid):
                    owed[name] = (cid, "the container died or restarted")
            if waiting and time.monotonic() > deadline:
                for cid, names in waiting.items():
                    for name in names:
                        owed[name] = (cid, f"no answer within {self.answer_timeout:g}s")
                    # A container that stalls this long is out of the run: later ticks fail fast.
                    self.fanout.drop(cid)
                    self._forget(cid)
                break
            if waiting:
                self.pump(0.02)
        self._results.pop(seq, None)
        idle = self._idle_orphans(due)  # restored now, not at their next report (restore-forward)
        if owed or idle:
            redone = self.recovery.recompute(
                seq,
                {n: cid for n, (cid, _) in owed.items()},
                self.reads,
                self.owner_in_zookeeper,
                self._admit_restarted,
                idle,
                until,
            )
            for name, (owner, reason) in sorted(owed.items()):
                if name in redone:
                    out[name] = redone[name]
                else:
                    self._lose(name, c, owner, f"{reason}; no live container recomputed it")
        return out

    def _restarted(self, cid: str, seq: int) -> bool:
        """Whether ``cid`` restarted its run (its session expired) since tick ``seq`` was sent,
        so it will not answer it: it said hello again, or was admitted again at or after it."""
        if self._synced_at.get(cid, -1) >= seq:
            return True
        return any(isinstance(m, Hello) and m.container == cid for m in self._control)

    def _admit_restarted(self) -> None:
        """Admits the containers that said hello again, mid-tick (synced at this tick).

        After a ZooKeeper outage longer than the sessions every container restarts its run
        at once; the tick's owed reports are recomputed by the first of them to come back
        (:meth:`linkstream.cluster.recovery.Recovery.recompute` calls this while it waits).
        """
        if any(isinstance(m, Hello) for m in self._control):
            self.admit()

    def _lose(self, name: str, c: int, cid: str | None, reason: str) -> None:
        self.lost.append(Lost(name, c, cid, reason))
        logger.warning("driver: lines of %s at t=%d lost (%s: %s)", name, c, cid, reason)

    # ------------------------------------------------------------------ start and stop

    def wait_until_ready(self, timeout: float) -> None:
        """Waits until every query has a container ready to answer its first tick.

        Raises:
            ClusterError: Some query still has none after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            self.pump(0.05)
            self._check_failures()
            self.admit()
            missing = [n for n in sorted(self.queries) if not any(v <= 1 for v in self._ready[n].values())]
            if not missing:
                self.choose_owners(1)
                return
            if time.monotonic() > deadline:
                with self._lock:
                    members = sorted(self._members)
                raise ClusterError(
                    f"no container became ready for {', '.join(missing)} within {timeout:g}s "
                    f"(containers: {', '.join(members) or 'none'}; is a coordinator running?)"
                )
