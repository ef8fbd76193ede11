"""Where the shared corpus and reference tools live (``../shared`` or $LINKSTREAM_SHARED)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()


def shared_or_skip() -> Path:
    if not (SHARED / "citybench" / "manifest.json").exists():
        pytest.skip(f"shared corpus not found at {SHARED} (set LINKSTREAM_SHARED)")
    return SHARED


def load_tool(name: str):
    """Import ``shared/tools/<name>.py`` as a module."""
    path = shared_or_skip() / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"shared_{name}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
