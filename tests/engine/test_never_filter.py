"""``FILTER(!BOUND(?v))`` of a variable every solution binds passes no row: the planner
plans the filtered pattern as an empty constant (no window, join or filter work per
report; CityBench csparql-Q11).  The results are those of the same filter evaluated row
by row (written so that the planner cannot fold it), at every report, for ASK, SELECT and
an aggregate; a variable an OPTIONAL may leave unbound is not folded."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.dictionary import open_dictionary
from tests.query.test_parse_store import EX, write_inputs

HEAD = f"PREFIX ex: <{EX}>\n"
WINDOW = f"FROM STREAM <{EX}s> [RANGE 3s STEP 1s]"

QUERIES = {
    "ask": f"ASK {WINDOW} WHERE {{ ?a ex:p ?b . ?b ex:q ?c FILTER(%s) }}",
    "select": f"SELECT ?a ?b {WINDOW} WHERE {{ ?a ex:p ?b FILTER(%s && ?b != ex:x) }}",
    "count": f"SELECT (COUNT(*) AS ?n) {WINDOW} WHERE {{ ?a ex:p ?b FILTER(%s) }}",
    "optional": f"SELECT ?a ?c {WINDOW} WHERE {{ ?a ex:p ?b OPTIONAL {{ ?b ex:q ?c }} FILTER(%s) }}",
}
FOLDED = {"ask": "!BOUND(?a)", "select": "!BOUND(?b)", "count": "!BOUND(?a)", "optional": "!BOUND(?c)"}


def _row_by_row(test: str) -> str:
    return f"IF(true, {test}, true)"  # (the same value; not a conjunct the planner reads)


def _replay(tmp: Path, name: str, text: str) -> str:
    d = tmp / name
    d.mkdir(exist_ok=True)
    (d / "q.rq").write_text(HEAD + text)
    out = d / "out.jsonl"
    args = [
        "replay",
        "--query",
        str(d / "q.rq"),
        "--stream",
        f"{EX}s={write_inputs(tmp)[0]}",
        "--quiet",
        "--out",
        str(out),
    ]
    assert cli_main(args) == 0
    return out.read_text()


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_a_filter_no_row_passes_gives_the_results_of_the_row_by_row_filter(name: str, tmp_path: Path) -> None:
    test = FOLDED[name]
    folded = _replay(tmp_path, "folded", QUERIES[name] % test)
    row_by_row = _replay(tmp_path, "row_by_row", QUERIES[name] % _row_by_row(test))
    assert folded == row_by_row
    assert len(folded.splitlines()) >= (10 if name in ("ask", "count", "optional") else 0)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_only_a_variable_every_solution_binds_is_folded(name: str) -> None:
    engine = Engine(open_dictionary("memory:"))
    engine.declare_streams({EX + "s"})
    plan = engine.register(parse_continuous(HEAD + QUERIES[name] % FOLDED[name])).explain()
    folded = "Values rows=0" in plan and "Window" not in plan
    assert folded == (name != "optional"), plan
