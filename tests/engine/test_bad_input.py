"""Bad input through the whole ``linkstream replay`` command: clear one-line errors,
skipped-and-reported stream lines, nothing accepted lost, never a traceback."""

from __future__ import annotations

import json

from linkstream.cli import main

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"

GOOD_Q = f"""PREFIX ex: <{EX}>
SELECT ?o ?v WHERE {{ STREAM <{EX}s> [RANGE 2s SLIDE 1s] {{ ?o ex:v ?v }} }}"""


def element(k: int, ms: int, extra: str = "") -> str:
    g = f"<{EX}el{k}>"
    sec, milli = divmod(ms, 1000)
    ts = f'"1970-01-01T00:00:{sec:02d}.{milli:03d}Z"^^<{XSD}dateTime>'
    return f'{g} {PROV} {ts} .\n<{EX}o{k}> <{EX}v> "{k}"^^<{XSD}integer> {g} .\n{extra}'


def run(tmp_path, query: str, stream_text: str | None, *extra: str):
    q = tmp_path / "q.rq"
    q.write_text(query)
    args = ["replay", "--query", str(q), "--out", str(tmp_path / "out.jsonl"), "--stats"]
    if stream_text is not None:
        s = tmp_path / "s.nq"
        s.write_text(stream_text)
        args += ["--stream", f"{EX}s={s}"]
    return main(args + list(extra))


def rows(tmp_path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]


def test_broken_lines_are_reported_skipped_and_nothing_accepted_is_lost(tmp_path, capsys):
    good = "".join(element(k, 300 * k) for k in range(1, 11))
    broken = (
        element(1, 300)
        + "this is not rdf\n"
        + element(2, 600, f'<{EX}o2> <{EX}v> "unterminated {EX}el2> .\n')
        + f"<{EX}x> <{EX}y> <{EX}z> <{EX}never-declared> .\n"
        + "".join(element(k, 300 * k) for k in range(3, 11))
        + f'<{EX}el99> {PROV} "yesterday"^^<{XSD}dateTime> .\n'
    )
    assert run(tmp_path, GOOD_Q, good) == 0
    want = rows(tmp_path)
    capsys.readouterr()
    assert run(tmp_path, GOOD_Q, broken) == 0
    err = capsys.readouterr().err
    assert rows(tmp_path) == want and want
    assert "s.nq:3: rejected" in err
    assert "rejected lines in stream files: 4" in err


def test_late_elements_are_dropped_and_counted(tmp_path, capsys):
    text = element(1, 1000) + element(2, 3000) + element(3, 2000) + element(4, 3500)
    assert run(tmp_path, GOOD_Q, text) == 0
    err = capsys.readouterr().err
    assert "1 late elements" in err
    assert all(r["binding"]["o"] != f"<{EX}o3>" for r in rows(tmp_path))


def test_bad_query_gives_one_line_error_with_position(tmp_path, capsys):
    bad = GOOD_Q.replace("SELECT ?o ?v WHERE", "SELECT ?o ?v WHER")
    assert run(tmp_path, bad, element(1, 100)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "q.rq:2:" in err[0]
    assert "Traceback" not in "\n".join(err)


def test_bad_window_gives_position(tmp_path, capsys):
    bad = GOOD_Q.replace("[RANGE 2s SLIDE 1s]", "[RANGE 2 parsecs]")
    assert run(tmp_path, bad, element(1, 100)) == 2
    err = capsys.readouterr().err
    assert "q.rq:2:" in err and "Traceback" not in err


def test_unknown_stream_iri_warns_and_reports_empty_windows(tmp_path, capsys):
    q = GOOD_Q.replace(f"<{EX}s>", f"<{EX}unknown>")
    assert run(tmp_path, q, element(1, 100) + element(2, 2500)) == 0
    err = capsys.readouterr().err
    assert f"<{EX}unknown>" in err and "not replayed" in err
    assert rows(tmp_path) == []


def test_empty_stream_file_and_empty_query_file(tmp_path, capsys):
    assert run(tmp_path, GOOD_Q, "") == 0
    assert rows(tmp_path) == []
    assert run(tmp_path, "", element(1, 100)) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_missing_files_are_clear_errors(tmp_path, capsys):
    q = tmp_path / "q.rq"
    q.write_text(GOOD_Q)
    assert main(["replay", "--query", str(q), "--stream", f"{EX}s={tmp_path}/nope.nq", "--out", "-"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["replay", "--query", str(tmp_path / "none.rq"), "--out", "-"]) == 2
    assert "cannot read query" in capsys.readouterr().err


def test_unsupported_feature_is_a_clean_error(tmp_path, capsys):
    q = GOOD_Q.replace("SELECT ?o ?v WHERE", "DESCRIBE ?o WHERE")
    assert run(tmp_path, q, element(1, 100)) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
