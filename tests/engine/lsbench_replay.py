"""Helpers of the tests that replay LSBench-shaped data (``bench/lsbench.py``) and compare
output bytes: the generator module and a sink that hashes what is written."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import ModuleType


def lsbench() -> ModuleType:
    """``bench/lsbench.py`` as a module (the generator and the workloads)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        import lsbench as mod
    finally:
        sys.path.pop(0)
    return mod


class HashSink:
    """A text sink keeping the sha256 and the length of what is written."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.chars = 0

    def write(self, s: str) -> int:
        self.h.update(s.encode("utf-8"))
        self.chars += len(s)
        return len(s)
