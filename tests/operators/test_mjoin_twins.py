"""MJoin inputs that rename one operator's output (two uses of one pattern over a C-SPARQL
merged graph, say) get the same deltas: the later one takes the earlier one's relation
content instead of consolidating the delta again.  The join stays equal to a join
recomputed from scratch and to the join without twins, epoch after epoch; an input whose
deltas differ from its twin's (columns in another order) is maintained on its own."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.relation import Relation
from linkstream.operators.router import RenameOperator
from tests.operators.test_incremental_properties import Feed, as_counter, naive_join

small = st.integers(min_value=1, max_value=5)
#: per epoch: (insert?, rows of the shared source), (insert?, rows of sel1), (insert?, rows of sel2)
epoch_st = st.lists(
    st.tuples(st.booleans(), st.lists(st.tuples(small, small), min_size=0, max_size=4)),
    min_size=3,
    max_size=3,
)


def _push(f: Feed, insert: bool, rows: list[tuple[int, ...]]) -> None:
    rows = [r[: len(f.vars)] for r in rows]
    if insert or not f.content:
        f.push(rows, +1)
    else:
        existing = list(f.content.elements())
        f.push(existing[: max(1, len(existing) // 2)], -1)


def _run(epochs, twins: bool, reorder: bool = False) -> tuple[list[Counter], MJoinOperator]:
    src = Feed(("o", "v"))  # one pattern's matches, used by both stars
    sel1, sel2 = Feed(("o1",)), Feed(("o2",))
    star1 = RenameOperator(src, {"o": "o1", "v": "v1"}, ("o1", "v1"))
    order = ("v2", "o2") if reorder else ("o2", "v2")
    star2 = RenameOperator(src, {"o": "o2", "v": "v2"}, order)
    j = MJoinOperator([star1, star2, sel1, sel2])
    if not twins:
        j._twin_of = [-1] * 4
    acc = Relation(j.vars)
    out = []
    for epoch, ops in enumerate(epochs, 1):
        for f, (insert, rows) in zip((src, sel1, sel2), ops):
            _push(f, insert, rows)
        acc.apply(j.delta(epoch))
        contents = [
            Counter({(o, v): n for (o, v), n in src.content.items()}),
            Counter({((v, o) if reorder else (o, v)): n for (o, v), n in src.content.items()}),
            sel1.content,
            sel2.content,
        ]
        expected, vs = naive_join(contents, [("o1", "v1"), order, ("o1",), ("o2",)])
        got = as_counter(acc.rows, vs)
        assert got == +expected, f"epoch {epoch}"
        out.append(got)
    return out, j


@settings(max_examples=40, deadline=None)
@given(st.lists(epoch_st, min_size=1, max_size=6))
def test_twins_equal_recomputed_join(epochs):
    with_twins, j = _run(epochs, twins=True)
    assert j._twin_of[1] == 0  # the renamed use mirrors the first one
    without, _ = _run(epochs, twins=False)
    assert with_twins == without


@settings(max_examples=30, deadline=None)
@given(st.lists(epoch_st, min_size=1, max_size=6))
def test_reordered_twin_is_maintained_on_its_own(epochs):
    _run(epochs, twins=True, reorder=True)


def test_twin_mirrors_instead_of_applying(monkeypatch):
    calls = Counter()
    apply, mirror = Relation.apply, Relation.mirror

    def counting_apply(self, d):
        calls["apply"] += 1
        return apply(self, d)

    def counting_mirror(self, src):
        calls["mirror"] += 1
        return mirror(self, src)

    monkeypatch.setattr(Relation, "apply", counting_apply)
    monkeypatch.setattr(Relation, "mirror", counting_mirror)
    epochs = [[(True, [(1, 2), (2, 3), (3, 4)]), (True, [(1,), (2,)]), (True, [(2,), (3,)])]]
    epochs += [[(False, []), (True, []), (True, [])], [(True, [(4, 5)]), (True, []), (True, [(4,)])]]
    _run(epochs, twins=True)
    # (the result relation of the test applies too: one per epoch)
    assert calls["mirror"] == 3
    calls.clear()
    _run(epochs, twins=True, reorder=True)
    assert calls["mirror"] == 0


@pytest.mark.parametrize("reorder", [False, True])
def test_twin_broken_for_good_after_a_difference(reorder):
    epochs = [[(True, [(1, 2), (2, 3)]), (True, [(1,)]), (True, [(2,)])]] * 3
    _, j = _run(epochs, twins=True, reorder=reorder)
    assert j._twin_of[1] == (-1 if reorder else 0)
