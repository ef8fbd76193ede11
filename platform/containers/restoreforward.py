"""A dead container's tasks restored from the last complete checkpoint and fed forward.

A container that dies takes its queries' operator state with it.  Before, their new
owners rebuilt them from the stream buffers (and the reports owed meanwhile were
recomputed from the retained history, :mod:`linkstream.containers.recovery`).  When the
last complete cluster checkpoint holds their task snapshots -- a query's own state
(``snapshot_query``) or the router unit of the shared joins it reads -- the new owner
restores them instead:

1. a *scratch* replica of the run (its own engine and dictionary, the run's static
   graphs) registers the queries and ingests the history before the checkpoint's report
   time ``c`` (every element a window at ``c`` reads);
2. the snapshots are restored there at ``c`` as a new leader's run restores them
   (:meth:`RunReplica.register_restored`, :meth:`RunReplica.restore_routers`), followed
   by the silent tick at ``c``;
3. the scratch replica is fed forward: per later report time, the elements before it,
   then the tick (silent but for the last: its lines are the owed report, exactly what
   the recomputation answers);
4. each query's state at the last report time is handed over to the live replica as in a
   live migration (:meth:`RunReplica.snapshot_moving` on the scratch side,
   :meth:`RunReplica.register_restored` / :meth:`RunReplica.register_routed` on the live
   one, which evaluated the same report time); the scratch replica is dropped.

A snapshot that is missing, malformed or does not fit the plan is not an error: its query
is rebuilt in the scratch replica from the same history (what the recomputation does), and
the log says so in one line.  The history is the recomputation's (the driver's retained
backlog), which must reach back to the checkpoint's windows: the caller checks that.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from linkstream.containers.messages import Elements
from linkstream.containers.protocol import ProtocolError
from linkstream.containers.recovery import History
from linkstream.containers.replica import RunReplica, unit_plans
from linkstream.engine.sharing import sharing_of
from linkstream.operators.shared_state import UNIT
from linkstream.operators.state import QueryState

logger = logging.getLogger(__name__)


@dataclass
class Forwarded:
    """The queries of a dead container, restored and fed forward in a scratch replica.

    Attributes:
        c: The last report time evaluated (the live replica's).
        lines: Lines of each query due at the owed report time (the owed report).
        later: Per report time after the owed one, the lines of each query due then.
        states: Each query's state at ``c``, to hand over (:func:`adopt`); a query whose
            state cannot be taken is missing (its new owner rebuilds it).
        restored: Queries restored from their checkpoint snapshots.
        rebuilt: Queries rebuilt from the history instead, with the reason.
        cpu_s: Process CPU seconds of the whole.
    """

    c: int
    lines: dict[str, list[str]] = field(default_factory=dict)
    later: dict[int, dict[str, list[str]]] = field(default_factory=dict)
    states: dict[str, QueryState] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)
    rebuilt: dict[str, str] = field(default_factory=dict)
    cpu_s: float = 0.0


def forward(
    replica: RunReplica,
    texts: Mapping[str, str],
    snapshots: Mapping[str, QueryState | None],
    c0: int,
    elements: Elements,
    ticks: Sequence[int],
    at: Sequence[int],
    owe: int | None = None,
) -> Forwarded:
    """Restores ``texts``' queries from ``snapshots`` (checkpointed at ``c0``) in a scratch
    replica of ``replica``'s run and evaluates ``ticks`` (report times after ``c0``) there.

    Args:
        replica: The live replica (its run; its dictionary is not used).
        texts: Each query's text.
        snapshots: Each query's checkpointed state (its own, or its router unit, header
            ``queries``); ``None`` or absent: rebuilt from the history.
        c0: The checkpoint's report time.
        elements: The history, in the driver's ids with their terms: every element a
            window at ``c0`` reads and every later one up to the last report time.
        ticks: The report times after ``c0`` to evaluate, in order (the last one is the
            live replica's ``last_c``).
        at: Per report time of ``[c0, *ticks]``, how many of ``elements`` come before it.
        owe: The report time of ``ticks`` whose lines are the owed report (default: the
            last; the live driver sends several ticks at once, so the live replica may have
            evaluated later ones with the same elements already).
    """
    if len(at) != len(ticks) + 1 or not ticks or list(ticks) != sorted(set(ticks)) or ticks[0] <= c0:
        raise ProtocolError("report times and cuts do not match")
    owe = ticks[-1] if owe is None else owe
    if owe not in ticks:
        raise ProtocolError(f"the owed report time {owe} is not among those fed forward")
    cpu0, t0 = time.process_time(), time.perf_counter()
    scratch = RunReplica(replica.spec, log=lambda _m: None)
    try:
        out = _run(scratch, texts, snapshots, History(scratch, elements), list(zip([c0, *ticks], at)), owe)
    finally:
        scratch.close()
    out.cpu_s = time.process_time() - cpu0
    logger.info(
        "restored %d of %d queries from the checkpoint at t=%d and fed them forward to t=%d "
        "(%d report times, %d elements) in %.3fs (cpu %.3fs)%s",
        len(out.restored),
        len(texts),
        c0,
        out.c,
        len(ticks),
        elements.meta.shape[1],
        time.perf_counter() - t0,
        out.cpu_s,
        "".join(f"; {n} rebuilt: {e}" for n, e in sorted(out.rebuilt.items()))[:2000],
    )
    return out


def _run(
    scratch: RunReplica,
    texts: Mapping[str, str],
    snapshots: Mapping[str, QueryState | None],
    history: History,
    cuts: list[tuple[int, int]],
    owe: int,
) -> Forwarded:
    """:func:`forward` in ``scratch``; ``cuts``: (report time, elements before it) from the
    checkpoint's on; ``owe``: the report time answered."""
    c0, ticks = cuts[0][0], [c for c, _ in cuts[1:]]
    history.feed(scratch.engine, cuts[0][1])
    out = Forwarded(ticks[-1])
    own, units = _sorted_snapshots(texts, snapshots, c0, out.rebuilt)
    # Each query is planned once: the restored ones first (their own snapshots, then the
    # units' queries on the units' plans), the others after them (they attach to the
    # restored operators and take their content at the silent tick).
    for name, st in own.items():
        if scratch.register_restored(name, texts[name], st):
            out.restored.append(name)
        else:
            out.rebuilt[name] = "the state does not fit the query's plan here"
    sharing = sharing_of(scratch.engine)
    for names, st in units:
        with sharing.seeded(unit_plans(st)):
            for name in names:
                scratch.hold(name, texts[name])
    if units:
        for name, why in scratch.restore_routers(units, c0).items():
            if why:
                out.rebuilt[name] = why
            else:
                out.restored.append(name)
    for name, text in texts.items():
        if not scratch.holds(name):
            scratch.hold(name, text)
    scratch.tick(0, c0, [])  # the silent tick at the checkpoint (as a new leader's run)
    names = list(texts)
    for seq, (c, upto) in enumerate(cuts[1:], start=1):
        history.feed(scratch.engine, upto)
        last = c >= owe  # the owed report and those after it (evaluated by the live replica already)
        due = [n for n in names if all(c % s == 0 for s in scratch.engine.queries[n].steps)] if last else []
        got = scratch.tick(seq, c, due)
        if c == owe:
            out.lines = {n: list(got.lines.get(n, [])) for n in due}
        elif due:
            out.later[c] = {n: list(got.lines.get(n, [])) for n in due}
    for name in names:
        try:
            out.states[name] = scratch.snapshot_moving(name, "live")
        except Exception as exc:  # noqa: BLE001 - the live replica rebuilds it
            logger.warning("no state of %s to hand over after feeding it forward: %s", name, exc)
    out.restored.sort()
    return out


def _sorted_snapshots(
    texts: Mapping[str, str], snapshots: Mapping[str, QueryState | None], c0: int, rebuilt: dict[str, str]
) -> tuple[dict[str, QueryState], list[tuple[list[str], QueryState]]]:
    """The queries' own snapshots and their router units (each with the queries it serves
    here, once); a snapshot of another report time or query is set aside (``rebuilt``)."""
    own: dict[str, QueryState] = {}
    units: dict[int, tuple[list[str], QueryState]] = {}
    for name in texts:
        st = snapshots.get(name)
        if st is None:
            rebuilt[name] = "no snapshot in the checkpoint"
        elif st.header.get("c") != c0:
            rebuilt[name] = f"the snapshot is not of t={c0}"
        elif st.header.get("unit") == UNIT:
            if name not in st.header.get("queries", ()):
                rebuilt[name] = "its router unit does not name it"
            else:
                units.setdefault(id(st), ([], st))[0].append(name)
        elif st.header.get("query") != name:
            rebuilt[name] = "the snapshot is another query's"
        else:
            own[name] = st
    return own, list(units.values())


def adopt(replica: RunReplica, texts: Mapping[str, str], fwd: Forwarded) -> dict[str, str]:
    """Registers the fed-forward queries in the live ``replica`` (which evaluated ``fwd.c``
    last) with their states, as a live migration's new container does; returns per query
    why it is rebuilt (""; a routed query's unit is restored by the next tick, whose
    ``Ticked.moved`` tells)."""
    if replica.last_c != fwd.c:
        return dict.fromkeys(texts, f"this replica is at t={replica.last_c}, not {fwd.c}")
    out: dict[str, str] = {}
    for name, text in texts.items():
        st = fwd.states.get(name)
        if replica.holds(name):
            replica.unregister(name)
        if st is not None and st.header.get("unit") == UNIT:
            out[name] = replica.register_routed(name, text, st)
        elif replica.register_restored(name, text, st):
            out[name] = ""
        else:
            out[name] = "no state to hand over" if st is None else "the state does not fit here"
    return out
