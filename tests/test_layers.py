"""The one-way layer contract (``[tool.importlinter]`` in pyproject.toml), as ``make lint`` checks it.

The contract holds on the tree, and it fails when a lower layer imports a higher one, also
through a lazy import inside a function or a ``TYPE_CHECKING`` import.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(
    not LINT_IMPORTS.exists(), reason="import-linter is not installed in this venv"
)


#: import-linter run with ``-S``: site-packages on the path without its ``.pth`` files, so the
#: editable install's finder does not add platform/ as a second portion of ``linkstream``
_RUN = """
import sys
sys.path[:0] = [{tree!r}, *{site!r}]
sys.argv = ["lint-imports", {config!r}, "--no-cache"]
from importlinter.cli import lint_imports_command
sys.exit(lint_imports_command())
"""


def _check(tree: Path) -> subprocess.CompletedProcess[str]:
    """Runs the contract over ``tree/linkstream`` (a copy of platform/ under its package name)."""
    code = _RUN.format(tree=str(tree), site=site.getsitepackages(), config=str(REPO / "pyproject.toml"))
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "platform", tmp_path / "linkstream", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_the_tree_keeps_the_layers(tmp_path):
    r = _check(_copy(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "One-way layers KEPT" in r.stdout


@pytest.mark.parametrize(
    ("module", "code", "edge"),
    [
        (
            "rdf/terms.py",
            "\n\ndef _upward():\n    from linkstream.engine.embedded import Engine\n\n    return Engine\n",
            "linkstream.rdf is not allowed to import linkstream.engine",
        ),
        (
            "operators/scan.py",
            "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from linkstream.cli.main import main\n",
            "linkstream.operators is not allowed to import linkstream.cli",
        ),
        (
            "store/layout.py",
            "\n\ndef _sibling():\n    import linkstream.query.errors\n\n    return linkstream.query.errors\n",
            "linkstream.store is not allowed to import linkstream.query",
        ),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, code, edge):
    tree = _copy(tmp_path)
    with open(tree / "linkstream" / module, "a", encoding="utf-8") as f:
        f.write(code)
    r = _check(tree)
    assert r.returncode != 0
    assert edge in r.stdout, r.stdout
