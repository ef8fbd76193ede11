"""Where the shared corpus and reference tools live (``../shared`` or $LINKSTREAM_SHARED).

A clone without ``../shared`` runs every test that does not need the full CityBench corpus
or the reference tools (``shared/tools/oracle.py``); those skip, saying so.  The project's
own CityBench slice (``tests/data/conformance/``, :data:`SLICE`) and results comparison
(``tests/result_compare.py``) need neither.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
#: the CityBench slice kept in the repository (see its README.md)
SLICE = REPO / "tests" / "data" / "conformance"


def shared_or_skip() -> Path:
    if not (SHARED / "citybench" / "manifest.json").exists():
        pytest.skip(f"needs the full shared CityBench corpus: not found at {SHARED} (set LINKSTREAM_SHARED)")
    return SHARED


def load_tool(name: str):
    """Import ``shared/tools/<name>.py`` as a module (skips the test if it is missing)."""
    path = SHARED / "tools" / f"{name}.py"
    if not path.is_file():
        pytest.skip(
            f"needs the shared reference tool tools/{name}.py: not found at {SHARED} (set LINKSTREAM_SHARED)"
        )
    spec = importlib.util.spec_from_file_location(f"shared_{name}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def trim_citybench_streams(dest: Path, names: list[str], elements: int) -> None:
    """Writes the first ``elements`` elements of each CityBench stream in ``names`` to
    ``dest/<name>.nq`` (short streams keep oracle runs short)."""
    shared = shared_or_skip()
    for s in names:
        lines, els = [], 0
        with open(shared / "citybench" / "streams" / f"{s}.nq", encoding="utf-8") as f:
            for line in f:
                if "generatedAtTime" in line:
                    els += 1
                    if els > elements:
                        break
                lines.append(line)
        (dest / f"{s}.nq").write_text("".join(lines), encoding="utf-8")


def run_oracle(queries: dict[str, str], streams, statics: list[str], tmp: Path) -> Path:
    """The oracle's results of ``queries`` (name -> text), each evaluated alone, over
    ``streams`` ((iri, path) pairs) and ``statics`` (``--static`` arguments)."""
    qdir = tmp / "q"
    qdir.mkdir(exist_ok=True)
    args = []
    for name, text in queries.items():
        (qdir / f"{name}.rq").write_text(text, encoding="utf-8")
        args += ["--query", str(qdir / f"{name}.rq")]
    for iri, path in streams:
        args += ["--stream", f"{iri}={path}"]
    for st in statics:
        args += ["--static", st]
    want = tmp / "want.jsonl"
    assert load_tool("oracle").main([*args, "--out", str(want), "--quiet"]) == 0
    return want
