"""Storm-style stream groupings: which downstream partition receives which rows.

A grouping splits each outgoing batch into one batch per downstream partition
(``split(batch, n) -> list[Batch]`` of length ``n``, empty batches included, so the
caller can skip or still send them, e.g. to carry a watermark):

* :class:`ShuffleGrouping`: round-robin of whole batches or of rows, from a seeded
  start, for stateless operators.
* :class:`AllGrouping`: every partition gets the whole batch (broadcast).
* :class:`FieldsGrouping`: a hash of the key columns picks the partition, so equal keys
  always meet in the same partition (joins, group-by, distinct).  The hash is a fixed
  splitmix64-style mix of the int64 dictionary ids, computed with numpy; it never uses
  Python's salted ``hash()``, so every process and every run agrees on it.

Every grouping is lossless: the union of the parts is the input multiset, signs
(counts) included, so an expiry (negative count) follows its insertion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from linkstream.operators.batch import Batch

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
# Distinguishes the grouping hash from the join-key hash of operators.batch, so partition
# choice and in-partition hash tables do not correlate.
FIELDS_HASH_SEED = 0x4C534B46  # "LSKF"


class Grouping(Protocol):
    """Splits a batch among ``n_partitions`` downstream partitions."""

    def split(self, batch: Batch, n_partitions: int) -> list[Batch]:
        """One batch per partition (``len(result) == n_partitions``), together the input."""
        ...


def _check_n(n_partitions: int) -> None:
    if n_partitions < 1:
        raise ValueError(f"n_partitions must be >= 1, got {n_partitions}")


def _parts_by_assignment(batch: Batch, part: np.ndarray, n_partitions: int) -> list[Batch]:
    """Rows of ``batch`` grouped by ``part`` (row -> partition), input order kept in each."""
    if n_partitions == 1:
        return [batch]
    # A stable sort on small integers is a radix sort in numpy: O(n).
    key = part.astype(np.uint16) if n_partitions <= 0xFFFF else part
    order = np.argsort(key, kind="stable")
    bounds = np.zeros(n_partitions + 1, dtype=np.int64)
    np.cumsum(np.bincount(part, minlength=n_partitions), out=bounds[1:])
    out = []
    for p in range(n_partitions):
        lo, hi = int(bounds[p]), int(bounds[p + 1])
        if lo == hi:
            out.append(Batch.empty(batch.vars))
        elif hi - lo == len(batch):
            out.append(batch)
        else:
            out.append(batch.take(order[lo:hi]))
    return out


def stable_hash(cols: np.ndarray, seed: int = FIELDS_HASH_SEED) -> np.ndarray:
    """A uint64 hash per row of ``cols`` (``(k, n)`` int64), equal in every process.

    Each column is folded in with a splitmix64 finaliser; the result depends only on the
    values, their column order and ``seed``.
    """
    n = cols.shape[1]
    h = np.full(n, np.uint64(seed & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(cols.shape[0]):
            z = (h ^ np.asarray(cols[j], dtype=np.int64).view(np.uint64)) + _GOLDEN
            z = (z ^ (z >> _S30)) * _MUL1
            z = (z ^ (z >> _S27)) * _MUL2
            h = z ^ (z >> _S31)
    return h


@dataclass
class ShuffleGrouping:
    """Round-robin over partitions, of whole batches (default) or of single rows.

    The sequence is deterministic: it starts at partition ``seed % n_partitions`` and
    continues where the previous call stopped, so equal call sequences split equally.

    Attributes:
        seed: Start offset of the round-robin.
        per_row: Deal rows one by one instead of whole batches.
    """

    seed: int = 0
    per_row: bool = False
    _next: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._next = self.seed

    def split(self, batch: Batch, n_partitions: int) -> list[Batch]:
        """Deals ``batch`` (or its rows) to the partitions in turn."""
        _check_n(n_partitions)
        start = self._next % n_partitions
        if not self.per_row:
            self._next = start + 1
            return [batch if p == start else Batch.empty(batch.vars) for p in range(n_partitions)]
        n = len(batch)
        self._next = (start + n) % n_partitions
        part = (np.arange(n, dtype=np.int64) + start) % n_partitions
        return _parts_by_assignment(batch, part, n_partitions)


@dataclass(frozen=True)
class AllGrouping:
    """Broadcast: every partition receives the whole batch (the same immutable object)."""

    def split(self, batch: Batch, n_partitions: int) -> list[Batch]:
        """``n_partitions`` references to ``batch``."""
        _check_n(n_partitions)
        return [batch] * n_partitions


@dataclass(frozen=True)
class FieldsGrouping:
    """Hash partitioning on the key variables ``vars``.

    A row goes to partition ``stable_hash(key columns) % n_partitions``; a key variable
    missing from a batch counts as unbound (id 0), as in :meth:`Batch.col`.

    Attributes:
        vars: The key variables, in the order they are hashed.
        seed: Hash seed; every sender of one edge must use the same one.
    """

    vars: tuple[str, ...]
    seed: int = FIELDS_HASH_SEED

    def __post_init__(self) -> None:
        if isinstance(self.vars, str):
            raise TypeError("FieldsGrouping takes a sequence of variable names, not a string")
        object.__setattr__(self, "vars", tuple(self.vars))
        if not self.vars:
            raise ValueError("FieldsGrouping needs at least one key variable")

    def key_columns(self, batch: Batch) -> np.ndarray:
        """The ``(len(vars), n)`` key columns of ``batch``."""
        if self.vars == batch.vars:
            return batch.cols
        return np.stack([batch.col(v) for v in self.vars])

    def partition_of(self, batch: Batch, n_partitions: int) -> np.ndarray:
        """The partition (int64) of every row of ``batch``."""
        _check_n(n_partitions)
        if len(batch) == 0:
            return np.empty(0, dtype=np.int64)
        h = stable_hash(self.key_columns(batch), self.seed)
        return (h % np.uint64(n_partitions)).astype(np.int64)

    def split(self, batch: Batch, n_partitions: int) -> list[Batch]:
        """Rows grouped by the partition of their key; input order is kept in each part."""
        _check_n(n_partitions)
        if len(batch) == 0:
            return [batch] * n_partitions
        return _parts_by_assignment(batch, self.partition_of(batch, n_partitions), n_partitions)
