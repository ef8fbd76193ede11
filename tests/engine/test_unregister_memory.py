"""Unregistering queries frees their operators *and* their memory (issue 4: memory and
operator count return to the earlier level)."""

from __future__ import annotations

import gc
import tracemalloc

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.base import Operator
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine.test_sharing import REPO, SES, TRAFFIC, generate, trimmed  # noqa: F401, F811


def _round(eng: Engine, queries: dict[str, str], streams) -> int:
    """Register ``queries``, replay, unregister them all; returns the peak operator count."""
    rqs = [eng.register(parse_continuous(text, default_name=name)) for name, text in queries.items()]
    peak = eng.operator_count()
    res = replay(eng, rqs, streams, None)
    assert res.rows > 0  # the queries did produce results (state was really built)
    for name in queries:
        eng.unregister(name)
    return peak


def test_unregistering_returns_memory_and_operator_count_to_the_earlier_level(trimmed):  # noqa: F811
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    queries = generate(300)
    # a first round fills what is meant to stay: the dictionary, the parse and term caches
    _round(eng, queries, streams)
    base_ops = eng.operator_count()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        eng2_queries = {
            f"r{name}": text.replace(f"QUERY {name} ", f"QUERY r{name} ") for name, text in queries.items()
        }
        eng2_queries = {k: v.replace(f"<{k[1:]}>", f"<{k}>") for k, v in eng2_queries.items()}
        peak_ops = _round(eng, eng2_queries, streams)
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_ops > base_ops + 100  # the queries held many operators ...
    assert eng.operator_count() == base_ops == 0  # ... and all of them are gone
    grown = peak - before
    assert grown > 1_000_000, grown  # the round really allocated state (windows, joins, results)
    # what is left after unregistering is a small fraction of what the queries held
    assert after - before < 0.05 * grown, (after - before, grown)


def _operators_in_cyclic_garbage() -> list[str]:
    """Names of the operator types that only reference cycles keep alive (collected here)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted({type(o).__name__ for o in gc.garbage if isinstance(o, Operator)})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_registering_and_unregistering_leave_no_operator_in_a_reference_cycle(trimmed):  # noqa: F811
    """A replay freezes (``gc.freeze()``) every object alive or not yet collected: an operator
    that only a garbage reference cycle keeps would be frozen with all it reaches and outlive
    its unregistration (``Sharing.share`` once made one per registered query)."""
    d, static = trimmed
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    parsed = [parse_continuous(text, default_name=name) for name, text in generate(60).items()]
    gc.collect()
    gc.disable()  # what cycles registration makes, not what the collector took meanwhile
    try:
        for cq in parsed:
            eng.register(cq)
        assert eng.operator_count() > 100
        assert _operators_in_cyclic_garbage() == []
        for cq in parsed:
            eng.unregister(cq.name)
        assert eng.operator_count() == 0
        assert _operators_in_cyclic_garbage() == []
    finally:
        gc.enable()
