"""VALUES and other constant relations: their rows arrive once, at the first epoch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter


class ConstantOperator(Operator):
    """A fixed multiset of mappings (VALUES, the empty group pattern ``{}``)."""

    def __init__(self, vars: Sequence[str], rows: np.ndarray) -> None:
        super().__init__()
        self.vars = tuple(vars)
        rows = np.asarray(rows, dtype=np.int64)
        self.rows = rows if rows.ndim == 2 else rows.reshape(len(self.vars), -1)
        self.certain = frozenset(v for j, v in enumerate(self.vars) if np.all(self.rows[j] != 0))
        self._sent = False

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """Whether the rows were emitted."""
        return {"_sent": self._sent}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("_sent",))
        self._sent = r.value(entries["_sent"], bool)

    def describe(self) -> str:
        return f"Values rows={self.rows.shape[1]}"

    def config_key(self) -> object:
        return (self.vars, self.rows.shape, self.rows.tobytes())

    def current(self) -> Batch:
        return Batch(self.vars, self.rows, np.ones(self.rows.shape[1], dtype=np.int64))

    def compute(self, epoch: int) -> Batch:
        if self._sent:
            return Batch.empty(self.vars)
        self._sent = True
        return Batch(self.vars, self.rows, np.ones(self.rows.shape[1], dtype=np.int64))
