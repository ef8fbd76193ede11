"""Node paths and payload encoding shared by the recipes (no server needed)."""

from __future__ import annotations

import pytest

from linkstream.scheduler.layout import ClusterLayout, decode, encode, validate_name
from linkstream.scheduler.state import TaskSpec


def test_paths_live_under_the_configurable_root() -> None:
    layout = ClusterLayout()
    assert layout.container("oc-1") == "/linkstream/containers/oc-1"
    assert layout.task("sig-ab12") == "/linkstream/tasks/sig-ab12"
    assert layout.assignment("oc-1", "sig-ab12") == "/linkstream/assignments/oc-1/sig-ab12"
    assert layout.migration("sig-ab12") == "/linkstream/migrations/sig-ab12"
    assert layout.query("q1") == "/linkstream/queries/q1"
    assert layout.leader == "/linkstream/leader"
    assert ClusterLayout("/").config == "/config"
    assert ClusterLayout("/prod/ls").drain_request("oc-2") == "/prod/ls/drain/oc-2"
    with pytest.raises(ValueError):
        ClusterLayout("relative")
    with pytest.raises(ValueError):
        ClusterLayout("/trailing/")


@pytest.mark.parametrize("name", ["", "a/b", ".", "..", "x\x00y"])
def test_names_that_cannot_be_one_path_segment_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        validate_name(name)
    with pytest.raises(ValueError):
        ClusterLayout().task(name)


def test_payloads_round_trip_as_json_objects() -> None:
    spec = TaskSpec("sig-1", weight=2.5, colocate_with="q7", stateful=True)
    data = encode(spec.to_json())
    assert data.startswith(b"{") and TaskSpec.from_json(decode(data)) == spec
    assert decode(b"") == {} and decode(None) == {}
    with pytest.raises(ValueError):
        decode(b"[1, 2]")
