"""Snapshot and restore of a shared join's router unit, for task checkpoints.

A :class:`~linkstream.operators.router.RouterOperator` and everything below it -- the
shared join over timed scans, the :class:`~linkstream.operators.router.LatestGraphOperator`
and the :class:`~linkstream.operators.timed_window.TimedWindowOperator`\\ s -- serve every
query of the shared join on an engine (each through its own
:class:`~linkstream.operators.router.RouteOperator`).  Their state is that of the *unit*,
not of one query, so it is snapshotted once per router (:func:`snapshot_router`) rather
than per query (:func:`~linkstream.operators.state.snapshot_query` refuses routed
queries), and restored once, into an engine that planned the router's queries and has
not evaluated anything yet (:func:`restore_routers`: a new leader's containers).

What a unit's snapshot holds (the operators' own ``snapshot`` methods):

* the router's rows: the shared join's current rows, whose ``%t`` columns are element
  timestamps (not dictionary ids: the id re-encoding on restore skips them);
* the join's input relations (:class:`~linkstream.operators.mjoin.MultiJoinOperator`),
  the latest graph's occurrences and latest timestamps (column ``_t`` likewise plain),
  and each timed window's last advance (its content is in the stream buffer).

The subscriber groups' results (the router's per-group counts, numbered by a group id
each engine assigns itself) are *not* shipped: they follow from the rows and the groups'
keys (ranges, steps, constants), and the restoring engine derives them at its first
evaluation -- the silent evaluation at the checkpoint's report time -- the way a router
serves a group that subscribes while it runs.  Everything above the routes (renamings,
shared aggregates, routed blocks, result views) is built by that evaluation as for a
query without a snapshot; what the snapshot saves is the join's rebuild from the windows.

A query may read several routers (CityBench's average congestion unites two streams'
routed BGPs): a unit is then a *connected set* of routers (:func:`router_units`: two
routers one query reads are in one unit), snapshotted as one object with one part per
router (:func:`snapshot_routers`; the buffers and the id table are shared).  On restore
each router here takes the part whose fingerprint is its own (so a container answering
only some of a unit's queries restores their routers), and a query counts as restored
when every router it reads is.

Routers over count windows (:class:`~linkstream.operators.timed_window.CountedWindowOperator`)
are units too, although their rows, the join's relations and the latest graph's
occurrences hold absolute positions in this process's stream buffer (not timestamps): the
snapshot writes them relative to each count window's end at its last advance
(:attr:`~linkstream.operators.state.StateWriter.shift`), and the restore adds the end of
the same window at the same report time here (:func:`_rebase`), after checking that the
window holds the same triples in the same order here (its length, and the latest graph's
occurrences against the buffer).  A buffer where it does not (a shorter backlog, other
elements) gets no restore: the router is rebuilt, never restored at wrong positions.

A router is restored only when its plan here is the snapshot's (the operators' classes,
variables, window specs, scan patterns with their constants as terms, the router's
output and timestamp variables, the windows' streams) and when no operator outside the restored units reads
one of its operators directly (a reader through an ``AttachOperator`` gets the restored
content replayed, which is right for a fresh reader).  Otherwise it is left alone: the
silent evaluation rebuilds it, as before.

Wire form: that of :func:`~linkstream.operators.state.encode_state` (msgpack header with
``"unit": "router"``, raw int64 buffers); nothing is pickled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.latest_graph import LatestGraphOperator, TimedScanOperator
from linkstream.operators.router import RouteOperator, RouterOperator
from linkstream.operators.state import (
    STATE_VERSION,
    QueryState,
    StateError,
    StateReader,
    StateWriter,
    _entries,
    _fingerprints,
    _walk,
    local_ids,
)
from linkstream.operators.timed_window import CountedWindowOperator, TimedWindowOperator
from linkstream.operators.window import WindowOperator

#: operators whose state is a router unit's (not migrated with one query's)
UNIT_KINDS = (RouterOperator, TimedWindowOperator, TimedScanOperator, LatestGraphOperator)
UNIT = "router"
#: how :func:`restore_query_units` answers a query it leaves alone before any router
SKIPPED = ("the query is not held here", "not routed here")


def routers_of(root: Operator) -> list[RouterOperator]:
    """The routers a query's plan reads (one or several: a query joining or uniting two
    routed BGPs reads two), when its only operators that cannot be migrated with it are
    those routers' units and routes.

    Raises:
        StateError: The plan reads no router, or other unmigratable operators.
    """
    ops = root.walk()
    routers = [op for op in ops if isinstance(op, RouterOperator)]
    if not routers:
        raise StateError("the query reads no shared-join router")
    unit = {id(op) for r in routers for op in r.walk()}
    for op in ops:
        if not op.migratable and id(op) not in unit and not isinstance(op, RouteOperator):
            raise StateError(f"{type(op).__name__} state is not migrated (the query is rebuilt)")
    return routers


def router_of(root: Operator) -> RouterOperator:
    """The one router a query's plan reads (:func:`routers_of` of a query that reads one).

    Raises:
        StateError: As :func:`routers_of`, or the plan reads several routers.
    """
    routers = routers_of(root)
    if len(routers) != 1:
        raise StateError(f"the query reads {len(routers)} shared-join routers (not one)")
    return routers[0]


def router_units(
    routed: Sequence[tuple[str, Sequence[RouterOperator]]],
) -> list[tuple[list[str], list[RouterOperator]]]:
    """Groups routed queries (each with the routers it reads) into units: connected sets
    of routers (two routers one query reads are in one unit), each with its queries, in
    the order the queries come."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for _, rs in routed:
        for r in rs:
            parent.setdefault(id(r), id(r))
        for r in rs[1:]:
            parent[find(id(r))] = find(id(rs[0]))
    groups: dict[int, tuple[list[str], list[RouterOperator]]] = {}
    seen: set[int] = set()
    for name, rs in routed:
        names, routers = groups.setdefault(find(id(rs[0])), ([], []))
        names.append(name)
        for r in rs:
            if id(r) not in seen:
                seen.add(id(r))
                routers.append(r)
    return list(groups.values())


def _fp(order: list[tuple[Operator, bool]], dictionary: Any) -> list[list[Any]]:
    fps = _fingerprints(order, dictionary)
    router = order[0][0]
    assert isinstance(router, RouterOperator)
    # the windows' streams too: two streams' routers of one query (the same BGP, window
    # and variables over each) differ only there
    streams = [str(op.buffer.iri) for op, _ in order if isinstance(op, WindowOperator)]
    fps[0].append([list(router.out_vars), [list(ts) for ts in router.slot_ts], streams])
    return fps


def snapshot_routers(engine: Any, routers: Sequence[RouterOperator], c: int) -> QueryState:
    """The state of the units of ``routers`` in ``engine`` after report time ``c`` (between
    two ticks): one part per router, one set of buffers (an operator under two routers is
    written in both parts, with the same content).

    Raises:
        StateError: An operator of a unit cannot be snapshotted.
    """
    w = StateWriter()
    parts: list[dict[str, Any]] = []
    for router in routers:
        order, _ = _walk(router)
        nodes: list[dict[str, Any]] = []
        for op, _behind in order:
            if not op.migratable and not isinstance(op, UNIT_KINDS):
                raise StateError(f"{type(op).__name__} state is not migrated (the query is rebuilt)")
            # count windows' positions relative to the window's end (rebased on restore)
            w.shift = {v: -win.hi for v, win in _positions(op, router).items()}
            nodes.append(_entries(op, w))
        w.shift = {}
        parts.append({"fp": _fp(order, engine.dictionary), "nodes": nodes})
    uniq = w.ids()
    header = {
        "v": STATE_VERSION,
        "unit": UNIT,
        "c": int(c),
        "parts": parts,
        "ids": w.id_arrays,
        "uniq": w.add(uniq, False),
        "terms": engine.dictionary.decode_many(uniq) if len(uniq) else [],
        "rows": w.rows,
    }
    return QueryState(header, w.arrays)


def snapshot_router(engine: Any, router: RouterOperator, c: int) -> QueryState:
    """The state of ``router``'s unit (:func:`snapshot_routers` of one router)."""
    return snapshot_routers(engine, [router], c)


def _parts(header: dict[str, Any]) -> list[dict[str, Any]]:
    """A unit snapshot's parts (one per router; a snapshot of session 14 has one, inline)."""
    if "parts" in header:
        return list(header["parts"])
    return [{"fp": header.get("fp") or [], "nodes": header.get("nodes") or []}]


def _part(
    engine: Any, router: RouterOperator, parts: list[dict[str, Any]], live: bool = False
) -> tuple[str, dict[str, Any]]:
    """The part of a unit snapshot that is ``router``'s (by fingerprint), or why none is
    (``live``: operators behind an attachment may have run, see :func:`restore_routers`)."""
    order, _ = _walk(router)
    fps = _fp(order, engine.dictionary)
    same = [p for p in parts if p.get("fp") == fps and len(p.get("nodes", ())) == len(order)]
    if router._closes is not None or any(
        isinstance(op, TimedWindowOperator) and op.now is not None and not (live and behind)
        for op, behind in order
    ):
        return "the router evaluated here already", {}
    if len(same) == 1:
        return "", same[0]
    if same:
        return "%d parts of the snapshot fit the router (ambiguous)" % len(same), {}
    theirs = parts[0].get("fp") or [] if len(parts) == 1 else []
    if not theirs:
        return "no router of the snapshot (%d) has this router's plan" % len(parts), {}
    k = next((i for i, (a, b) in enumerate(zip(fps, theirs)) if a != b), min(len(fps), len(theirs)))
    return (
        "the shared join's plan differs between the two engines (operator %d: %s here, %s in the snapshot)"
        % (k, fps[k] if k < len(fps) else "none", theirs[k] if k < len(theirs) else "none"),
        {},
    )


def _latest_counted(op: LatestGraphOperator) -> CountedWindowOperator | None:
    """The count window a latest graph reads (``None``: it reads time windows).

    Raises:
        StateError: It merges a count window with other windows or static triples (the
            planner does not build one; its positions could not be rebased).
    """
    ws = [ch.shared if isinstance(ch, AttachOperator) else ch for ch in op.children]
    counted = [w for w in ws if isinstance(w, CountedWindowOperator)]
    if not counted:
        return None
    if len(ws) != 1 or op.static is not None:
        raise StateError("a merged graph over a count window is not a router unit (the query is rebuilt)")
    return counted[0]


def _positions(op: Operator, router: RouterOperator) -> dict[str, CountedWindowOperator]:
    """Per variable of ``op``'s state that holds buffer positions (not timestamps), the
    count window they are positions of: the router's count slots' time variables, or the
    ``_t`` of a latest graph over a count window (raises ``StateError`` as
    :func:`_latest_counted`)."""
    if isinstance(op, LatestGraphOperator):
        win = _latest_counted(op)
        return {} if win is None else {"_t": win}
    return {
        v: w
        for w, ts in zip(router.windows, router.slot_ts)
        if isinstance(w, CountedWindowOperator)
        for v in ts
    }


def _same_rows(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two column arrays hold the same rows (in any order)."""
    if a.shape != b.shape:
        return False
    return bool(np.array_equal(a[:, np.lexsort(a[::-1])], b[:, np.lexsort(b[::-1])]))


def _rebase(
    order: list[tuple[Operator, bool]], nodes: list[Any], reader: StateReader
) -> tuple[str, dict[int, int]]:
    """Per count window of a router's part (by ``id``), the position its content ends at
    here (what the snapshot's relative positions are added to), or why the part's positions
    cannot be put into this engine's buffers exactly.

    Exact means: the window holds as many triples here as in the snapshot (a buffer that
    starts later, or earlier than the snapshot's did, would not), and they are the same
    triples in the same order -- checked against the latest graph's occurrences, which
    list every triple of the window with its position.
    """
    entries = {id(op): e for (op, _), e in zip(order, nodes)}
    spans: dict[int, tuple[int, int]] = {}
    for op, _ in order:
        if not isinstance(op, CountedWindowOperator) or id(op) in spans:
            continue
        e = entries[id(op)]
        now, span = e.get("now"), e.get("span")
        if now is None:
            spans[id(op)] = (0, 0)  # never advanced: nothing holds its positions
            continue
        if isinstance(now, bool) or not isinstance(now, int) or not isinstance(span, int):
            return "malformed count window state", {}
        lo, hi = (max(x, op.buffer.base) for x in op.bounds(now))
        if hi - lo != span:
            return (
                f"a count window holds {span} triples in the snapshot, {hi - lo} here (positions not rebased)",
                {},
            )
        spans[id(op)] = (lo, hi)
    for op, _ in order:
        if not isinstance(op, LatestGraphOperator):
            continue
        try:
            win = _latest_counted(op)
        except StateError as exc:
            return str(exc), {}
        if win is None:
            continue
        lo, hi = spans[id(win)]
        reader.shift = {"_t": hi}
        try:
            occ = reader.relation(entries[id(op)].get("occurrences"), op.occurrences).rows
        finally:
            reader.shift = {}
        occ = occ.mask(occ.counts != 0)
        here = win._rows(lo, hi, 1).cols if hi > lo else np.empty((4, 0), dtype=np.int64)
        if not (np.all(occ.counts == 1) and _same_rows(occ.cols, here)):
            return (
                "a count window's triples differ between the snapshot and this buffer (positions not rebased)",
                {},
            )
    return "", {k: hi for k, (_, hi) in spans.items()}


def _fits(state: QueryState, c: int) -> str:
    """Why ``state`` cannot be restored at ``c`` at all ("": it can)."""
    h = state.header
    if h.get("v") != STATE_VERSION or h.get("unit") != UNIT:
        return "not a router unit's snapshot"
    if h.get("c") != c:
        return f"snapshot after t={h.get('c')}, this engine is at t={c}"
    return ""


def _parents(engine: Any) -> dict[int, list[Operator]]:
    """Per operator of ``engine``'s plans, the operators that read it as a child."""
    out: dict[int, list[Operator]] = {}
    seen: set[int] = set()
    for rq in engine.queries.values():
        for op in rq.root.walk():
            if id(op) in seen:
                continue
            seen.add(id(op))
            for ch in op.children:
                out.setdefault(id(ch), []).append(op)
    return out


def restore_routers(
    engine: Any, units: Sequence[tuple[Sequence[RouterOperator], QueryState]], c: int, live: bool = False
) -> dict[int, str]:
    """Restores the router units of ``units`` (each: routers of ``engine`` and a snapshot
    holding their parts, matched by fingerprint) into ``engine`` (before its first tick,
    which is at the snapshots' report time ``c``); returns per router (``id``) why it was
    not restored (absent: restored).  A router listed twice is restored once.

    ``live``: ``engine`` evaluated ``c`` already (a live migration) and the routers were
    planned since, over operators of its running queries where they share them (behind an
    attachment: windows, scans, latest graphs of the same streams).  Those ran to ``c``
    here and are taken as they are (as :func:`~linkstream.operators.state.restore_query`
    takes them), their windows checked to be at ``c``; only the operators planned for the
    routers take the snapshot's state.  An operator taken so must have run here, or be one
    that another router's restore here fills (a router planned over another router's
    fresh operators); otherwise the router is not restored."""
    errors: dict[int, str] = {}
    cand: dict[
        int, tuple[RouterOperator, list[Any], list[tuple[Operator, bool]], StateReader, dict[int, int]]
    ] = {}
    for routers, state in units:
        why = _fits(state, c)
        parts = _parts(state.header) if not why else []
        reader: StateReader | None = None
        for router in routers:
            if id(router) in cand or id(router) in errors:
                continue
            part: dict[str, Any] = {}
            err = why
            if not err:
                err, part = _part(engine, router, parts, live)
            if not err and reader is None:
                try:
                    reader = StateReader(local_ids(engine, state), c)
                except StateError as exc:
                    why = err = str(exc)
            ends: dict[int, int] = {}
            order = _walk(router)[0]
            if not err and live:
                late = [
                    op.now
                    for op, behind in order
                    if behind and isinstance(op, TimedWindowOperator) and op.now not in (None, c)
                ]
                if late:
                    err = f"a window it shares with the queries here is at t={late[0]}, not t={c}"
            if not err:
                assert reader is not None
                err, ends = _rebase(order, list(part["nodes"]), reader)
            if err:
                errors[id(router)] = err
            else:
                assert reader is not None
                cand[id(router)] = (router, list(part["nodes"]), order, reader, ends)
    parents = _parents(engine)
    while True:  # no operator outside the restored units may read theirs directly
        members = {id(op) for _, _, order, _, _ in cand.values() for op, b in order if not (live and b)}
        if live:  # an operator it takes as it is ran here (or is restored now): at c
            fresh = [
                rid
                for rid, (_, _, order, _, _) in cand.items()
                if any(b and op._epoch < 0 and id(op) not in members for op, b in order)
            ]
            for rid in fresh:
                errors[rid] = "an operator it shares with the queries here has not run yet"
                del cand[rid]
            if fresh:
                continue
        bad = [
            rid
            for rid, (router, _, order, _, _) in cand.items()
            if any(
                not isinstance(p, (AttachOperator, RouteOperator)) and id(p) not in members
                for op, behind in order
                if op is not router and not (live and behind)
                for p in parents.get(id(op), ())
            )
        ]
        if not bad:
            break
        for rid in bad:
            errors[rid] = "an operator of its shared join is read by one that is not restored"
            del cand[rid]
    done: set[int] = set()
    for router, nodes, order, reader, ends in cand.values():
        for (op, behind), entries in zip(order, nodes):
            if live and behind:
                continue  # it ran here to c already
            if id(op) not in done:  # (an operator of two units: the same content in both)
                # count windows' relative positions put after this buffer's window end
                reader.shift = {v: ends[id(win)] for v, win in _positions(op, router).items()}
                op.restore(reader, entries)
                done.add(id(op))
        reader.shift = {}
        for a in router.walk():
            if isinstance(a, AttachOperator):  # its reader holds the restored content
                a._attached = True
    return errors


def restore_query_units(
    engine: Any,
    units: Sequence[tuple[Sequence[str], QueryState]],
    c: int,
    prepare: Callable[[str], str] | None = None,
    live: bool = False,
) -> dict[str, str]:
    """Restores router units, each given with the queries it serves (by name), into the
    routers those queries read in ``engine`` (:func:`restore_routers`); returns per query
    why it was not restored ("": restored, every router it reads).

    ``live``: as for :func:`restore_routers`.  ``prepare(name)`` (optional) runs first for every query and returns why it cannot be
    restored ("": go on), e.g. after planning a query set aside.  A query not registered
    in ``engine`` or not routed here is answered so and left alone.

    Raises:
        Exception: Whatever :func:`restore_routers` raises (the units may be partly restored).
    """
    out: dict[str, str] = {}
    pairs: list[tuple[list[RouterOperator], QueryState]] = []
    served: list[tuple[str, list[RouterOperator]]] = []
    for names, state in units:
        for name in names:
            why = prepare(name) if prepare is not None else ""
            if not why and name not in engine.queries:
                why = "the query is not held here"
            if why:
                out[name] = why
                continue
            try:
                routers = routers_of(engine.queries[name].root)
            except StateError as exc:
                out[name] = f"not routed here: {exc}"
                continue
            pairs.append((routers, state))
            served.append((name, routers))
    errors = restore_routers(engine, pairs, c, live)
    for name, routers in served:
        out[name] = next((errors[id(r)] for r in routers if id(r) in errors), "")
    return out
