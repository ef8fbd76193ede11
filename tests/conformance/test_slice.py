"""A slice of CityBench, replayed by LinkStream, equals the oracle's results kept in the repository.

Runs from the project alone (no ``../shared``): the queries, trimmed streams, trimmed
sensor repository and the oracle's expected results live in ``tests/data/conformance/``
(its README says how they were made), and the results are compared with the project's
own SEMANTICS.md section 6 comparison (``tests/result_compare.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from tests.result_compare import differences, load
from tests.shared_paths import SLICE

MANIFEST = json.loads((SLICE / "slice.json").read_text(encoding="utf-8"))


def replay_args(q: dict, out: Path) -> list[str]:
    args = [
        "replay",
        "--query",
        str(SLICE / q["query"]),
        "--base",
        MANIFEST["base"],
        "--out",
        str(out),
        "--quiet",
    ]
    for s in q["streams"]:
        args += ["--stream", f"{s['iri']}={SLICE / s['path']}"]
    for s in q["statics"]:
        args += [
            "--static",
            str(SLICE / s["path"]) if s["iri"] is None else f"{s['iri']}={SLICE / s['path']}",
        ]
    if q.get("default_step"):
        args += ["--default-step", str(q["default_step"])]
    return args


def test_slice_covers_both_dialects_with_results() -> None:
    dialects = {q["dialect"] for q in MANIFEST["queries"]}
    assert dialects == {"csparql", "cqels"}
    nonempty = [q["id"] for q in MANIFEST["queries"] if (SLICE / q["expected"]).stat().st_size]
    assert len(nonempty) >= 8, nonempty


@pytest.mark.conformance
@pytest.mark.parametrize("q", MANIFEST["queries"], ids=lambda q: q["id"])
def test_slice_query_equals_oracle(q: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / f"{q['id']}.jsonl"
    rc = cli_main(replay_args(q, out))
    assert rc == 0, capsys.readouterr().err
    want, got = load(SLICE / q["expected"]), load(out)
    assert {k[0] for k in got} <= {q["name"]}
    diffs = differences(want, got)
    assert not diffs, f"{len(diffs)} (query, t) differ (oracle first):\n" + "\n".join(diffs)
