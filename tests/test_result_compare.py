"""``tests/result_compare.py`` follows SEMANTICS.md section 6 and agrees with ``shared/tools/compare_results.py``."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from tests import result_compare as rc
from tests.shared_paths import SHARED, SLICE, load_tool

X = "http://www.w3.org/2001/XMLSchema#"

#: (a, b, equal?) single terms, as N-Triples text
TERMS = [
    (f'"54"^^<{X}integer>', f'"54.0"^^<{X}double>', True),
    (f'"54"^^<{X}int>', f'"+054"^^<{X}integer>', True),
    (f'"0.1"^^<{X}decimal>', f'"1E-1"^^<{X}double>', True),
    (f'"1"^^<{X}integer>', f'"2"^^<{X}integer>', False),
    ('"cat"', f'"cat"^^<{X}string>', True),
    ('"cat"@EN-gb', '"cat"@en-GB', True),
    ('"cat"@en', '"cat"', False),
    (f'"1"^^<{X}boolean>', f'"true"^^<{X}boolean>', True),
    (f'"0"^^<{X}boolean>', f'"true"^^<{X}boolean>', False),
    ("_:a", "_:b", True),
    ("<http://e/a>", "<http://e/b>", False),
    ("<http://e/a>", '"http://e/a"', False),
    ('"a\\"b\\nc"', '"a\\u0022b\\nc"', True),
    (f'"x"^^<{X}integer>', f'"x"^^<{X}integer>', True),
    (f'"NaN"^^<{X}double>', f'"NaN"^^<{X}float>', True),
]


@pytest.mark.parametrize("a,b,equal", TERMS)
def test_term_equality(a: str, b: str, equal: bool) -> None:
    assert (rc.one_term(a) == rc.one_term(b)) is equal


def test_numbers_within_tolerance_pair_up() -> None:
    def row(v: str) -> tuple:
        return ("b", (("v", rc.one_term(f'"{v}"^^<{X}double>')),))

    a = Counter([row("0.30000000000000004"), row("1")])
    b = Counter([row("0.3"), row("1.0")])
    assert rc.equal_multisets(a, b)
    assert not rc.equal_multisets(a, Counter([row("0.31"), row("1")]))
    assert not rc.equal_multisets(a, Counter([row("1")]))


def test_missing_report_time_counts_as_empty(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"query": "Q", "t": 1, "ask": false}\n', encoding="utf-8")
    b.write_text("", encoding="utf-8")
    assert rc.differences(rc.load(a), rc.load(b))
    b.write_text('{"query": "Q", "t": 1, "ask": false}\n\n', encoding="utf-8")
    assert not rc.differences(rc.load(a), rc.load(b))


def _perturbed(rows: list[dict], seed: int) -> list[dict]:
    """The rows with some terms rewritten to equal or different forms, some rows dropped."""
    rnd = random.Random(seed)
    out = []
    for obj in rows:
        obj = json.loads(json.dumps(obj))
        for k, v in obj.get("binding", {}).items():
            if rnd.random() < 0.2:
                obj["binding"][k] = rnd.choice([v.replace("^^", "@en^^"), v.upper(), v + " ", "_:z"])
        if rnd.random() > 0.05:
            out.append(obj)
    return out


@pytest.mark.skipif(
    not (SHARED / "tools" / "compare_results.py").is_file(),
    reason=f"needs the shared reference tool tools/compare_results.py: not found at {SHARED}",
)
def test_agrees_with_the_shared_comparison(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    shared = load_tool("compare_results")
    for a, b, _ in TERMS:
        assert rc.one_term(a) == shared.one_term(a) and rc.one_term(b) == shared.one_term(b), (a, b)
    for k, path in enumerate(sorted((SLICE / "expected").glob("*.jsonl"))):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for seed in range(3):
            other = tmp_path / f"{k}-{seed}.jsonl"
            other.write_text(
                "".join(json.dumps(r) + "\n" for r in _perturbed(rows, seed + k)), encoding="utf-8"
            )
            ours = not rc.differences(rc.load(path), rc.load(other))
            theirs = shared.main([str(path), str(other)]) == 0
            capsys.readouterr()
            assert ours == theirs, (path.name, seed)
