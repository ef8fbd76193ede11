"""The autoscaling policy (sans-IO): scripted signal sequences in, decisions out."""

from __future__ import annotations

import pytest

from linkstream.scheduler.autoscale import HOLD, IN, OUT, REASONS, AutoscalePolicy, Autoscaler, Signals

POLICY = AutoscalePolicy(
    min_containers=1,
    max_containers=3,
    target_lag_ms=2000,
    out_after_s=5,
    in_after_s=20,
    out_cooldown_s=10,
    in_cooldown_s=30,
)


def run(policy: AutoscalePolicy, script: list[Signals]) -> list[tuple[float, str, int, str]]:
    scaler = Autoscaler(policy)
    out = []
    for s in script:
        d = scaler.decide(s)
        assert d.reason in REASONS
        out.append((s.t, d.action, d.desired, d.reason))
    return out


def actions(trace: list[tuple[float, str, int, str]]) -> list[tuple[float, str, int]]:
    return [(t, a, n) for t, a, n, _ in trace if a != HOLD]


def cluster(trace_lag: list[tuple[float, float]], policy: AutoscalePolicy = POLICY, start: int = 1):
    """Simulates a cluster whose container count follows the decisions at once."""
    scaler = Autoscaler(policy)
    n = start
    out = []
    for t, lag in trace_lag:
        d = scaler.decide(Signals(t, n, lag_ms=lag, queued=0, busy=0.1))
        out.append((t, d.action, d.desired, d.reason, d.at_max))
        n = d.desired
    return out


def test_step_load_scales_out_to_the_bound_then_in_to_the_minimum() -> None:
    # one round a second: 10 s idle, 60 s of lag above the target, 120 s idle again
    lags = [(float(t), 100.0) for t in range(10)]
    lags += [(float(t), 8000.0) for t in range(10, 70)]
    lags += [(float(t), 50.0) for t in range(70, 190)]
    trace = cluster(lags)
    acts = [(t, a, n) for t, a, n, _r, _m in trace if a != HOLD]
    # out after 5 s of pressure, then every 10 s cool-down (each needing 5 s of pressure again)
    assert acts[0] == (15.0, OUT, 2)
    assert acts[1] == (25.0, OUT, 3)
    # then at the maximum: holds with at_max while the lag stays high
    at_max = [t for t, a, _n, r, m in trace if r == "at_max"]
    assert at_max and all(m for _t, _a, _n, r, m in trace if r == "at_max")
    assert min(at_max) == 25.0 + 1 and max(at_max) == 69.0
    # in: 20 s of calm after t=70, then one at a time every 30 s
    ins = [x for x in acts if x[1] == IN]
    assert ins == [(90.0, IN, 2), (120.0, IN, 1)]
    assert trace[-1][2] == 1 and trace[-1][3] == "at_min"


def test_short_spikes_do_not_scale_out() -> None:
    lags = []
    for t in range(0, 120):
        lags.append((float(t), 9000.0 if t % 10 < 4 else 100.0))  # 4 s spikes, out_after 5 s
    trace = cluster(lags)
    assert [a for _t, a, *_ in trace if a != HOLD] == []
    assert {r for *_x, r, _m in trace} <= {"sustain", "steady", "at_min"}


def test_hysteresis_band_holds_steady() -> None:
    # between the low mark (500 ms) and the target (2000 ms): neither pressure nor calm
    trace = cluster([(float(t), 1200.0) for t in range(200)], start=2)
    assert all(a == HOLD and r == "steady" for _t, a, _n, r, _m in trace)


def test_scale_in_waits_for_calm_to_last_and_restarts_after_a_blip() -> None:
    lags = (
        [(float(t), 10.0) for t in range(15)] + [(15.0, 1500.0)] + [(float(t), 10.0) for t in range(16, 60)]
    )
    trace = cluster(lags, start=3)
    ins = [(t, n) for t, a, n, *_ in trace if a == IN]
    # calm from 0 would give an in at 20; the blip at 15 restarts the clock: 16 + 20 = 36
    assert ins[0] == (36.0, 2)


def test_bounds_act_at_once() -> None:
    scaler = Autoscaler(POLICY)
    d = scaler.decide(Signals(0.0, 0))
    assert (d.action, d.desired, d.reason) == (OUT, 1, "below_min")
    d = scaler.decide(Signals(1.0, 5, lag_ms=9000.0))
    assert (d.action, d.desired, d.reason) == (IN, 4, "above_max")


def test_changes_in_flight_hold() -> None:
    scaler = Autoscaler(POLICY)
    for t in range(30):
        d = scaler.decide(Signals(float(t), 1, joining=1, lag_ms=9000.0))
        assert (d.action, d.reason, d.current) == (HOLD, "settling", 2)
    d = scaler.decide(Signals(30.0, 2, draining=1, lag_ms=0.0, queued=0, busy=0.0))
    assert (d.action, d.reason) == (HOLD, "settling")
    # pressure after the change must last out_after_s again
    d = scaler.decide(Signals(31.0, 2, lag_ms=9000.0))
    assert d.reason == "sustain"


def test_queue_busy_and_slots_are_pressure_too() -> None:
    p = AutoscalePolicy(max_containers=5, out_after_s=0, out_cooldown_s=0, queue_high=100, busy_high=0.7)
    scaler = Autoscaler(p)
    assert scaler.decide(Signals(0.0, 1, lag_ms=0.0, queued=500)).action == OUT
    assert scaler.decide(Signals(1.0, 2, lag_ms=0.0, busy=0.9)).action == OUT
    d = scaler.decide(Signals(2.0, 3, lag_ms=0.0, tasks=40, slots=10))
    assert d.action == OUT and "slots" in d.detail


def test_scale_in_never_below_what_the_tasks_need() -> None:
    p = AutoscalePolicy(min_containers=1, max_containers=5, in_after_s=0, in_cooldown_s=0)
    scaler = Autoscaler(p)
    n = 5
    for t in range(20):
        d = scaler.decide(Signals(float(t), n, lag_ms=0.0, queued=0, busy=0.0, tasks=25, slots=10))
        n = d.desired
    assert n == 3 and d.reason == "at_min"


def test_unknown_lag_never_scales_in() -> None:
    p = AutoscalePolicy(min_containers=1, max_containers=5, in_after_s=0, in_cooldown_s=0)
    scaler = Autoscaler(p)
    for t in range(10):
        d = scaler.decide(Signals(float(t), 4, lag_ms=None, queued=0, busy=0.0))
        assert d.action == HOLD and d.reason == "steady"


def test_step_out_is_bounded_and_cooldown_applies() -> None:
    p = AutoscalePolicy(max_containers=4, out_after_s=0, out_cooldown_s=10, step_out=3)
    scaler = Autoscaler(p)
    d = scaler.decide(Signals(0.0, 2, lag_ms=10_000.0))
    assert (d.action, d.desired) == (OUT, 4)
    scaler2 = Autoscaler(AutoscalePolicy(max_containers=9, out_after_s=0, out_cooldown_s=10))
    assert scaler2.decide(Signals(0.0, 1, lag_ms=10_000.0)).action == OUT
    assert scaler2.decide(Signals(5.0, 2, lag_ms=10_000.0)).reason == "cooldown"
    assert scaler2.decide(Signals(10.0, 2, lag_ms=10_000.0)).action == OUT


def test_history_is_bounded() -> None:
    scaler = Autoscaler(POLICY, keep=5)
    for t in range(20):
        scaler.decide(Signals(float(t), 1, lag_ms=0.0))
    assert len(scaler.history) == 5 and scaler.history[-1].reason == "at_min"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_containers": 3, "max_containers": 2},
        {"min_containers": -1},
        {"target_lag_ms": 0},
        {"low_lag_ms": 9000.0, "target_lag_ms": 5000.0},
        {"busy_low": 0.9, "busy_high": 0.8},
        {"queue_low": 10, "queue_high": 5},
        {"step_out": 0},
        {"in_after_s": -1},
    ],
)
def test_policy_rejects_impossible_knobs(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        AutoscalePolicy(**kwargs)
