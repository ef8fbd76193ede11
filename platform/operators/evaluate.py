"""Vectorised evaluation of SPARQL expressions over batches.

Numeric arithmetic, comparisons of numerics, the boolean connectives with SPARQL's
three-valued error logic, BOUND, IF, COALESCE and IN run as numpy operations over id
columns (using :class:`~linkstream.rdf.terminfo.TermInfo`'s per-id numeric arrays).
Everything else (string, date, hash, IRI functions, casts, comparisons of non-numeric
terms) goes through the scalar function library, called once per *distinct* combination
of argument ids in the batch and memoised across batches.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from linkstream.operators.batch import Batch
from linkstream.query.expressions import (
    And,
    Arith,
    Bound,
    Call,
    Cast,
    Cmp,
    Coalesce,
    Const,
    Expr,
    If,
    In,
    Not,
    Or,
    Unary,
    Var,
)
from linkstream.query.functions import scalar as F
from linkstream.rdf.records import record
from linkstream.rdf.terminfo import NUM_DECIMAL, NUM_DOUBLE, NUM_FLOAT, NUM_INTEGER, TermInfo
from linkstream.rdf.terms import (
    KIND_LITERAL,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_INTEGER,
    Literal,
    format_decimal,
    format_double,
)

_NUM_DT = {NUM_INTEGER: XSD_INTEGER, NUM_DECIMAL: XSD_DECIMAL, NUM_FLOAT: XSD_FLOAT, NUM_DOUBLE: XSD_DOUBLE}


# (the values of an expression over a batch: thousands per replay, so written-out __init__)


@record(slots=True)
class Ids:
    """Term ids (0: an error or unbound)."""

    ids: np.ndarray  # 0 = error / unbound

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids


@record(slots=True)
class Num:
    """Numbers: values, their numeric types and whether each is one."""

    val: np.ndarray
    typ: np.ndarray
    ok: np.ndarray

    def __init__(self, val: np.ndarray, typ: np.ndarray, ok: np.ndarray) -> None:
        self.val = val
        self.typ = typ
        self.ok = ok


@record(slots=True)
class Bool:
    """Effective boolean values and whether each has one."""

    val: np.ndarray
    ok: np.ndarray

    def __init__(self, val: np.ndarray, ok: np.ndarray) -> None:
        self.val = val
        self.ok = ok


Value = Ids | Num | Bool

_MEMO_LIMIT = 200_000
#: numbers converted to ids with a dict lookup each (more: one ``np.unique`` first)
_SMALL_AS_IDS = 64


class Evaluator:
    """Evaluates compiled expressions over batches; one per engine (holds memo caches)."""

    def __init__(self, terms: TermInfo) -> None:
        self.terms = terms
        self._memo: dict[tuple, int] = {}
        self._num_ids: dict[tuple[int, int], int] = {}

    # ------------------------------------------------------------ public entry points

    def filter_mask(self, e: Expr, b: Batch) -> np.ndarray:
        """Rows whose effective boolean value is true (errors count as false)."""
        v = self.as_bool(self.evaluate(e, b), len(b))
        return v.val & v.ok

    def values(self, e: Expr, b: Batch) -> np.ndarray:
        """Ids of the expression's value per row (0 where it errs or is unbound)."""
        return self.as_ids(self.evaluate(e, b), len(b))

    # ------------------------------------------------------------ conversions

    def as_ids(self, v: Value, n: int) -> np.ndarray:
        if isinstance(v, Ids):
            return v.ids
        if isinstance(v, Bool):
            t, f = self.terms.boolean_ids()
            return np.where(v.ok, np.where(v.val, t, f), 0).astype(np.int64)
        out = np.zeros(n, dtype=np.int64)
        ok = np.flatnonzero(v.ok)
        if len(ok) == 0:
            return out
        memo = self._num_ids  # (value bits, numeric type) -> id: exact, as ids are stable
        if len(ok) <= _SMALL_AS_IDS:  # a few values (an aggregate's groups): dict lookups
            keys = list(zip(v.val[ok].view(np.int64).tolist(), v.typ[ok].tolist()))
            self._encode_numbers({k for k in keys if k not in memo})
            out[ok] = [memo[k] for k in keys]
            return out
        bits, typ = v.val[ok].view(np.int64), v.typ[ok]
        t0 = int(typ[0])
        if (typ == t0).all():  # one numeric type (a COUNT's integers): a 1-d unique of the bits
            ub, inv = np.unique(bits, return_inverse=True)
            ukeys = [(b, t0) for b in ub.tolist()]
        else:
            uniq, inv = np.unique(np.stack([bits, typ.astype(np.int64)]), axis=1, return_inverse=True)
            ukeys = [(int(b), int(t)) for b, t in uniq.T.tolist()]
        self._encode_numbers({k for k in ukeys if k not in memo})
        ids = np.array([memo[k] for k in ukeys], dtype=np.int64)
        out[ok] = ids[inv.reshape(-1)]
        return out

    def _encode_numbers(self, keys: set[tuple[int, int]]) -> None:
        """Encodes the numeric literals ``keys`` ((value bits, type) pairs) into the memo."""
        if not keys:
            return
        memo = self._num_ids
        if len(memo) + len(keys) > _MEMO_LIMIT:
            memo.clear()
        todo = sorted(keys)
        terms = [_numeric_literal(float(np.int64(bits).view(np.float64)), typ) for bits, typ in todo]
        for k, i in zip(todo, self.terms.encode(terms).tolist()):
            memo[k] = i

    def as_num(self, v: Value, n: int) -> Num:
        if isinstance(v, Num):
            return v
        ids = self.as_ids(v, n)
        self.terms.ensure(ids)
        typ = self.terms.num_type[ids]
        return Num(self.terms.num_val[ids], typ, typ > 0)

    def as_bool(self, v: Value, n: int) -> Bool:
        if isinstance(v, Bool):
            return v
        if isinstance(v, Num):
            return Bool((v.val != 0) & ~np.isnan(v.val), v.ok)
        ids = v.ids
        self.terms.ensure(ids)
        typ = self.terms.num_type[ids]
        bv = self.terms.bool_val[ids]
        val = np.zeros(n, dtype=bool)
        ok = np.zeros(n, dtype=bool)
        num = typ > 0
        val[num] = (self.terms.num_val[ids[num]] != 0) & ~np.isnan(self.terms.num_val[ids[num]])
        ok[num] = True
        isb = bv >= 0
        val[isb] = bv[isb] == 1
        ok[isb] = True
        rest = ~(num | isb) & (ids != 0)
        if rest.any():
            r = self._scalar(("EBV",), [ids[rest]], lambda a: F.ebv(a[0]), as_bool=True)
            val[rest] = r == 1
            ok[rest] = r >= 0
        return Bool(val, ok)

    # ------------------------------------------------------------ evaluation

    def evaluate(self, e: Expr, b: Batch) -> Value:
        n = len(b)
        if isinstance(e, Var):
            return Ids(b.col(e.name))
        if isinstance(e, Const):
            return Ids(np.full(n, e.id, dtype=np.int64))
        if isinstance(e, Bound):
            return Bool(b.col(e.var) != 0, np.ones(n, dtype=bool))
        if isinstance(e, Arith):
            return self._arith(e, b, n)
        if isinstance(e, Unary):
            a = self.as_num(self.evaluate(e.a, b), n)
            return Num(-a.val if e.op == "-" else a.val, a.typ, a.ok)
        if isinstance(e, Cmp):
            return self._cmp(e.op, self.evaluate(e.a, b), self.evaluate(e.b, b), n)
        if isinstance(e, And):
            x, y = self.as_bool(self.evaluate(e.a, b), n), self.as_bool(self.evaluate(e.b, b), n)
            false_x = x.ok & ~x.val
            false_y = y.ok & ~y.val
            val = x.val & y.val & x.ok & y.ok
            return Bool(val, (x.ok & y.ok) | false_x | false_y)
        if isinstance(e, Or):
            x, y = self.as_bool(self.evaluate(e.a, b), n), self.as_bool(self.evaluate(e.b, b), n)
            true_x = x.ok & x.val
            true_y = y.ok & y.val
            return Bool(true_x | true_y, (x.ok & y.ok) | true_x | true_y)
        if isinstance(e, Not):
            x = self.as_bool(self.evaluate(e.a, b), n)
            return Bool(~x.val, x.ok)
        if isinstance(e, If):
            c = self.as_bool(self.evaluate(e.cond, b), n)
            ya = self.values(e.a, b)
            yb = self.values(e.b, b)
            return Ids(np.where(c.ok, np.where(c.val, ya, yb), 0).astype(np.int64))
        if isinstance(e, Coalesce):
            out = np.zeros(n, dtype=np.int64)
            for arg in e.args:
                need = out == 0
                if not need.any():
                    break
                out[need] = self.values(arg, b.mask(need))
            return Ids(out)
        if isinstance(e, In):
            left = self.evaluate(e.a, b)
            acc: Bool | None = None
            for item in e.items:
                r = self.as_bool(self._cmp("=", left, self.evaluate(item, b), n), n)
                if acc is None:
                    acc = r
                else:
                    t1, t2 = acc.ok & acc.val, r.ok & r.val
                    acc = Bool(t1 | t2, (acc.ok & r.ok) | t1 | t2)
            if acc is None:
                acc = Bool(np.zeros(n, dtype=bool), np.ones(n, dtype=bool))
            return Bool(~acc.val, acc.ok) if e.negated else acc
        if isinstance(e, Call):
            return self._call(e, b, n)
        if isinstance(e, Cast):
            ids = self.values(e.a, b)
            dt = e.datatype
            return Ids(self._scalar(("CAST", dt), [ids], lambda t: F.cast(dt, t[0])))
        raise NotImplementedError(f"expression {type(e).__name__} cannot be evaluated here")

    def _arith(self, e: Arith, b: Batch, n: int) -> Value:
        x = self.as_num(self.evaluate(e.a, b), n)
        y = self.as_num(self.evaluate(e.b, b), n)
        ok = x.ok & y.ok
        typ = np.maximum(x.typ, y.typ)
        with np.errstate(all="ignore"):
            if e.op == "+":
                val = x.val + y.val
            elif e.op == "-":
                val = x.val - y.val
            elif e.op == "*":
                val = x.val * y.val
            else:
                typ = np.where(typ == NUM_INTEGER, NUM_DECIMAL, typ).astype(np.int8)
                exact_zero = (y.val == 0) & (typ <= NUM_DECIMAL)
                ok = ok & ~exact_zero
                val = np.where(exact_zero, 0.0, x.val) / np.where(exact_zero, 1.0, y.val)
        fl = typ == NUM_FLOAT
        if fl.any():
            val = np.where(fl, val.astype(np.float32).astype(np.float64), val)
        return Num(val, typ.astype(np.int8), ok)

    def _cmp(self, op: str, a: Value, b: Value, n: int) -> Bool:
        x, y = self.as_num(a, n), self.as_num(b, n)
        both = x.ok & y.ok
        with np.errstate(invalid="ignore"):
            if op == "=":
                val = x.val == y.val
            elif op == "!=":
                val = x.val != y.val
            elif op == "<":
                val = x.val < y.val
            elif op == ">":
                val = x.val > y.val
            elif op == "<=":
                val = x.val <= y.val
            else:
                val = x.val >= y.val
        ok = both.copy()
        rest = ~both
        if rest.any():
            ia = self.as_ids(a, n)[rest]
            ib = self.as_ids(b, n)[rest]
            val = val.copy()
            if op in ("=", "!="):
                # RDFterm-equal without decoding: a non-literal or the same id decides it
                self.terms.ensure(np.concatenate([ia, ib]))
                kind = self.terms.kind
                easy = (
                    (ia != 0)
                    & (ib != 0)
                    & ((kind[ia] != KIND_LITERAL) | (kind[ib] != KIND_LITERAL) | (ia == ib))
                )
                idx = np.flatnonzero(rest)
                val[idx[easy]] = (ia[easy] == ib[easy]) if op == "=" else (ia[easy] != ib[easy])
                ok[idx[easy]] = True
                rest[idx[easy]] = False
                ia, ib = ia[~easy], ib[~easy]
            r = self._scalar(("CMP", op), [ia, ib], lambda t: F.compare(op, t[0], t[1]), as_bool=True)
            val[rest] = r == 1
            ok[rest] = r >= 0
        return Bool(val, ok)

    def _call(self, e: Call, b: Batch, n: int) -> Value:
        name = e.name
        args = [self.values(a, b) for a in e.args]
        if name in ("ISIRI", "ISBLANK", "ISLITERAL") and len(args) == 1:
            ids = args[0]
            self.terms.ensure(ids)
            k = self.terms.kind[ids]
            want = {"ISIRI": 1, "ISBLANK": 2, "ISLITERAL": 3}[name]
            return Bool(k == want, ids != 0)
        if name == "ISNUMERIC" and len(args) == 1:
            ids = args[0]
            self.terms.ensure(ids)
            return Bool(self.terms.num_type[ids] > 0, ids != 0)
        if name == "SAMETERM" and len(args) == 2:
            return Bool(args[0] == args[1], (args[0] != 0) & (args[1] != 0))
        volatile = name in ("RAND", "UUID", "STRUUID", "BNODE", "NOW")
        return Ids(self._scalar(("CALL", name), args, lambda t: F.call(name, t), memo=not volatile, n=n))

    # ------------------------------------------------------------ scalar fallback

    def _scalar(self, key, cols, fn, *, as_bool: bool = False, memo: bool = True, n: int | None = None):
        """Apply ``fn(list of terms)`` once per distinct argument-id combination.

        Returns ids (0 on error) or, with ``as_bool``, int8 codes 1/0 and -1 for error.
        """
        if not cols:
            rows = np.zeros((0, n or 0), dtype=np.int64)
            count = n or 0
        else:
            rows = np.stack(cols)
            count = rows.shape[1]
        out = np.zeros(count, dtype=np.int8 if as_bool else np.int64)
        if count == 0:
            return out
        if rows.shape[0] == 0 or not memo:
            uniq, inv = (rows[:, :1], np.zeros(count, dtype=np.int64)) if memo else (rows, np.arange(count))
            if not memo and rows.shape[0] == 0:
                uniq = np.zeros((0, count), dtype=np.int64)
        else:
            uniq, inv = np.unique(rows, axis=1, return_inverse=True)
            inv = inv.reshape(-1)
        res = np.zeros(uniq.shape[1], dtype=out.dtype)
        memo_d = self._memo
        for j in range(uniq.shape[1]):
            args = tuple(int(x) for x in uniq[:, j])
            mk = (key, args)
            if memo and mk in memo_d:
                res[j] = memo_d[mk]
                continue
            try:
                r = fn(self.terms.terms(args))
                if as_bool:
                    v = 1 if r else 0
                else:
                    v = self.terms.encode_one(r)
            except F.ExprError:
                v = -1 if as_bool else 0
            except (ValueError, ArithmeticError, TypeError, OverflowError):
                v = -1 if as_bool else 0
            res[j] = v
            if memo:
                if len(memo_d) > _MEMO_LIMIT:
                    memo_d.clear()
                memo_d[mk] = v
        out[:] = res[inv]
        return out


def _numeric_literal(val: float, typ: int) -> Literal:
    if typ == NUM_INTEGER:
        return Literal(str(int(val)), XSD_INTEGER)
    if typ == NUM_DECIMAL:
        if val != val or val in (float("inf"), float("-inf")):
            return Literal(format_double(val), XSD_DOUBLE)
        # the value went through binary64 arithmetic: its 15 significant digits are exact
        # (1.1 + 10 is 11.1, not 11.100000000000001), the digits beyond are noise
        return Literal(format_decimal(Decimal(format(val, ".15g"))), XSD_DECIMAL)
    return Literal(format_double(val), _NUM_DT[typ])
