"""Hash-partitioned producer instances: the fields grouping applied to a join's inputs.

Instance ``i`` of ``k`` of a partitioned producer (see
:mod:`linkstream.engine.cutting`) runs the producer's plan with every input of its
join that binds the partition variable wrapped in a :class:`PartitionOperator`, which
keeps the rows of the input's deltas that
:class:`~linkstream.containers.groupings.FieldsGrouping` on that variable sends to
partition ``i``; inputs that do not bind it stay whole (broadcast).  A join row and the
partitioned input rows it is made of have the same value, hence the same partition:
the instance's join state holds only its partition of those inputs, its output is
partition ``i`` of the join's output, and the ``k`` outputs together are the
unpartitioned one (consumers add them up).

Each instance reads its inputs from the container's replicated stream buffers, so the
grouping runs where the rows are consumed.  The grouping key is not the dictionary id
(every container has its own dictionary, and an instance may move to a container whose
ids differ) but a 64-bit digest of the *term* (:class:`TermHashes`, computed once per
term and container), so every container, and every consumer checking what it received
(:func:`foreign_rows`), agrees on each term's partition.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from linkstream.containers.groupings import FieldsGrouping
from linkstream.engine.cutting import partition_join, partition_var
from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch


class PartitionError(ValueError):
    """A producer cannot be partitioned as the driver asked."""


class TermHashes:
    """A stable 64-bit digest of the term behind every dictionary id of one container.

    ``of(ids)`` is a vectorised lookup; an id seen for the first time is decoded and
    hashed once (BLAKE2b of its N-Triples form).  Id 0 (unbound) hashes to 0.

    Args:
        dictionary: The container's dictionary.
    """

    def __init__(self, dictionary: Any) -> None:
        self.dictionary = dictionary
        self._h = np.zeros(1024, dtype=np.int64)
        self._known = np.zeros(1024, dtype=bool)
        self._known[0] = True

    def of(self, ids: np.ndarray) -> np.ndarray:
        """The term digest of every id in ``ids`` (int64, same shape)."""
        ids = np.asarray(ids, dtype=np.int64)
        if not ids.size:
            return np.zeros(ids.shape, dtype=np.int64)
        top = int(ids.max())
        if top >= len(self._h):
            n = max(top + 1, 2 * len(self._h))
            h, k = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
            h[: len(self._h)], k[: len(self._known)] = self._h, self._known
            self._h, self._known = h, k
        new = np.unique(ids[~self._known[ids]])
        if len(new):
            terms = self.dictionary.decode_many(new)
            self._h[new] = [
                int.from_bytes(
                    hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little", signed=True
                )
                for t in terms
            ]
            self._known[new] = True
        return self._h[ids]


def partition_of(b: Batch, var: str, parts: int, hashes: TermHashes) -> np.ndarray:
    """The partition of every row of ``b``: the fields grouping of ``var``'s term digests."""
    key = Batch((var,), hashes.of(b.col(var))[None, :], b.counts)
    return FieldsGrouping((var,)).partition_of(key, parts)


def foreign_rows(b: Batch, var: str, index: int, parts: int, hashes: TermHashes) -> int:
    """How many rows of ``b`` are *not* in partition ``index`` of ``parts`` by ``var``."""
    if not len(b) or var not in b.vars:
        return 0
    return int(np.count_nonzero(partition_of(b, var, parts, hashes) != index))


class PartitionOperator(Operator):
    """The rows of ``child``'s deltas in partition ``index`` of ``parts`` by ``var``.

    Counters ``rows_in`` / ``rows_kept`` say how much of the input the instance joined.
    """

    #: a producer's plan is the same with or without its partition filters
    fingerprint_transparent = True

    def __init__(self, child: Operator, var: str, index: int, parts: int, hashes: TermHashes) -> None:
        super().__init__()
        if not 0 <= index < parts:
            raise PartitionError(f"partition {index} of {parts}")
        self.children = (child,)
        self.child = child
        self.vars = child.vars
        self.certain = child.certain
        self.var = var
        self.index = index
        self.parts = parts
        self.hashes = hashes
        self.rows_in = 0
        self.rows_kept = 0

    def describe(self) -> str:
        return f"Partition {self.index}/{self.parts} by ?{self.var}"

    def _keep(self, b: Batch) -> Batch:
        if not len(b):
            return b
        mask = partition_of(b, self.var, self.parts, self.hashes) == self.index
        self.rows_in += len(b)
        kept = int(np.count_nonzero(mask))
        self.rows_kept += kept
        return b if kept == len(b) else b.mask(mask)

    def compute(self, epoch: int) -> Batch:
        return self._keep(self.child.delta(epoch))

    def current(self) -> Batch:
        return self._keep(self.child.current())


def partition_producer(
    op: Operator, var: str, index: int, parts: int, hashes: TermHashes
) -> list[PartitionOperator]:
    """Wraps every input of producer ``op``'s join that binds ``var`` in a :class:`PartitionOperator`.

    Inputs that do not bind ``var`` stay whole (broadcast to every instance).  Must run
    before the join's first delta.  A join already wrapped (routes of one shared join
    hosted together) is left as it is, if it is wrapped the same way.

    Returns:
        The partition operators of the join (new or found).

    Raises:
        PartitionError: ``op`` has no join to partition, ``var`` is not the variable this
            container would choose, or the join is wrapped differently.
    """
    mine = partition_var(op)
    if mine != var:
        raise PartitionError(f"{op.describe()} partitions on ?{mine} here, not ?{var}")
    join = partition_join(op)
    assert join is not None
    found = [c for c in join.children if isinstance(c, PartitionOperator)]
    if found:
        if any((p.var, p.index, p.parts) != (var, index, parts) for p in found):
            raise PartitionError(f"{join.describe()} is already partitioned otherwise")
        return found
    wrapped: dict[int, Operator] = {}
    out = []
    for c in join.children:
        if var in c.vars and var in c.certain:
            p = PartitionOperator(c, var, index, parts, hashes)
            wrapped[id(c)] = p
            out.append(p)
    join.rebind(wrapped)
    return out
