"""The engine's side of a lone join switched to a shared router.

A query whose join could be routed is planned on its own while no other query has the
join's routed signature (:class:`~linkstream.engine.sharing.Sharing`, the switch in
:mod:`linkstream.operators.switch`).  When a second one comes, the sharing points the
first query's switch at its route on the new shared join; :func:`switched` then makes
the engine's books match the query's new operators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from linkstream.operators.base import AttachOperator
from linkstream.operators.window import WindowOperator

if TYPE_CHECKING:
    from linkstream.engine.embedded import Engine, RegisteredQuery
    from linkstream.operators.switch import SwitchOperator


def switched(engine: Engine, sw: SwitchOperator) -> None:
    """``sw``'s query now reads a shared join's route: counts its new operators, frees the
    replaced ones, indexes its sources anew and evaluates it at the next epoch (its
    switch retracts the old result then, whatever moved)."""
    for name in engine._lone_owner.pop(id(sw), ()):
        rq = engine.queries.get(name)
        if rq is not None:  # (the registering query's own: its operators are counted with it)
            _rewire(engine, rq)


def _rewire(engine: Engine, rq: RegisteredQuery) -> None:
    old = rq.ops
    ops = [op for op in rq.root.walk() if not isinstance(op, AttachOperator)]
    old_ids = {id(op) for op in old}
    refs = engine._refs
    for op in ops:
        if id(op) not in old_ids:
            refs[id(op)] = refs.get(id(op), 0) + 1
    new_ids = {id(op) for op in ops}
    rq.ops = ops
    rq.windows = [op for op in ops if isinstance(op, WindowOperator)]
    engine.release([op for op in old if id(op) not in new_ids])
    engine.replanned(rq)
    engine._deps.touch(rq.name)
