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

EX = "http://linkstream.example/lone#"
QUERY = (
    f"PREFIX : <{EX}> SELECT * WHERE {{ STREAM :s1 [RANGE 2500ms SLIDE 500ms] {{ ?x :p ?y . ?y :q ?z }} }}"
)


def _stream(path: Path) -> None:
    with path.open("w") as f:
        for i in range(12):
            g = f"<{EX}e{i}>"
            f.write(
                f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:{i // 2:02d}.{5 * (i % 2)}Z"'
                "^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
            )
            f.write(f"<{EX}a{i % 3}> <{EX}p> <{EX}b{i % 4}> {g} .\n")
            f.write(f"<{EX}b{i % 4}> <{EX}q> <{EX}c{i % 5}> {g} .\n")


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
    args = ["replay", "--query", str(tmp / "q.rq"), "--stream", f"{EX}s1={tmp / 's.nq'}"]
    assert cli_main([*args, "--out", str(out), "--quiet"]) == 0
    (eng,) = engines
    return [json.loads(line) for line in out.read_text().splitlines()], eng


def test_replay_plans_a_lone_join_without_a_router(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "q.rq").write_text(QUERY)
    _stream(tmp_path / "s.nq")
    got, eng = _replay(tmp_path, monkeypatch, lone=True)
    (rq,) = eng.queries.values()
    assert any(isinstance(op, SwitchOperator) and not op.switched for op in rq.ops)
    assert not any(isinstance(op, RouterOperator) for op in eng.operators.values())
    want, ref = _replay(tmp_path, monkeypatch, lone=False)
    assert any(isinstance(op, RouterOperator) for op in ref.operators.values())
    assert got and got == want
