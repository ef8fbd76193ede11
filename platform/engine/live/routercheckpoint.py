"""Router units in the embedded live engine's checkpoints (``run --state-dir``).

A query on shared joins' routers has no state of its own to snapshot
(:func:`~linkstream.operators.state.snapshot_query` refuses it): the router, the shared
join, the latest graph and the timed windows serve every query of the join.  As in the
cluster's task snapshots (:mod:`~linkstream.containers.taskcheckpoint`), such queries are
grouped into *router units* (connected sets of routers, :func:`~linkstream.operators.shared_state.router_units`)
and each unit is snapshotted once (:func:`~linkstream.operators.shared_state.snapshot_routers`:
msgpack header + raw int64 buffers, the same format in both paths).  A checkpoint holds
them in one object, ``routers`` (checksummed in the manifest like every object)::

    header {"units": [{"queries": [name, ...], "header": unit header, "first": k, "n": n}]}
    arrays: each unit's buffers, unit after unit

On restore, after every checkpointed query is registered again and before the silent
evaluation at the checkpoint's last report time, each unit is restored into the routers
its queries read here (:func:`~linkstream.operators.shared_state.restore_routers`: by
fingerprint; a router whose plan differs, or whose operators another unrestored operator
reads, is left to the silent evaluation, which rebuilds it from the stream buffers as
before).  The silent evaluation still runs for the routed queries: it derives the groups'
results above the routes from the restored join rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from linkstream.operators.router import RouterOperator
from linkstream.operators.shared_state import (
    SKIPPED,
    restore_query_units,
    router_units,
    routers_of,
    snapshot_routers,
)
from linkstream.operators.state import QueryState, StateError
from linkstream.store.checkpoints import Blob, Checkpoint

log = logging.getLogger(__name__)

#: the checkpoint object holding the router units
OBJECT = "routers"


def capture_units(eng: Any, names: Sequence[str], c: int) -> list[tuple[list[str], QueryState]]:
    """The router units of the queries ``names`` (those that read routers; the others are
    skipped), copied: later ticks do not change them."""
    routed: list[tuple[str, list[RouterOperator]]] = []
    for name in names:
        rq = eng.queries.get(name)
        if rq is None:
            continue
        try:
            routed.append((name, routers_of(rq.root)))
        except StateError:
            continue
    out = []
    for qnames, routers in router_units(routed):
        try:
            st = snapshot_routers(eng, routers, c)
        except StateError as exc:
            log.debug("checkpoint: the router unit of %s is rebuilt at restore (%s)", qnames[0], exc)
            continue
        except Exception as exc:  # an operator this version cannot walk: rebuild it
            log.warning("checkpoint: cannot snapshot the router unit of %s (%s)", qnames[0], exc)
            continue
        st.header["queries"] = sorted(qnames)
        out.append((qnames, QueryState(st.header, [a.copy() for a in st.arrays])))
    return out


def encode_units(units: Sequence[tuple[list[str], QueryState]]) -> Blob:
    """The ``routers`` object of ``units`` (see the module docstring)."""
    arrays: list[np.ndarray] = []
    heads = []
    for names, st in units:
        heads.append({"queries": list(names), "header": st.header, "first": len(arrays), "n": len(st.arrays)})
        arrays += st.arrays
    return Blob({"units": heads}, arrays)


def restore_units(eng: Any, ck: Checkpoint, c: int) -> tuple[list[str], int]:
    """Restores the router units of ``ck`` into ``eng`` (its checkpointed queries registered,
    not evaluated yet); returns the queries restored (every router they read) and the
    number of units.  A checkpoint without units (none routed, or of session 14 or
    before) restores none.

    Raises:
        StateError: A unit that fits cannot be read (the caller names the checkpoint).
    """
    if OBJECT not in ck.objects:
        return [], 0
    blob = ck.blob(OBJECT)
    units: list[tuple[list[str], QueryState]] = []
    heads = blob.header.get("units") or []
    for u in heads:
        k = int(u["first"])
        st = QueryState(u["header"], [np.array(a) for a in blob.arrays[k : k + int(u["n"])]])
        units.append((list(u["queries"]), st))
    out = restore_query_units(eng, units, c)
    # (a query not held or not routed here is rebuilt as any other: nothing to say)
    errors = [e for e in out.values() if e and not e.startswith(SKIPPED)]
    if errors:
        log.info(
            "checkpoint %s: %d routed queries not restored from their units (%s); the silent evaluation rebuilds them",
            ck.id,
            len(errors),
            errors[0],
        )
    return sorted(n for n, e in out.items() if not e), len(heads)
