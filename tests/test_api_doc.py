"""``docs/api.md`` is the rendering of the served OpenAPI schema, regenerated with every change."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "docs" / "generate_api.py"
API_MD = REPO / "docs" / "api.md"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("linkstream_docs_generate_api", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_api_md_is_the_generators_output() -> None:
    gen = _generator()
    expected = gen.render()
    current = API_MD.read_text(encoding="utf-8") if API_MD.exists() else ""
    assert current == expected, (
        "docs/api.md differs from the OpenAPI schema (linkstream.api.openapi.openapi_schema); "
        f"regenerate it with: {gen.REGENERATE}  (and commit docs/api.md)"
    )


def test_every_operation_is_documented_with_its_scope() -> None:
    from linkstream.api.openapi import openapi_schema

    text = _generator().render()
    for path, item in openapi_schema()["paths"].items():
        for method, op in item.items():
            heading = f"### `{method.upper()} {path}`"
            assert heading in text, f"{heading} missing"
            section = text.split(heading, 1)[1].split("\n### ", 1)[0]
            scope = op.get("x-required-scope", "none")
            assert f"Required scope: `{scope}`" in section or scope == "none", (path, method)
            for status in op["responses"]:
                assert f"| {status} |" in section, (path, method, status)


def test_check_mode_reports_a_stale_page(tmp_path: Path) -> None:
    gen = _generator()
    stale = tmp_path / "api.md"
    stale.write_text("old\n", encoding="utf-8")
    assert gen.main(["--check", "--out", str(stale)]) == 1
    assert gen.main(["--out", str(stale)]) == 0
    assert gen.main(["--check", "--out", str(stale)]) == 0
