"""The autoscaler's reading of the cluster (no ZooKeeper): signals, victims, the ``none`` driver."""

from __future__ import annotations

from linkstream.cluster.autoscaler import ClusterView, RecommendDriver, pick_victim, read_signals
from linkstream.scheduler.membership import Member

NOW = 1_000_000.0


def view(loads: dict, draining: tuple[str, ...] = ()) -> ClusterView:
    members = {
        c: Member(c, 4, f"tcp://127.0.0.1:{5000 + i}", c in draining)
        for i, c in enumerate(("oc-1", "oc-2", "oc-10"))
    }
    tasks = {"q1": "oc-1", "q2": "oc-1", "q3": "oc-2", "q4": None}
    return ClusterView(members, tasks, loads)


def test_signals_from_fresh_figures_only() -> None:
    loads = {
        "leader": {"role": "leader", "lag_ms": 4200, "queued": 7, "at": NOW - 1},
        "oc-1": {"role": "container", "busy": 0.5, "at": NOW - 1},
        "oc-2": {"role": "container", "busy": 0.1, "at": NOW - 60},  # stale: left out
        "oc-10": {"role": "container", "busy": 0.3, "at": NOW},
    }
    s = read_signals(view(loads), 5.0, containers=3, joining=1, draining=0, wall=NOW)
    assert (s.t, s.containers, s.joining, s.lag_ms, s.queued, s.tasks, s.slots) == (
        5.0,
        3,
        1,
        4200.0,
        7,
        4,
        4,
    )
    assert s.busy is not None and abs(s.busy - 0.4) < 1e-9
    stale = {"leader": {"lag_ms": 9000, "queued": 1, "at": NOW - 30}}
    s = read_signals(view(stale), 6.0, containers=3, joining=0, draining=0, wall=NOW)
    assert s.lag_ms is None and s.queued is None and s.busy is None


def test_draining_members_are_not_live_nor_busy() -> None:
    loads = {"oc-1": {"busy": 0.9, "at": NOW}, "oc-2": {"busy": 0.1, "at": NOW}}
    v = view(loads, draining=("oc-1",))
    assert set(v.live) == {"oc-2", "oc-10"}
    s = read_signals(v, 0.0, containers=2, joining=0, draining=1, wall=NOW)
    assert s.busy == 0.1


def test_victim_has_fewest_tasks_then_is_newest() -> None:
    v = view({})
    assert pick_victim(v, ["oc-1", "oc-2", "oc-10"]) == "oc-10"  # no tasks; oc-10 after oc-2
    assert pick_victim(v, ["oc-1", "oc-2"]) == "oc-2"
    assert pick_victim(v, []) is None


def test_recommend_driver_follows_its_advice_and_resets_to_the_real_count() -> None:
    d = RecommendDriver()
    v = view({})
    d.step(v)
    assert d.count(v) == 3
    d.scale_out(2, v)
    d.step(v)
    assert d.count(v) == 5  # the real count did not change: the recommendation stays
    d.scale_in("oc-1", v)
    assert d.count(v) == 4
    smaller = ClusterView({k: m for k, m in v.members.items() if k != "oc-10"}, v.tasks, {})
    d.step(smaller)
    assert d.count(smaller) == 2  # someone acted: back to the real count
