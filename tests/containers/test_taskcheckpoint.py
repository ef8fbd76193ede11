"""The task-checkpoint messages (:mod:`linkstream.containers.taskcheckpoint`) and the
leader's collection of their answers (:mod:`linkstream.cluster.tasksnapshots`)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from linkstream.cluster.tasksnapshots import Request, TaskSnapshots
from linkstream.containers.protocol import ProtocolError, decode
from linkstream.containers.taskcheckpoint import (
    RestoreTask,
    SnapshotTasks,
    TaskRestored,
    TasksSnapped,
    decode_task,
    encode_task,
    task_kind,
)
from linkstream.operators.state import QueryState, decode_state, encode_state
from linkstream.store.checkpoints import CheckpointError


def _wire(frames: list) -> list[bytes]:
    return [bytes(memoryview(f)) for f in frames]  # as ZeroMQ delivers them


def test_messages_round_trip_and_are_not_protocol_messages() -> None:
    state = QueryState(
        {"v": 2, "query": "q", "c": 5, "rows": 1}, [np.arange(6, dtype=np.int64).reshape(2, 3)]
    )
    messages = [
        SnapshotTasks("r1", "00000007-ab", 7, 5000, "file:///x", {"q": "tasks-00000007-ab/t1"}),
        TasksSnapped(
            "r1", "oc-1", "00000007-ab", 7, {"q": {"key": "k", "size": 3}}, {"p": "router"}, "", 0.5, 1.0
        ),
        RestoreTask("r1", "q", 5000, list(encode_state(state))),
        TaskRestored("r1", "oc-1", "q", False, "rebuilt"),
    ]
    for m in messages:
        frames = _wire(encode_task(m))
        assert task_kind(frames) is not None
        with pytest.raises(ProtocolError):  # the runtime's decoder refuses them: they come here
            decode(frames)
        got = decode_task(frames)
        if isinstance(m, RestoreTask):
            assert isinstance(got, RestoreTask) and (got.query, got.c) == ("q", 5000)
            assert (decode_state(got.frames).arrays[0] == state.arrays[0]).all()
        else:
            assert got == m
    assert task_kind([b"\x80"]) is None and task_kind([]) is None


def test_the_leader_waits_for_every_container_and_fails_an_incomplete_checkpoint() -> None:
    ts = TaskSnapshots("r1")
    req = Request("tok", 7, 5000, {"oc-1": ["a", "b"], "oc-2": ["c"]}, {"d": "no container answers it"})
    pumped = []

    def answer() -> None:
        pumped.append(1)
        if len(pumped) == 3:
            for m in (
                TasksSnapped("r1", "oc-1", "tok", 7, {"a": {"key": "ka"}}, {"b": "router"}),
                TasksSnapped("r0", "oc-2", "tok", 7, {"c": {"key": "old run"}}, {}),  # another run's
                TasksSnapped("r1", "oc-2", "tok", 7, {"c": {"key": "kc"}}, {}, "", 0.25),
            ):
                assert ts.on_frames(_wire(encode_task(m)))

    objects, errors, copy_s = ts.wait(req, answer, lambda _c: False, timeout=10)
    assert objects == {"a": {"key": "ka"}, "c": {"key": "kc"}}
    assert errors == {"b": "router", "d": "no container answers it"} and copy_s == 0.25
    with pytest.raises(CheckpointError, match="oc-2 left the run"):
        ts.wait(Request("t2", 8, 6000, {"oc-2": ["c"]}), lambda: None, lambda c: c == "oc-2", timeout=10)
    with pytest.raises(CheckpointError, match="oc-1 did not answer within 0.2s"):
        ts.wait(Request("t3", 8, 6000, {"oc-1": ["a"]}), lambda: None, lambda _c: False, timeout=0.2)
    failed = TasksSnapped("r1", "oc-1", "t4", 8, {}, {}, "cannot write task snapshots to s3://b/p: denied")
    threading.Timer(0.05, lambda: ts.on_frames(_wire(encode_task(failed)))).start()
    with pytest.raises(CheckpointError, match="denied; checkpoint incomplete"):
        ts.wait(Request("t4", 8, 6000, {"oc-1": ["a"]}), lambda: None, lambda _c: False, timeout=10)


def test_the_wait_counts_from_the_first_pump_that_returned() -> None:
    """A pump queued behind pushes on the leader's worker does not use up the timeout."""
    ts = TaskSnapshots("r1")
    req = Request("slow", 9, 7000, {"oc-1": ["a"]})
    calls = []

    def slow_pump() -> None:  # the worker busy for 0.5 s; the answer is read by the next pump
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.5)
        else:
            ts.on_frames(_wire(encode_task(TasksSnapped("r1", "oc-1", "slow", 9, {"a": {"key": "k"}}, {}))))

    objects, _, _ = ts.wait(req, slow_pump, lambda _c: False, timeout=0.2)
    assert objects == {"a": {"key": "k"}}
