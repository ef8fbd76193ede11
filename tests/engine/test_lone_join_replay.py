"""``linkstream replay`` (one process, nothing else shares its queries' plans) plans a lone
routable join directly (``Engine(lone_joins=True)``): no router until a second query of the
join's signature comes, and the same lines as an engine that routes it from the start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import linkstream.engine.embedded as embedded
from linkstream.cli.main import main as cli_main
from linkstream.operators.router import RouterOperator
from linkstream.operators.switch import SwitchOperator
from tests.query.test_parse_store import EX, write_inputs

QUERY = (
    f"PREFIX : <{EX}> SELECT * WHERE {{ STREAM :s1 [RANGE 2500ms SLIDE 500ms] {{ ?x :p ?y . ?y :q ?z }} }}"
)


def _replay(tmp: Path, monkeypatch: pytest.MonkeyPatch, lone: bool) -> tuple[list[dict], Any]:
    engines: list[embedded.Engine] = []

    class Recording(embedded.Engine):
        def __init__(self, *a: Any, **kw: Any) -> None:
            if not lone:
                kw["lone_joins"] = False
            super().__init__(*a, **kw)
            engines.append(self)

    monkeypatch.setattr(embedded, "Engine", Recording)
    out = tmp / f"out-{lone}.jsonl"
    stream, _ = write_inputs(tmp)
    args = ["replay", "--query", str(tmp / "q.rq"), "--stream", f"{EX}s1={stream}"]
    assert cli_main([*args, "--out", str(out), "--quiet"]) == 0
    (eng,) = engines
    return [json.loads(line) for line in out.read_text().splitlines()], eng


def test_replay_plans_a_lone_join_without_a_router(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "q.rq").write_text(QUERY)
    got, eng = _replay(tmp_path, monkeypatch, lone=True)
    (rq,) = eng.queries.values()
    assert any(isinstance(op, SwitchOperator) and not op.switched for op in rq.ops)
    assert not any(isinstance(op, RouterOperator) for op in eng.operators.values())
    want, ref = _replay(tmp_path, monkeypatch, lone=False)
    assert any(isinstance(op, RouterOperator) for op in ref.operators.values())
    assert got and got == want
