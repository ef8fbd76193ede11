"""The type-checking policy of ``platform/`` (checked by ``make typecheck``, kept here).

Every ``# type: ignore`` names its error codes and says why on the same line, e.g.
``x.y  # type: ignore[attr-defined]  # set by the planner``; mypy itself reports unused
ignores (``warn_unused_ignores``), so an ignore that no longer hides an error goes away.
"""

from __future__ import annotations

import re
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = ROOT / "platform"

_IGNORE = re.compile(r"#\s*type:\s*ignore\b")
#: ``# type: ignore[code, code]`` then, in a comment of its own, a reason of a few words
_GOOD = re.compile(r"#\s*type:\s*ignore\[[a-z][a-z0-9-]*(?:,\s*[a-z][a-z0-9-]*)*\]\s+#\s*\S.{2,}")


def _ignore_comments(path: Path) -> list[tuple[int, str]]:
    """``(line, comment)`` of every comment token of ``path`` holding ``type: ignore``."""
    with tokenize.open(path) as f:
        toks = list(tokenize.generate_tokens(f.readline))
    return [(t.start[0], t.string) for t in toks if t.type == tokenize.COMMENT and _IGNORE.search(t.string)]


def _violations(path: Path) -> list[str]:
    rel = path.relative_to(ROOT)
    return [f"{rel}:{line}: {text}" for line, text in _ignore_comments(path) if not _GOOD.search(text)]


def test_every_type_ignore_names_its_codes_and_a_reason() -> None:
    bad = [v for p in sorted(PLATFORM.rglob("*.py")) for v in _violations(p)]
    assert not bad, (
        "each `# type: ignore` in platform/ needs error codes and a reason on the same line, "
        "e.g. `# type: ignore[attr-defined]  # rdflib CompValue attributes are dynamic`:\n" + "\n".join(bad)
    )


def test_the_policy_check_tells_good_from_bad(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "a = 1  # type: ignore\n"
        "b = 2  # type: ignore[attr-defined]\n"
        "c = 3  # type: ignore[attr-defined]  # set by the planner\n"
        "d = 4  # type: ignore[arg-type, union-attr]  # numpy stubs\n"
        "e = '# type: ignore'\n"
    )
    lines = [line for line, text in _ignore_comments(f) if not _GOOD.search(text)]
    assert lines == [1, 2]


def test_mypy_config_keeps_ignores_honest() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert cfg["warn_unused_ignores"] is True
    assert "ignore-without-code" in cfg["enable_error_code"]
    assert not cfg.get("ignore_errors", False)
    assert "typecheck" in (ROOT / "Makefile").read_text().split("\ntest:")[1].splitlines()[0]
