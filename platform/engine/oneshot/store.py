"""One-shot SPARQL 1.1 over a consistent store snapshot, answered by graph exploration.

A query is planned with the continuous-query :class:`~linkstream.engine.planner.Planner`
(so FILTER, OPTIONAL, UNION, MINUS, EXISTS, BIND, VALUES, aggregates, subqueries and
GRAPH use the same operators as continuous queries), except that every basic graph
pattern becomes an :class:`~linkstream.engine.oneshot.explore.ExploreOperator` reading the
snapshot through its indexes: patterns of one group are merged into one exploration,
the filters on their variables are pushed into it, and a VALUES block joined with them
seeds it.  The snapshot is taken once, so the whole query sees one stable vector
timestamp.

The query's own terms (constants absent from the store, computed values such as
``COUNT`` results or ``CONCAT`` strings) never enter the store's dictionary: they get
private ids above the ids the snapshot can contain (:class:`QueryDictionary`).

Every term is the RDF term as written (lexical form and datatype): patterns, joins,
DISTINCT and GROUP BY match terms exactly, while ``=``, ``<``, ORDER BY and the
numeric functions compare literals by value (see :mod:`linkstream.rdf.terms`).

The dataset is SPARQL 1.1's, as :func:`~linkstream.engine.oneshot.embedded.dataset_graphs`
builds it: ``FROM`` / ``FROM NAMED`` replace the store's default graph and named graphs;
the protocol's ``default-graph-uri`` / ``named-graph-uri`` replace them.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from linkstream.engine.oneshot.embedded import dataset_graphs, keep_order, parse_one_shot, term_json
from linkstream.engine.oneshot.explore import ExploreOperator, SnapshotGraph
from linkstream.engine.output import QueryOutput, order_rows
from linkstream.engine.planner import Dataset, Planner, QueryShape
from linkstream.operators.base import Operator
from linkstream.operators.base import explain as explain_plan
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.extend import ExtendOperator
from linkstream.operators.project import ProjectOperator
from linkstream.operators.scan import Slot
from linkstream.operators.values import ConstantOperator
from linkstream.query.continuous import ContinuousQuery
from linkstream.query.errors import QueryError
from linkstream.query.expressions import Expr
from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.terminfo import TermInfo
from linkstream.store.protocol import Snapshot

DEFAULT_BASE = "http://localhost/"


class QueryDictionary:
    """The store's dictionary read-only, plus private ids for terms only queries use.

    Ids below ``start`` are the store's (``start`` is one above the dictionary's size
    when the snapshot was taken, so every id a snapshot triple holds is below it); a term
    the store does not know, or knows only under an id allocated after the snapshot, gets
    a private id ``>= start`` that no snapshot triple can hold.  Terms are looked up
    exactly as written.
    """

    def __init__(self, base: Dictionary, start: int) -> None:
        self.base = base
        self.start = start
        self._ids: dict[str, int] = {}
        self._terms: list[str] = []

    def encode_many(self, terms: Sequence[str]) -> np.ndarray:
        ids = np.asarray(self.base.lookup_many(terms), dtype=np.int64).copy()
        for k in np.flatnonzero((ids == 0) | (ids >= self.start)).tolist():
            t = terms[k]
            i = self._ids.get(t)
            if i is None:
                i = self.start + len(self._terms)
                self._ids[t] = i
                self._terms.append(t)
            ids[k] = i
        return ids

    def lookup_many(self, terms: Sequence[str]) -> np.ndarray:
        ids = np.asarray(self.base.lookup_many(terms), dtype=np.int64).copy()
        for k in np.flatnonzero((ids == 0) | (ids >= self.start)).tolist():
            ids[k] = self._ids.get(terms[k], 0)
        return ids

    def decode_many(self, ids: np.ndarray | Sequence[int]) -> list[str]:
        a = np.asarray(ids, dtype=np.int64).reshape(-1)
        mine = a >= self.start
        if not mine.any():
            return self.base.decode_many(a)
        out: list[str] = [""] * len(a)
        low = np.flatnonzero(~mine)
        if len(low):
            for k, t in zip(low.tolist(), self.base.decode_many(a[low])):
                out[k] = t
        for k in np.flatnonzero(mine).tolist():
            j = int(a[k]) - self.start
            if j >= len(self._terms):
                raise KeyError(int(a[k]))
            out[k] = self._terms[j]
        return out

    def __len__(self) -> int:
        return self.start - 1 + len(self._terms)

    def close(self) -> None:
        """Nothing to release (the store owns the base dictionary)."""


class _Session:
    """Term facts reused by the queries over one dictionary (decoding them is the slow part)."""

    def __init__(self, base: Dictionary) -> None:
        self.base = base
        self.lock = threading.Lock()
        self.terms: TermInfo | None = None
        self.evaluator: Evaluator | None = None

    def begin(self) -> Evaluator:
        """The evaluator for a query over a snapshot taken just before (lock held)."""
        size = len(self.base)
        terms = self.terms
        if (
            terms is not None
            and isinstance(terms.dictionary, QueryDictionary)
            and size < terms.dictionary.start
        ):
            assert self.evaluator is not None
            return self.evaluator
        start = size + 1
        if terms is None:
            terms = TermInfo(QueryDictionary(self.base, start))
        else:
            # the store grew into the private ids: forget them, keep what is known of the
            # store's own ids (they never change meaning)
            keep = min(
                terms.size, terms.dictionary.start if isinstance(terms.dictionary, QueryDictionary) else 0
            )
            _truncate(terms, keep)
            terms.dictionary = QueryDictionary(self.base, start)
        self.terms = terms
        self.evaluator = Evaluator(terms)
        return self.evaluator


def _truncate(terms: TermInfo, keep: int) -> None:
    keep = max(keep, 1)
    terms.truncate(keep)
    for i in [i for i in terms._terms if i >= keep]:
        del terms._terms[i]
    if terms._true >= keep or terms._false >= keep:
        terms._true = terms._false = 0


_SESSIONS: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()
_SESSIONS_LOCK = threading.Lock()


def _session(dictionary: Dictionary) -> _Session:
    with _SESSIONS_LOCK:
        try:
            s = _SESSIONS.get(dictionary)
            if s is None:
                s = _SESSIONS[dictionary] = _Session(dictionary)
        except TypeError:  # not weakly referenceable: no reuse across queries
            s = _Session(dictionary)
        return s


class StorePlanner(Planner):
    """The continuous-query planner with basic graph patterns explored in the snapshot."""

    scoped_bnodes = True

    def _pattern_leaves(self, patterns: list[tuple[Slot, Slot, Slot]], graph: Operator) -> list[Operator]:
        if patterns and isinstance(graph, SnapshotGraph):
            return [ExploreOperator(graph, patterns, evaluator=self.ev)]
        return super()._pattern_leaves(patterns, graph)

    def _join(self, leaves: list[Operator], filters: list[Expr]) -> Operator:
        groups: dict[int, list[ExploreOperator]] = {}
        others: list[Operator] = []
        for x in leaves:
            if isinstance(x, ExploreOperator) and x.seed is None and not x.filters:
                groups.setdefault(id(x.graph), []).append(x)
            else:
                others.append(x)
        explores = []
        for group in groups.values():
            pats = [p for x in group for p in x.patterns]
            explores.append(ExploreOperator(group[0].graph, pats, evaluator=self.ev))
        if len(explores) == 1:
            # a VALUES block joined with the patterns: explore from its rows
            seeds = [
                x
                for x in others
                if isinstance(x, ConstantOperator)
                and x.vars
                and set(x.vars) <= x.certain
                and set(x.vars) & set(explores[0].vars)
            ]
            if seeds:
                e = explores[0]
                explores[0] = ExploreOperator(e.graph, e.patterns, evaluator=self.ev, seed=seeds[0])
                others.remove(seeds[0])
            e = explores[0]
            pushed = [f for f in filters if f.vars() <= e.certain]
            if pushed:
                explores[0] = ExploreOperator(e.graph, e.patterns, pushed, self.ev, e.seed)
                filters = [f for f in filters if f not in pushed]
        return super()._join(explores + others, filters)


def _snapshot_and_dictionary(
    store_or_snapshot: Any, dictionary: Dictionary | None
) -> tuple[Snapshot, Dictionary]:
    if callable(getattr(store_or_snapshot, "snapshot", None)):
        snap = store_or_snapshot.snapshot()
        d = dictionary if dictionary is not None else store_or_snapshot.dictionary
    else:
        snap = store_or_snapshot
        d = dictionary if dictionary is not None else getattr(snap, "dictionary", None)
        if d is None:
            raise ValueError("run_sparql on a bare snapshot needs its store's dictionary")
    return snap, d


def run_sparql(
    store_or_snapshot: Any,
    text: str,
    default_graphs: Sequence[str | None] | None = None,
    named_graphs: Sequence[str] | None = None,
    *,
    dictionary: Dictionary | None = None,
    base: str = DEFAULT_BASE,
    source: str | None = None,
    explain: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Parses and answers a one-shot SPARQL 1.1 query over a store (or one snapshot).

    Args:
        store_or_snapshot: A :class:`~linkstream.store.protocol.Store` (a fresh snapshot
            is taken) or a :class:`~linkstream.store.protocol.Snapshot`.
        text: A SELECT, ASK or CONSTRUCT query.
        default_graphs: Graph IRIs whose merge is the default graph (``None`` in it
            names the store's default graph); replaces the query's ``FROM``.
        named_graphs: The named graphs; replaces the query's ``FROM NAMED``.
        dictionary: The store's dictionary (needed only with a bare snapshot that has
            no ``dictionary`` attribute).
        base: Base IRI for relative IRIs in the query.
        source: Name of the query's origin for error messages (e.g. its file name).
        explain: Receives the operator plan (with the triples each exploration looked
            at) once the query has run.

    Returns:
        SPARQL 1.1 Query Results JSON: ``{"head": {"vars"}, "results": {"bindings"}}``,
        ``{"head": {}, "boolean"}`` for ASK, or ``{"triples": [N-Triples statements]}``
        for CONSTRUCT.

    Raises:
        QueryError: The query does not parse (``source:line:col: message``) or cannot
            be planned.
    """
    try:
        cq = parse_one_shot(text, base)
    except QueryError as e:
        raise e.located(e.line, e.column, source) from None
    return evaluate_on_store(
        store_or_snapshot, cq, default_graphs, named_graphs, dictionary=dictionary, explain=explain
    )


def evaluate_on_store(
    store_or_snapshot: Any,
    cq: ContinuousQuery,
    default_graphs: Sequence[str | None] | None = None,
    named_graphs: Sequence[str] | None = None,
    *,
    dictionary: Dictionary | None = None,
    explain: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Answers a parsed window-less query over one snapshot (see :func:`run_sparql`)."""
    snap, base_dict = _snapshot_and_dictionary(store_or_snapshot, dictionary)
    session = _session(base_dict)
    with session.lock:
        ev = session.begin()
        return _evaluate(snap, cq, ev, default_graphs, named_graphs, explain)


def _evaluate(
    snap: Snapshot,
    cq: ContinuousQuery,
    ev: Evaluator,
    default_graphs: Sequence[str | None] | None,
    named_graphs: Sequence[str] | None,
    explain: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    dflt_keys, named_iris = dataset_graphs(cq, default_graphs, named_graphs, snap.graphs())
    ds = Dataset(
        default=SnapshotGraph(snap, dflt_keys, "default"),
        named={g: SnapshotGraph(snap, (g,), g) for g in named_iris},
        empty=SnapshotGraph(None, (), "empty"),
    )
    algebra, unlimited = keep_order(_construct_where(cq.algebra.algebra))
    try:
        root, shape = StorePlanner(ds, ev).plan_query(algebra)
    except QueryError:
        raise
    except (ValueError, NotImplementedError, KeyError, TypeError, AttributeError) as e:
        raise QueryError(f"cannot plan the query: {e}") from None
    if unlimited:
        shape.limit = None
    _push_limit(root, shape)
    try:
        return _results(root, shape, ev)
    finally:
        if explain is not None:
            explain(explain_plan(root))


def _push_limit(root: Operator, shape: QueryShape) -> None:
    """Lets a lone exploration stop once the rows the solution modifiers keep exist.

    Only when nothing between the exploration and the output drops rows or needs all of
    them: no ORDER BY, DISTINCT, aggregate, join or filter above it (filters pushed into
    the exploration are applied inside it).  ASK needs one row.
    """
    if shape.form == "ASK":
        need: int | None = 1
    elif shape.form == "SELECT" and shape.limit is not None and not shape.order and not shape.distinct:
        need = shape.offset + shape.limit
    else:
        return
    node = root
    while isinstance(node, (ExtendOperator, ProjectOperator)) and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, ExploreOperator):
        node.limit = need


def _results(root: Operator, shape: QueryShape, ev: Evaluator) -> dict[str, Any]:
    if shape.form == "CONSTRUCT":
        out = QueryOutput("sparql", "RSTREAM", root, shape, ev)
        return {"triples": [json.loads(line)["triple"] for line in out.lines(1, 0)]}
    d = consolidate(root.delta(1))
    rows = d.take(d.expand()) if len(d) else d
    if shape.form == "ASK":
        return {"head": {}, "boolean": bool(len(rows))}
    if shape.order and len(rows):
        rows = rows.take(order_rows(ev, rows, shape.order))
    names = shape.project if shape.project is not None else tuple(v for v in root.vars if v[0] != "_")
    rows = rows.project(names)
    if shape.distinct and len(rows):
        _, first = np.unique(rows.cols, axis=1, return_index=True)
        rows = rows.take(np.sort(first))
    if shape.offset or shape.limit is not None:
        end = None if shape.limit is None else shape.offset + shape.limit
        rows = rows.take(np.arange(len(rows))[shape.offset : end])
    return {"head": {"vars": list(names)}, "results": {"bindings": bindings_json(ev.terms.dictionary, rows)}}


def _construct_where(q: Any) -> Any:
    """``CONSTRUCT WHERE { BGP }`` with its template spelled out (rdflib leaves it ``None``)."""
    if q.name != "ConstructQuery" or q.template is not None:
        return q
    node = q.p
    while node.name in ("Project", "ToMultiSet", "Distinct", "Reduced", "Slice", "OrderBy"):
        node = node.p
    if node.name != "BGP":
        raise QueryError("CONSTRUCT WHERE needs a basic graph pattern")
    q = q.clone()
    q["template"] = list(node.triples)
    return q


def bindings_json(dictionary: Any, rows: Batch) -> list[dict[str, Any]]:
    """SPARQL JSON bindings of ``rows`` (unbound columns, id 0, are left out).

    Each distinct term is converted once; rows share the term objects.
    """
    if not len(rows) or not rows.vars:
        return [{} for _ in range(len(rows))]
    uniq = np.unique(rows.cols)
    uniq = uniq[uniq != 0]
    terms: list[Any] = [fast_term_json(t) for t in dictionary.decode_many(uniq)]
    terms.append(None)  # where an unbound column's 0 lands after the shift below
    pos = np.searchsorted(uniq, rows.cols)
    pos[rows.cols == 0] = len(terms) - 1
    names = rows.vars
    per_var = [[terms[i] for i in pos[j].tolist()] for j in range(len(names))]
    if not (rows.cols == 0).any():
        return [dict(zip(names, vals)) for vals in zip(*per_var)]
    return [{k: t for k, t in zip(names, vals) if t is not None} for vals in zip(*per_var)]


def fast_term_json(nt: str) -> dict[str, Any]:
    """:func:`~linkstream.engine.oneshot.embedded.term_json` without a full parse for unescaped terms."""
    c = nt[0]
    if "\\" not in nt:
        if c == "<":
            return {"type": "uri", "value": nt[1:-1]}
        if c == "_":
            return {"type": "bnode", "value": nt[2:]}
        if c == '"':
            end = nt.rfind('"')
            lex, rest = nt[1:end], nt[end + 1 :]
            if not rest:
                return {"type": "literal", "value": lex}
            if rest[0] == "@":
                return {"type": "literal", "value": lex, "xml:lang": rest[1:].lower()}
            if rest.startswith("^^<") and rest[-1] == ">":
                dt = rest[3:-1]
                if dt == _XSD_STRING:
                    return {"type": "literal", "value": lex}
                return {"type": "literal", "value": lex, "datatype": dt}
    return term_json(nt)


_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


__all__ = [
    "run_sparql",
    "evaluate_on_store",
    "QueryDictionary",
    "StorePlanner",
    "bindings_json",
    "fast_term_json",
]
