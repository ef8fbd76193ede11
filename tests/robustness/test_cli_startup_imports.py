"""What a short ``linkstream replay`` loads and does before its first result (issue 16,
"start fast"): the command module imports no library, an embedded replay imports none of
the cluster / HTTP / Spark stack, and garbage collection, off during start-up, is back on
when the replay evaluates and after any return."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from linkstream.cli.main import main

#: Libraries of other commands (cluster, HTTP API, bulk load, S3): never on the replay path.
_NOT_FOR_A_REPLAY = ("kazoo", "zmq", "uvicorn", "starlette", "httpx", "pyspark", "boto3", "botocore")

_QUERY = """REGISTER QUERY q AS
PREFIX ex: <http://example.org/>
SELECT ?s ?v
FROM STREAM <http://example.org/sensors> [RANGE 3s STEP 1s]
WHERE { ?s ex:value ?v }
"""


def _inputs(tmp: Path) -> list[str]:
    stream = tmp / "stream.nq"
    lines = []
    for i in range(10):
        g = f"<http://example.org/e{i}>"
        lines.append(
            f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:{i:02d}Z"'
            "^^<http://www.w3.org/2001/XMLSchema#dateTime> ."
        )
        lines.append(f'<http://example.org/s{i % 3}> <http://example.org/value> "{i}" {g} .')
    stream.write_text("\n".join(lines) + "\n")
    (tmp / "q.rq").write_text(_QUERY)
    return ["replay", "--query", str(tmp / "q.rq"), "--stream", f"http://example.org/sensors={stream}",
            "--out", str(tmp / "out.jsonl"), "--quiet"]  # fmt: skip


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {m.split(".")[0] for m in json.loads(out.splitlines()[-1])}


def test_the_command_module_imports_no_library() -> None:
    loaded = _loaded_after("import linkstream.cli.main")
    assert not loaded & {"rdflib", "pyparsing", "numpy", *_NOT_FOR_A_REPLAY}, sorted(loaded)


def test_an_embedded_replay_imports_no_cluster_http_or_spark_library(tmp_path: Path) -> None:
    argv = _inputs(tmp_path)
    code = (
        "import gc, sys\nimport linkstream.cli.main\nm = sys.modules['linkstream.cli.main']\n"
        f"assert m.main({argv!r}) == 0\n"
        "assert gc.isenabled()"
    )
    loaded = _loaded_after(code)
    assert "rdflib" in loaded and "numpy" in loaded  # the replay did parse and evaluate
    assert not loaded & set(_NOT_FOR_A_REPLAY), sorted(loaded & set(_NOT_FOR_A_REPLAY))
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert rows and all(r["query"] == "q" for r in rows)


def test_a_linkstream_process_collects_again_after_start_up(tmp_path: Path) -> None:
    argv = _inputs(tmp_path)
    # collection is off during start-up, back on when the replay starts (which freezes them)
    code = (
        "import gc, json, sys\nimport linkstream.engine.replay as r\nimport linkstream.cli.main\n"
        "m = sys.modules['linkstream.cli.main']\n"
        "seen = []\norig = r.replay\n"
        "def spy(*a, **k):\n    seen.append([gc.isenabled(), gc.get_freeze_count()])\n    return orig(*a, **k)\n"
        f"r.replay = spy\nsys.argv = ['linkstream'] + {argv!r}\n"
        "assert m.main() == 0\nprint(json.dumps(seen))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    [[enabled, frozen]] = json.loads(p.stdout.strip().splitlines()[-1])
    assert enabled and frozen == 0


def test_collection_is_back_on_after_an_early_error(tmp_path: Path) -> None:
    assert gc.isenabled()
    assert main([*_inputs(tmp_path)[:-1], "--max-reports", "-1"]) == 2  # an early error return
    assert gc.isenabled()


def _blas_threads_at_numpy_import(argv: list[str], env: dict[str, str]) -> str | None:
    """OPENBLAS_NUM_THREADS as numpy's import found it in a ``linkstream`` process."""
    code = (
        "import json, os, sys\nseen = []\n"
        "def hook(ev, a):\n"
        "    if ev == 'import' and a[0] == 'numpy' and not seen:\n"
        "        seen.append(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
        "sys.addaudithook(hook)\nimport linkstream.cli.main\nm = sys.modules['linkstream.cli.main']\n"
        f"assert m.main({argv!r}) == 0\nprint(json.dumps(seen))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    [threads] = json.loads(p.stdout.strip().splitlines()[-1])
    return threads


def test_numpy_starts_one_blas_thread_unless_the_user_set_a_number(tmp_path: Path) -> None:
    # LinkStream calls no BLAS routine: OpenBLAS's thread per core only costs start-up CPU
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _blas_threads_at_numpy_import(_inputs(tmp_path), env) == "1"
    assert _blas_threads_at_numpy_import(_inputs(tmp_path), {**env, "OPENBLAS_NUM_THREADS": "2"}) == "2"
