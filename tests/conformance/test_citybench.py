"""Every CityBench query of the shared manifest, replayed by LinkStream, equals the oracle."""

from __future__ import annotations

import json

import pytest

from linkstream.cli import main as cli_main
from tests.shared_paths import SHARED, load_tool, shared_or_skip


def _manifest() -> list:
    path = SHARED / "citybench" / "manifest.json"
    if not path.exists():  # tests/conformance/test_slice.py runs a slice of it from the repository
        reason = f"needs the full shared CityBench corpus: not found at {SHARED} (set LINKSTREAM_SHARED)"
        return [pytest.param(None, id="no-shared-corpus", marks=pytest.mark.skip(reason=reason))]
    return [pytest.param(q, id=q["id"]) for q in json.loads(path.read_text())["queries"]]


def replay_args(q: dict, root, out: str, base: str) -> list[str]:
    args = ["replay", "--query", str(root / q["query"]), "--base", base, "--out", out, "--quiet"]
    for s in q["streams"]:
        args += ["--stream", f"{s['iri']}={root / s['path']}"]
    for s in q["statics"]:
        args += ["--static", (f"{s['iri']}={root / s['path']}" if s["iri"] else str(root / s["path"]))]
    if q.get("default_step"):
        args += ["--default-step", str(q["default_step"])]
    if q.get("max_reports"):
        args += ["--max-reports", str(q["max_reports"])]
    return args


@pytest.mark.conformance
@pytest.mark.parametrize("q", _manifest())
def test_citybench_query_equals_oracle(q, tmp_path, capsys):
    shared = shared_or_skip()
    man = json.loads((shared / "citybench" / "manifest.json").read_text())
    root = shared  # manifest paths are relative to the shared folder itself
    out = tmp_path / f"{q['id']}.jsonl"
    rc = cli_main(replay_args(q, root, str(out), man.get("base", "http://localhost/")))
    assert rc == 0, capsys.readouterr().err
    compare = load_tool("compare_results")
    expected = root / q["expected"]
    argv = [str(expected), str(out)]
    times = expected.with_name(expected.name + ".times")
    if q.get("max_reports") and times.exists():
        argv += ["--times", str(times)]
    rc = compare.main(argv)
    report = capsys.readouterr().out
    assert rc == 0, report


#: the queries also run on the numpy kernels (the path of an install without a C compiler):
#: joins of two and three streams, static joins, filters, aggregates, both dialects
NUMPY_KERNEL_QUERIES = {
    "csparql-Q1", "csparql-Q3", "csparql-Q5", "csparql-Q8", "csparql-Q10_5", "csparql-Q12",
    "cqels-Q2", "cqels-Q4", "cqels-Q6", "cqels-Q10", "cqels-Q11", "cqels-traffic_parking_1",
}  # fmt: skip


@pytest.mark.conformance
@pytest.mark.parametrize(
    "q", [p for p in _manifest() if p.values[0] is None or p.values[0]["id"] in NUMPY_KERNEL_QUERIES]
)
def test_citybench_query_equals_oracle_on_the_numpy_kernels(q, tmp_path, capsys):
    from linkstream.operators import batch

    was = batch.use_native(False)
    try:
        test_citybench_query_equals_oracle(q, tmp_path, capsys)
    finally:
        batch.use_native(was)
