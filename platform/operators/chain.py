"""A multiway join's component join in one compiled call (``_kernels.join_chain``).

:meth:`MJoinOperator._component_join <.mjoin.MJoinOperator._component_join>` recomputes
the join of a connected component of the join's inputs (a star pattern, say) whenever one
of them changed: on CityBench that is 4-16 small relations joined at every report, and in
Python each step was ~20 small numpy calls and helper frames (the largest item of the
37 queries' CPU profile).  :func:`component_join` runs the same steps in C: the same join
order (the smallest remaining input sharing a variable with the partial result, the first
on ties), the same rows in the same order (per step, probe row ascending, then the input's
base part before its recent part, then the part's row), the same filters applied at the
same points, so the batch, the filters applied and the variables bound are exactly those of
the Python loop (:meth:`MJoinOperator.join_rest <.mjoin.MJoinOperator.join_rest>`).

The kernel hands a step back to Python where the Python loop does something else than a
plain join: a filter to apply (the evaluator is Python), an input large next to the
partial result (the loop may then join the rest as one relation), a shared value that is
unbound (the general join path).  Python does that step, and the kernel goes on from its
result.  Without the compiled kernels (or with :data:`ENABLED` off) the Python loop runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators import batch as _batch
from linkstream.operators.batch import Batch

if TYPE_CHECKING:
    from linkstream.operators.mjoin import MJoinOperator
    from linkstream.operators.relation import Relation, _Part

#: whether :meth:`MJoinOperator._component_join` uses the compiled chain when the compiled
#: kernels are in use (tests turn it off to compare it with the Python loop)
ENABLED = True

#: whether the kernel is given the sorted indexes of the large inputs whose steps it
#: handed back before (:attr:`_Spec.keys`; benchmarks and tests turn it off to compare)
INDEXED = True

#: whether the kernel joins the rest of the inputs as one relation itself where the Python
#: loop does (a large input of high fan-out next; ``_chain_rest.c``) instead of handing that
#: step back (benchmarks and tests turn it off to compare)
REST = True

#: status codes of ``_kernels.join_chain``
DONE, FILTER, STEP, UNUSABLE = 0, 1, 2, 3

#: variables the kernel's bit masks hold
MAX_VARS = 63

#: an indexed input's fan-out on its key as the kernel reads it (the Python loop's last
#: count): unknown, low (at most the rest fan-out: a plain step through the index), high (the
#: kernel joins the rest of the inputs as one relation there, as the loop does)
FAN_UNKNOWN, FAN_LOW, FAN_HIGH = 0, 1, 2


#: an input's fan-out is counted again when its size moved by more than 1 / this from the
#: size it was counted at (:data:`.mjoin.FANOUT_DRIFT`)
FANOUT_DRIFT = 4


def fanout_cached(hit: tuple | None, rel: Relation) -> float | None:
    """The fan-out :meth:`MJoinOperator._fanout` cached as ``hit`` (relation, version,
    fan-out, size counted at) for relation ``rel``, if it still holds: the same version,
    or a size within :data:`FANOUT_DRIFT` of the one counted at; else ``None``."""
    if hit is None or hit[0] is not rel:
        return None
    if hit[1] == rel.version:
        return hit[2]
    at = hit[3]
    return hit[2] if at and abs(len(rel) - at) * FANOUT_DRIFT <= at else None


def in_use() -> bool:
    return ENABLED and _batch._native is not None and hasattr(_batch._native, "join_chain")


class _Spec:
    """A component's inputs as the kernel reads them (built once per component)."""

    __slots__ = ("names", "ids", "inputs", "fmasks", "var_names", "sets", "last")

    def __init__(self, op: MJoinOperator, comp: tuple[int, ...]) -> None:
        names: list[str] = list(op.vars)
        for k in comp:
            names += [v for v in op.children[k].certain if v not in names]
        for _, fv in op.filters:
            names += [v for v in sorted(fv) if v not in names]
        self.names = names
        self.ids = {v: i for i, v in enumerate(names)}
        self.inputs = tuple(
            (tuple(self.ids[v] for v in op.state[k].vars), self.mask(op.children[k].certain)) for k in comp
        )
        self.fmasks = tuple(self.mask(fv) for _, fv in op.filters)
        #: var ids -> names (of the partial results seen so far)
        self.var_names: dict[tuple[int, ...], tuple[str, ...]] = {}
        #: (bound variables mask, filters done mask) -> their sets
        self.sets: dict[tuple[int, int], tuple[frozenset[str], frozenset[int]]] = {}
        #: per input, its parts when last read, what the kernel reads of them, and by key
        #: variable what it reads of them with their sorted indexes on it (fan-out high,
        #: fan-out low; without indexes when the base has an unbound key value)
        self.last: list[tuple[Any, Any, tuple, dict]] = [(None, None, (), {})] * len(comp)

    def read(
        self, op: MJoinOperator, comp: tuple[int, ...], rels: tuple[Relation, ...], rest_fanout: int
    ) -> tuple:
        """The inputs (``op``'s inputs ``comp``, their relations ``rels``) as the kernel
        reads them: per input, (var ids, certain mask, parts), and for an input with keys
        kept (:func:`learn`), its parts' indexes on each with its fan-out there."""
        last = self.last
        keys = op.__dict__.get("_chain_keys") if INDEXED else None
        fanouts = op.__dict__.get("_fanouts")
        out = []
        for x, r in enumerate(rels):
            b, rc = r._base, r._recent
            hit = last[x]
            if hit[0] is not b or hit[1] is not rc:
                vids, cert = self.inputs[x]
                parts = tuple((p.rows.cols, p.rows.counts) for p in (b, rc) if p.rows.counts.shape[0])
                hit = last[x] = (b, rc, (vids, cert, parts), {})
            ks = None if keys is None else keys.get(comp[x])
            if not ks:
                out.append(hit[2])
                continue
            ixs = []
            for key in ks:
                got = hit[3].get(key)
                if got is None or got[1]:
                    # (a large recent part is indexed from its second read on: most are read
                    # once; got: the indexes, and whether the recent part is large and not
                    # indexed yet)
                    ix = _indexes(b, rc, r.vars.index(key), self.ids[key], got is not None)
                    got = hit[3][key] = (ix, got is None and rc.rows.counts.shape[0] > RECENT_UNINDEXED)
                ix = got[0]
                if ix is None:
                    continue
                # (the fan-out as the Python loop last counted it, not counted here: where it
                # is not known, the kernel hands a step that may join the rest back as before;
                # :meth:`MJoinOperator.fanout_known` without its call)
                f = None if fanouts is None else fanout_cached(fanouts.get((comp[x], (key,))), r)
                ixs.append(
                    (ix[0], FAN_UNKNOWN if f is None else FAN_LOW if f <= rest_fanout else FAN_HIGH, ix[1])
                )
            out.append((*hit[2], *ixs) if ixs else hit[2])
        return tuple(out)

    def sets_of(self, bound: int, fdone: int) -> tuple[set[str], set[int]]:
        """The bound variables and the filters done, as new sets."""
        hit = self.sets.get((bound, fdone))
        if hit is None:
            hit = self.sets[(bound, fdone)] = (
                frozenset(v for i, v in enumerate(self.names) if bound >> i & 1),
                frozenset(f for f in range(len(self.fmasks)) if fdone >> f & 1),
            )
        return set(hit[0]), set(hit[1])

    def mask(self, vs) -> int:
        m = 0
        for v in vs:
            m |= 1 << self.ids[v]
        return m

    def vars_of(self, ids: tuple[int, ...]) -> tuple[str, ...]:
        vs = self.var_names.get(ids)
        if vs is None:
            vs = self.var_names[ids] = tuple(self.names[i] for i in ids)
        return vs


#: key variables kept per input (the kernel takes an index on each; ``_chain.h``: 2)
MAX_KEYS = 2


def learn(op: MJoinOperator, k: int, cur_vars: tuple[str, ...]) -> None:
    """Keeps the variable that ``op``'s input ``k`` shares with the partial result
    ``cur_vars`` (when it shares one) among the input's keys, where the kernel handed its
    step back (a large input): the join plan kept between reports, for every component
    join of ``op`` (a join of the rest of the inputs too), whose indexes the kernel is
    given so that it joins such steps itself (the last :data:`MAX_KEYS` kept)."""
    shared = [v for v in op.state[k].vars if v in cur_vars]
    if len(shared) != 1:
        return
    keys = op.__dict__.setdefault("_chain_keys", {})
    got = keys.get(k, ())
    if shared[0] not in got:
        keys[k] = (*got, shared[0])[-MAX_KEYS:]


def _spec(op: MJoinOperator, comp: tuple[int, ...], rels: tuple[Relation, ...]) -> _Spec | None:
    cache = op.__dict__.setdefault("_chain_specs", {})
    hit = cache.get(comp)
    # (tuples of relations compare by identity: a relation has no ``__eq__``)
    if hit is not None and hit[0] is op.children and hit[1] == rels:
        return hit[2]
    universe = set(op.vars)
    for k in comp:
        universe |= op.children[k].certain
    for _, fv in op.filters:
        universe |= fv
    spec = None
    if len(universe) <= MAX_VARS and len(op.filters) <= 64 and len(comp) <= 64:
        spec = _Spec(op, comp)
    cache[comp] = (op.children, rels, spec)
    return spec


def _batch_of(spec: _Spec, cols: bytearray, counts: bytearray, n: int, ids: tuple[int, ...]) -> Batch:
    return Batch(
        spec.vars_of(ids),
        np.frombuffer(cols, dtype=np.int64).reshape(len(ids), n),
        np.frombuffer(counts, dtype=np.int64),
    )


def component_join(
    op: MJoinOperator, comp: tuple[int, ...], rest_fanout: int, rels: tuple[Relation, ...], component_max: int
) -> tuple[Batch, set[int], set[str]] | None:
    """The join of inputs ``comp`` of ``op`` (their relations ``rels``) as
    :meth:`MJoinOperator._component_join` computes it (not cached here; ``rest_fanout`` and
    ``component_max``: :data:`.mjoin.REST_FANOUT`, :data:`.mjoin.COMPONENT_MAX`), or ``None``
    when the kernel cannot take it."""
    kernels = _batch._native
    spec = _spec(op, comp, rels)
    if spec is None or kernels is None:
        return None
    inputs = spec.read(op, comp, rels, rest_fanout)
    cur_arg: tuple[np.ndarray, np.ndarray] | None = None
    cur_ids: tuple[int, ...] = ()
    bound, rem, fdone = 0, (1 << len(comp)) - 1, 0
    cur: Batch | None = None
    while True:
        st, j, cb, nb, n, ids, bound, rem, fdone = kernels.join_chain(
            inputs,
            spec.fmasks,
            cur_arg,
            cur_ids,
            bound,
            rem,
            fdone,
            rest_fanout,
            component_max if REST else -1,
        )
        if st == UNUSABLE:
            if cur is None:
                return None
            break  # (the Python loop goes on from ``cur``)
        cur = _batch_of(spec, cb, nb, n, ids)
        if st == DONE:
            break
        bnames, done = spec.sets_of(bound, fdone)
        remaining = [comp[x] for x in range(len(comp)) if rem >> x & 1]
        if st == FILTER:
            cur = op._apply_filters(cur, done, bnames)
        else:
            learn(op, comp[j], cur.vars)
            cur, finished = op.join_step(comp[j], cur, remaining, bnames, done)
            if finished:
                return op.component_result(comp, cur, remaining, bnames, done)
        fdone = sum(1 << f for f in done)
        bound = spec.mask(bnames)
        rem = sum(1 << x for x in range(len(comp)) if comp[x] in remaining)
        cur_ids = tuple(spec.ids[v] for v in cur.vars)
        cur_arg = (_c(cur.cols), _c(cur.counts))
    bnames, done = spec.sets_of(bound, fdone)
    if not rem and n:  # (every input joined: component_result's common case)
        return cur, done, bnames
    remaining = [comp[x] for x in range(len(comp)) if rem >> x & 1]
    if st == UNUSABLE:
        return op.join_rest(comp, cur, remaining, bnames, done)
    return op.component_result(comp, cur, remaining, bnames, done)


#: a relation's recent part of at most this many rows is joined by the kernel without an
#: index, and a larger one until it is read a second time (a recent part changes with
#: every delta: a sort per new part would cost more than the kernel's own pass over it)
RECENT_UNINDEXED = 256


def _indexes(base: _Part, recent: _Part, col: int, vid: int, recent_too: bool) -> tuple[int, tuple] | None:
    """A relation's non-empty parts ``base`` and ``recent``'s sorted indexes on its column
    ``col`` (variable id ``vid``) as the kernel reads them: the indexes (cached on the
    parts) that :meth:`Relation.join` probes on that key; none for the recent part unless
    ``recent_too`` and it is large (the kernel joins a part without one, checking its
    values); ``None`` when the base has an unbound value there (its join takes the general
    path)."""
    out: list[tuple[np.ndarray, np.ndarray] | None] = []
    for p in (base, recent):
        m = p.rows.counts.shape[0]
        if not m:
            continue
        if p is recent and (m <= RECENT_UNINDEXED or not recent_too):
            out.append(None)
            continue
        ix = p.bound_index((col,))
        if ix is None:
            return None
        out.append(ix.sorted())
    return vid, tuple(out)


def _c(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous and a.dtype == np.int64 else np.ascontiguousarray(a, dtype=np.int64)
