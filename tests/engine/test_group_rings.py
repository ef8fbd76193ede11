"""A keyed group's members' result rings kept once per report
(:mod:`linkstream.engine.live.grouprings`) read as rings of their own would."""

from __future__ import annotations

import queue

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.live.grouprings import GroupLog, MemberRing, RingMap
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.subscription import ReportRing, ResultsGone, parse_cursor

EX = "http://example.org/"
Q1 = (
    "PREFIX ex: <http://example.org/> SELECT ?p ?o "
    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT{r}S STEP PT1S] WHERE {{ WINDOW ex:w {{ ex:u{u} ?p ?o }} }}"
)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Group:
    """What a group log reads of a group: members by name and a membership version."""

    def __init__(self) -> None:
        self.by_name: dict[str, int] = {}
        self._version = 0


def _seen(ring: ReportRing, cursor: tuple[int, int]) -> list | str:
    try:
        return [(t, tuple(lines), first) for t, lines, first in ring.after(cursor)]
    except ResultsGone:
        return "gone"


steps = st.lists(
    st.one_of(
        st.tuples(st.just("report"), st.lists(st.integers(0, 3), min_size=6, max_size=6), st.floats(0, 4)),
        st.tuples(st.just("leave"), st.integers(0, 5), st.just(0.0)),
        st.tuples(st.just("join"), st.integers(0, 5), st.just(0.0)),
        st.tuples(st.just("read"), st.integers(0, 5), st.floats(0, 1)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps, st.integers(1, 8), st.floats(1, 10))
def test_members_read_their_reports_as_their_own_rings_would(ops, max_lines, retention) -> None:
    """Reports, budgets, retention, members leaving and joining (their ids reused) and
    reads in between: each member's view equals a plain ring fed its own reports."""
    clock = _Clock()
    g = _Group()
    rings = RingMap()
    log = GroupLog(g, retention, clock)  # type: ignore[arg-type]  # (a stand-in group)
    model: dict[str, ReportRing] = {}
    serial = 0

    def join(mid: int) -> None:
        nonlocal serial
        serial += 1
        name = "q%d" % serial
        g.by_name[name] = mid
        g._version += 1
        rings[name] = ReportRing(retention, max_lines, clock)
        model[name] = ReportRing(retention, max_lines, clock)

    for mid in range(6):
        join(mid)
    t = 0
    for op, arg, x in ops:
        if op == "report":
            t += 1000
            clock.now += x
            log.sync(rings)
            counts = np.array(arg, dtype=np.int64)
            blocks = np.array(
                ["".join("%d-%d-%d\n" % (t, m, k) for k in range(n)) for m, n in enumerate(arg)], dtype=object
            )
            mids = np.flatnonzero(counts)
            log.add(clock.now, t, str(t), mids, blocks[mids], counts[mids])
            for name, mid in g.by_name.items():
                if arg[mid]:
                    model[name].add(t, tuple(blocks[mid].split("\n")[:-1]), clock.now)
                else:
                    model[name].add(t, (), clock.now)
        elif op in ("leave", "join"):
            names = [n for n, m in g.by_name.items() if m == arg]
            if op == "leave" and names:
                del g.by_name[names[0]]
                g._version += 1
                if arg % 2:  # unregistered: the ring goes
                    rings.pop(names[0])
                    del model[names[0]]
                else:  # left the group, still registered: a plain ring again
                    log.sync(rings)
                    assert type(rings[names[0]]) is ReportRing
            elif op == "join" and not names:
                join(arg)
        else:
            log.sync(rings)
            for name, ring in rings.items():
                want = model[name]
                cursor = (int(t * x), 0)
                assert _seen(ring, cursor) == _seen(want, cursor), name
                assert ring.dropped_until == want.dropped_until
                assert (ring.first(), ring.last()) == (want.first(), want.last())
                got = [(t2, tuple(ls)) for _, t2, ls in ring.export(None)]
                assert got == [(t2, tuple(ls)) for _, t2, ls in want.export(None)]
    log.sync(rings)
    assert sum(isinstance(r, MemberRing) for r in rings.values()) == len(g.by_name)
    for name, ring in rings.items():
        assert _seen(ring, (-1, 0)) == _seen(model[name], (-1, 0))


def _lines(sub) -> list[tuple[int, tuple[str, ...]]]:
    out = []
    while True:
        try:
            t, lines = sub.get_report(timeout=0.01)
        except queue.Empty:
            return out
        if lines:
            out.append((t, tuple(lines)))


def _run(crowd: int) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    live = LiveEngine(idle_ms=None).start()
    try:
        watched = [f"w{u}" for u in range(4)]
        for i in range(crowd):
            live.register(Q1.format(r=3, u=i % 7), name=f"x{i:03d}")
        subs = {}
        for u, n in enumerate(watched):
            live.register(Q1.format(r=2 + u % 2, u=u), name=n)
            subs[n] = live.subscribe(n, maxlen=10**6)
        for t in range(0, 20000, 300):
            if t == 6000 and crowd:
                for i in range(0, crowd, 3):
                    live.unregister(f"x{i:03d}")
                live.register(Q1.format(r=4, u=1), name="late")
                subs["late"] = live.subscribe("late", maxlen=10**6)
            u = (t // 300) % 7
            live.push(EX + "s", t, [(f"<{EX}u{u}>", f"<{EX}p{t % 3}>", f'"{t}"')])
        live.advance_to(30000)
        live.sync()
        got = {n: _lines(s) for n, s in subs.items()}
        if crowd:
            assert all(isinstance(live._rings[n], MemberRing) for n in [*watched, "late"])
        for n in got:  # a reader resuming from the start reads what the live reader got
            assert _lines(live.subscribe(n, maxlen=10**6, after=parse_cursor("-1"))) == got[n], n
        assert all(got[n] for n in got)
        return {n: got[n] for n in watched}
    finally:
        live.close()


def test_resuming_readers_of_group_members_read_what_live_readers_got() -> None:
    """80 pattern queries differing in a constant (one keyed group), some unregistered and
    one registered mid-run: a reader that resumes from the start of the kept results reads
    exactly what a subscriber read live, and the watched queries read what they read alone."""
    assert _run(80) == _run(0)
