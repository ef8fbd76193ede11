"""Event-time rules (docs/semantics.md, "Event-time rules"): the accepted range, the
maximum forward jump per stream, and report times over a gap in work proportional to
the reports that write something.

Each bug of issue 18 item 1 is reproduced through ``linkstream replay`` in a subprocess
with a timeout of a few seconds (a hang fails the test instead of stalling the suite),
and the gap skipping is checked against the reference evaluator and against the engine
evaluating every report time.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from linkstream.cli import main
from linkstream.engine import replay as replay_mod
from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from linkstream.query.errors import QueryError
from linkstream.rdf.eventtime import (
    DEFAULT_MAX_TIME_JUMP_MS,
    EVENT_TIME_MAX,
    EventTimeError,
    check_event_time,
    check_jump,
    parse_time_jump,
    range_error,
)
from linkstream.rdf.streams import StreamReader
from tests.shared_paths import load_tool, run_oracle

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"
TIMEOUT = 20.0  # seconds: a replay of a few elements takes well under one

SELECT_Q = f"""PREFIX ex: <{EX}>
SELECT ?o ?v WHERE {{ STREAM <{EX}s> [RANGE 2s SLIDE 1s] {{ ?o ex:v ?v }} }}"""


def iso(ms: int) -> str:
    """``xsd:dateTime`` of ``ms`` (any year Python can write, 0001 on)."""
    import datetime as dt

    d = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (
        d.year,
        d.month,
        d.day,
        d.hour,
        d.minute,
        d.second,
        d.microsecond // 1000,
    )


def element(k: int, stamp: str | int, value: int | None = None) -> str:
    ts = stamp if isinstance(stamp, str) else iso(stamp)
    g = f"<{EX}el{k}>"
    v = k if value is None else value
    return (
        f'{g} {PROV} "{ts}"^^<{XSD}dateTime> .\n'
        f'<{EX}o{k}> <{EX}v> "{v}"^^<{XSD}integer> {g} .\n'
        f"<{EX}o{k}> <{EX}type> <{EX}T{k % 2}> {g} .\n"
    )


def stream(*stamps: str | int) -> str:
    return "".join(element(k, s) for k, s in enumerate(stamps, 1))


def cli_replay(tmp_path: Path, text: str, *extra: str, query: str = SELECT_Q) -> tuple[int, str, list[dict]]:
    """``linkstream replay`` in a subprocess killed after ``TIMEOUT`` seconds."""
    q = tmp_path / "q.rq"
    q.write_text(query)
    s = tmp_path / "s.nq"
    s.write_text(text)
    out = tmp_path / "out.jsonl"
    args = ["replay", "--query", str(q), "--stream", f"{EX}s={s}", "--out", str(out), *extra]
    code = f"import sys; from linkstream.cli import main; sys.exit(main({args!r}))"
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"linkstream replay did not finish within {TIMEOUT}s")
    rows = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    return p.returncode, p.stderr, rows


def values(rows: list[dict]) -> list[tuple[int, str]]:
    return sorted((r["t"], r["binding"]["v"].split('"')[1]) for r in rows)


# ---------------------------------------------------------------- the rules themselves


def test_range_and_jump_checks() -> None:
    assert range_error(0) is None and range_error(EVENT_TIME_MAX) is None
    for bad in (-1, EVENT_TIME_MAX + 1, 10**23, 10**5000, 1.5, True, "12"):
        assert range_error(bad) is not None
    assert len(range_error(10**5000) or "") < 200  # the value is shown cut, not in full
    with pytest.raises(EventTimeError, match=r"^f\.nq:3: event time -1 ms is outside"):
        check_event_time(-1, "f.nq:3")
    assert check_jump(1000 + DEFAULT_MAX_TIME_JUMP_MS, 1000, DEFAULT_MAX_TIME_JUMP_MS) == 1000 + 86_400_000
    with pytest.raises(EventTimeError) as e:
        check_jump(1_700_000_000_000, 1000, DEFAULT_MAX_TIME_JUMP_MS)
    assert e.value.reason == "jump" and "--max-time-jump" in str(e.value)
    assert check_jump(10**15, 0, 0) == 10**15 and check_jump(10**15, 0, None) == 10**15  # 0: no limit
    assert check_jump(5, None, 1) == 5  # no current time yet
    assert [parse_time_jump(x) for x in ("1d", "12h", "30m", "5s", "250ms", "1000", "0")] == [
        86_400_000,
        43_200_000,
        1_800_000,
        5000,
        250,
        1000,
        0,
    ]
    for bad in ("-1", "1y", "", "1e3", str(2**60)):
        with pytest.raises(ValueError):
            parse_time_jump(bad)


def test_window_durations_beyond_2_53_ms_are_refused_at_registration() -> None:
    eng = Engine()
    q = SELECT_Q.replace("[RANGE 2s SLIDE 1s]", "[RANGE 200000000000000000000ms SLIDE 1s]")
    with pytest.raises(QueryError, match="2\\^53"):
        eng.register(parse_continuous(q, default_name="q"))


def test_reader_rejects_out_of_range_and_far_jumps_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.nq"
    path.write_text(stream(1000, "0001-01-01T00:00:00Z", 2000, 1_700_000_000_000, 3000))
    logged: list[str] = []
    eng = Engine()
    r = StreamReader(str(path), eng.dictionary, log=logged.append)
    got = [el.t for el in r]
    assert got == [1000, 2000, 3000]
    assert r.stats.rejected_elements == 2 and r.stats.late == 0 and r.stats.rejected == 0
    assert any(m.startswith(f"{path}:4: rejected element:") and "outside" in m for m in logged)
    assert any(m.startswith(f"{path}:10: rejected element:") and "--max-time-jump" in m for m in logged)
    # no limit: the far element is accepted, and then what follows it is late
    r = StreamReader(str(path), eng.dictionary, log=logged.append, max_time_jump_ms=0)
    assert [el.t for el in r] == [1000, 2000, 1_700_000_000_000]
    assert r.stats.late == 1 and r.stats.rejected_elements == 1


# ---------------------------------------------------------------- the measured bugs, through the CLI


def test_element_dated_year_one_is_rejected_and_the_replay_finishes(tmp_path: Path) -> None:
    good = stream(1000, 2000, 3000)
    code, _, want = cli_replay(tmp_path, good)
    assert code == 0 and want
    bad = element(1, 1000) + element(9, "0001-01-01T00:00:00Z") + element(2, 2000) + element(3, 3000)
    code, err, rows = cli_replay(tmp_path, bad)
    assert code == 0
    assert "s.nq:4: rejected element: event time -62135596800000 ms is outside" in err
    assert "elements rejected for their time" in err
    assert values(rows) == values(want)


def test_far_future_element_is_rejected_not_poisoning_the_rest_of_the_file(tmp_path: Path) -> None:
    good = stream(1000, 2000, 3000, 4000)
    code, _, want = cli_replay(tmp_path, good)
    text = element(1, 1000) + element(2, 2000) + element(9, 1_700_000_000_000) + element(3, 3000)
    text += element(4, 4000)
    code, err, rows = cli_replay(tmp_path, text)
    assert code == 0
    assert "s.nq:7: rejected element:" in err and "--max-time-jump" in err
    assert "0 late elements, 1 elements rejected for their time" in err
    assert values(rows) == values(want)


def test_a_gap_of_1_7e12_ms_without_jump_limit_costs_the_reports_that_write(tmp_path: Path) -> None:
    far = 1_700_000_000_000
    text = stream(1000, 2000, far, far + 1000)
    code, err, rows = cli_replay(tmp_path, text, "--max-time-jump", "0", "--stats")
    assert code == 0, err
    assert {r["t"] for r in rows} == {2000, 3000, 4000, far + 1000, far + 2000}
    assert "reports=1700000001 " in err  # every report time is counted, few are evaluated


def test_file_with_no_accepted_element_is_a_warning(tmp_path: Path) -> None:
    code, err, rows = cli_replay(tmp_path, element(1, "1960-01-01T00:00:00Z"))
    assert code == 0 and rows == []
    assert "warning: stream file" in err and "no element accepted" in err


def test_max_time_jump_flag(tmp_path: Path) -> None:
    text = stream(1000, 2000, 2000 + 3_600_000)
    code, err, _ = cli_replay(tmp_path, text, "--max-time-jump", "30m")
    assert code == 0 and "1 elements rejected for their time" in err
    code, err, _ = cli_replay(tmp_path, text, "--max-time-jump", "2h")
    assert code == 0 and "0 elements rejected for their time" in err


def test_bad_max_time_jump_value_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["replay", "--query", "x.rq", "--out", "-", "--max-time-jump", "soon"])
    assert e.value.code == 2 and "bad duration" in capsys.readouterr().err


# ---------------------------------------------------------------- gap skipping gives the same results

STATIC = f"""<{EX}T0> <{EX}label> "even" .
<{EX}T1> <{EX}label> "odd" .
<{EX}T2> <{EX}label> "never" .
"""

GAP_QUERIES = {
    "rsel": SELECT_Q,
    "istream": f"""PREFIX ex: <{EX}> PREFIX : <{EX}w#>
REGISTER ISTREAM <istream> AS SELECT ?o FROM NAMED WINDOW :w ON <{EX}s> [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW :w {{ ?o ex:v ?v }} }}""",
    "dstream": f"""PREFIX ex: <{EX}> PREFIX : <{EX}w#>
REGISTER DSTREAM <dstream> AS SELECT ?o FROM NAMED WINDOW :w ON <{EX}s> [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW :w {{ ?o ex:v ?v }} }}""",
    "count": f"""PREFIX ex: <{EX}>
SELECT (COUNT(?o) AS ?n) WHERE {{ STREAM <{EX}s> [RANGE 2s SLIDE 1s] {{ ?o ex:v ?v }} }}""",
    "grouped": f"""PREFIX ex: <{EX}>
SELECT ?ty (COUNT(?o) AS ?n) WHERE {{ STREAM <{EX}s> [RANGE 5s SLIDE 2s] {{ ?o ex:type ?ty }} }} GROUP BY ?ty""",
    "ask": f"""PREFIX ex: <{EX}>
ASK WHERE {{ STREAM <{EX}s> [RANGE 2s SLIDE 1s] {{ ?o ex:v ?v }} }}""",
    "minus": f"""PREFIX ex: <{EX}>
SELECT ?ty ?l WHERE {{ ?ty ex:label ?l MINUS {{ STREAM <{EX}s> [RANGE 4s SLIDE 1s] {{ ?o ex:type ?ty }} }} }}""",
    "optional": f"""PREFIX ex: <{EX}>
SELECT ?ty ?o WHERE {{ ?ty ex:label ?l OPTIONAL {{ STREAM <{EX}s> [RANGE 3s SLIDE 1s] {{ ?o ex:type ?ty }} }} }}""",
    "triples": f"""PREFIX ex: <{EX}>
SELECT ?o WHERE {{ STREAM <{EX}s> [TRIPLES 2] {{ ?o ex:v ?v }} }}""",
    "now": f"""PREFIX ex: <{EX}>
SELECT ?o WHERE {{ STREAM <{EX}s> [NOW] {{ ?o ex:v ?v }} }}""",
    "twosteps": f"""PREFIX ex: <{EX}>
SELECT ?o ?p WHERE {{ {{ STREAM <{EX}s> [RANGE 3s SLIDE 3s] {{ ?o ex:v ?v }} }} UNION
 {{ STREAM <{EX}s> [RANGE 1500ms SLIDE 500ms] {{ ?p ex:type ?t }} }} }}""",
    "construct": f"""PREFIX ex: <{EX}>
CONSTRUCT {{ ?o ex:seen ex:yes }} WHERE {{ STREAM <{EX}s> [RANGE 2s SLIDE 1s] {{ ?o ex:v ?v }} }}""",
}

#: elements with quiet gaps of a few hundred report times between bursts
GAP_TIMES = [1000, 1500, 2200, 2200, 400_000, 400_700, 401_000, 950_000, 1_300_300, 1_300_900, 1_302_000]


def _engine_run(tmp_path: Path, queries: dict[str, str], *, skip: bool, max_reports: int | None = None):
    qs = {}
    eng = Engine(log_fn=lambda m: None)
    from linkstream.rdf.static import load_graph

    st = tmp_path / "static.nt"
    st.write_text(STATIC)
    eng.add_static(None, load_graph(str(st), eng.dictionary))
    for name, text in queries.items():
        qs[name] = eng.register(parse_continuous(text, default_name=name))
    s = tmp_path / "gap.nq"
    s.write_text(stream(*GAP_TIMES))
    buf = io.StringIO()
    ticks = []
    orig = eng.tick

    def tick(c, names, **kw):
        ticks.append(c)
        return orig(c, names, **kw)

    eng.tick = tick  # type: ignore[method-assign]
    span = replay_mod._SKIP_SPAN
    if not skip:
        replay_mod._SKIP_SPAN = 10**30
    try:
        replay(eng, list(qs.values()), [(f"{EX}s", str(s))], buf, max_reports=max_reports)
    finally:
        replay_mod._SKIP_SPAN = span
    lines = buf.getvalue().splitlines()
    return lines, ticks, {n: q.stats.reports for n, q in qs.items()}


def test_gap_skipping_writes_exactly_what_evaluating_every_report_time_writes(tmp_path: Path) -> None:
    full, full_ticks, full_reports = _engine_run(tmp_path, GAP_QUERIES, skip=False)
    fast, fast_ticks, fast_reports = _engine_run(tmp_path, GAP_QUERIES, skip=True)
    assert Counter(fast) == Counter(full)
    assert fast_reports == full_reports
    # queries writing on empty windows (count, ask, minus, optional) keep their ticks;
    # without them the gaps cost a handful of ticks
    # ([TRIPLES n] and [NOW] are never empty once the stream has data: they write too)
    writing = ("count", "ask", "minus", "optional", "triples", "now")
    quiet = {k: v for k, v in GAP_QUERIES.items() if k not in writing}
    full_q, full_q_ticks, _ = _engine_run(tmp_path, quiet, skip=False)
    fast_q, fast_q_ticks, _ = _engine_run(tmp_path, quiet, skip=True)
    assert Counter(fast_q) == Counter(full_q)
    assert len(fast_q_ticks) < len(full_q_ticks) / 20, (len(fast_q_ticks), len(full_q_ticks))


def test_gap_skipping_keeps_max_reports(tmp_path: Path) -> None:
    quiet = {k: GAP_QUERIES[k] for k in ("rsel", "istream", "triples", "twosteps")}
    for n in (3, 500, 1000, 1296):
        full, _, full_reports = _engine_run(tmp_path, quiet, skip=False, max_reports=n)
        fast, _, fast_reports = _engine_run(tmp_path, quiet, skip=True, max_reports=n)
        assert Counter(fast) == Counter(full) and fast_reports == full_reports


def test_gap_skipping_equals_the_reference_evaluator(tmp_path: Path) -> None:
    load_tool("oracle")
    from tests.result_compare import load

    # (without "twosteps": a 500 ms step next to [NOW] / [TRIPLES n] windows makes the
    # engine repeat stale RStream rows with or without gap skipping, a bug of its own)
    queries = {k: v for k, v in GAP_QUERIES.items() if k != "twosteps"}
    fast, _, _ = _engine_run(tmp_path, queries, skip=True)
    got = tmp_path / "got.jsonl"
    got.write_text("\n".join(fast) + "\n")
    st = tmp_path / "static.nt"
    want = run_oracle(queries, [(f"{EX}s", str(tmp_path / "gap.nq"))], [str(st)], tmp_path)
    a, b = load(got), load(want)
    assert a == b
