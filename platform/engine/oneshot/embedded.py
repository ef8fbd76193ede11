"""One-shot SPARQL 1.1 queries over the static graphs, with SPARQL 1.1 Query Results JSON.

A one-shot query is planned with the same :class:`~linkstream.engine.planner.Planner` and
operators as continuous queries, on a dataset of static
:class:`~linkstream.operators.graph.GraphOperator` instances only (no window), and
evaluated by pulling a single epoch: the first delta of every operator is its whole
result.  The operators are private to the query (never shared with continuous queries)
and dropped afterwards.  Top-level ORDER BY, DISTINCT, projection and LIMIT/OFFSET are
applied to the result rows here, as the output edge of a continuous query does.

The dataset is SPARQL 1.1's (:func:`dataset_graphs`): ``FROM`` / ``FROM NAMED`` replace
the static default graph and the named static graphs; the SPARQL protocol's
``default-graph-uri`` / ``named-graph-uri`` replace them.

Must run on the thread that owns the engine (it allocates dictionary ids for the
query's constants).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.output import QueryOutput, order_rows
from linkstream.engine.planner import Dataset, Planner
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.graph import GraphOperator
from linkstream.query.algebra_json import Node
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.query.errors import QueryError
from linkstream.rdf.terms import IRI, XSD_STRING, BNode, parse_term

if TYPE_CHECKING:  # the continuous engine is not needed to answer over a store
    from linkstream.engine.embedded import Engine

_NO_LIMIT = 1 << 62  # a LIMIT that keeps every row, so that the planner keeps ORDER BY


def parse_one_shot(text: str, base: str) -> ContinuousQuery:
    """Parses a plain SPARQL 1.1 SELECT, ASK or CONSTRUCT query.

    Raises:
        QueryError: It does not parse (with line and column), reads a stream window, or
            is a DESCRIBE.
    """
    cq = parse_continuous(text, default_name="sparql", base=base)
    if cq.windows:
        raise QueryError("a one-shot query cannot read stream windows; register it as a continuous query")
    if cq.form == "DESCRIBE":
        raise QueryError("DESCRIBE is not supported")
    return cq


def evaluate_one_shot(
    engine: Engine,
    cq: ContinuousQuery,
    default_graphs: tuple[str, ...] | None = None,
    named_graphs: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Evaluates a parsed window-less query once over ``engine``'s static graphs.

    Args:
        engine: The engine whose static graphs, dictionary and evaluator are used.
        cq: A SELECT, ASK or CONSTRUCT query without windows.
        default_graphs: Graph IRIs whose merge is the default graph (protocol override).
        named_graphs: The named graphs (protocol override).

    Returns:
        ``{"head": {"vars"}, "results": {"bindings"}}`` (SELECT), ``{"head": {}, "boolean"}``
        (ASK), or ``{"triples": [N-Triples statements]}`` (CONSTRUCT).

    Raises:
        QueryError: The query cannot be planned.
    """
    store = getattr(engine, "store", None)
    if callable(getattr(store, "snapshot", None)):  # a store-backed engine answers as `linkstream sparql`
        from linkstream.engine.oneshot.store import evaluate_on_store

        return evaluate_on_store(store, cq, default_graphs, named_graphs)
    statics = engine.statics
    dflt_keys, named_iris = dataset_graphs(cq, default_graphs, named_graphs, statics)
    # Engine caches the merged, deduplicated array of each graph combination
    default = GraphOperator("default", engine._static_triples(dflt_keys), deduplicated=True)
    named: dict[str, GraphOperator] = {
        g: GraphOperator(g, engine._static_triples((g,)), deduplicated=True) for g in named_iris
    }
    ds = Dataset(default=default, named=dict(named), empty=GraphOperator("empty", None))
    algebra, unlimited = keep_order(cq.algebra.algebra)
    try:
        root, shape = Planner(ds, engine.evaluator).plan_query(algebra)
    except QueryError:
        raise
    except (ValueError, NotImplementedError, KeyError, TypeError, AttributeError) as e:
        raise QueryError(f"cannot plan the query: {e}") from None
    if unlimited:
        shape.limit = None
    if shape.form == "CONSTRUCT":
        out = QueryOutput("sparql", "RSTREAM", root, shape, engine.evaluator)
        return {"triples": [json.loads(line)["triple"] for line in out.lines(1, 0)]}
    d = consolidate(root.delta(1))
    rows = d.take(d.expand()) if len(d) else d
    if shape.form == "ASK":
        return {"head": {}, "boolean": bool(len(rows))}
    if shape.order and len(rows):
        rows = rows.take(order_rows(engine.evaluator, rows, shape.order))
    names = shape.project if shape.project is not None else tuple(v for v in root.vars if v[0] != "_")
    rows = rows.project(names)
    if shape.distinct and len(rows):
        _, first = np.unique(rows.cols, axis=1, return_index=True)
        rows = rows.take(np.sort(first))
    if shape.offset or shape.limit is not None:
        end = None if shape.limit is None else shape.offset + shape.limit
        rows = rows.take(np.arange(len(rows))[shape.offset : end])
    return {"head": {"vars": list(names)}, "results": {"bindings": _bindings(engine, rows)}}


def dataset_graphs(
    cq: ContinuousQuery,
    default_graphs: Sequence[str | None] | None,
    named_graphs: Sequence[str] | None,
    graphs: Iterable[str | None],
) -> tuple[tuple[str | None, ...], list[str]]:
    """The graphs of a one-shot query's dataset: (default graph keys, named graph IRIs).

    As SPARQL 1.1 (section 13.2) defines it: a query with ``FROM`` / ``FROM NAMED``
    replaces the dataset (the default graph is the merge of the ``FROM`` graphs, empty
    with ``FROM NAMED`` alone; the named graphs are the ``FROM NAMED`` graphs, none with
    ``FROM`` alone); without either, the default graph is the store's (``None``) and
    every named graph of ``graphs`` is a named graph.  The protocol's
    ``default-graph-uri`` / ``named-graph-uri`` replace both.
    """
    described = bool(cq.static_from or cq.static_named)
    if default_graphs is not None:
        dflt: tuple[str | None, ...] = tuple(dict.fromkeys(default_graphs))
    elif described:
        dflt = tuple(dict.fromkeys(cq.static_from))
    else:
        dflt = (None,)
    if named_graphs is not None:
        named = list(dict.fromkeys(named_graphs))
    elif described:
        named = list(dict.fromkeys(cq.static_named))
    else:
        named = sorted(g for g in graphs if g is not None)
    return dflt, named


def keep_order(q: Any) -> tuple[Any, bool]:
    """``q`` with ORDER BY kept by the planner (it drops it without LIMIT/OFFSET).

    Returns:
        The (possibly wrapped) query and whether an unbounded slice was added.
    """
    node = q.p
    if q.name != "SelectQuery":
        return q, False
    if node.name == "Slice":
        if dict.get(node, "start") or dict.get(node, "length") is not None:
            return q, False  # the planner keeps ORDER BY under a real slice
        # ``OFFSET 0``: a slice that keeps every row, and ORDER BY with it
        node = node.p
    n = node
    while n.name in ("Distinct", "Reduced", "Project"):
        n = n.p
    if n.name != "OrderBy":
        return q, False
    wrapped = q.clone()
    wrapped["p"] = Node("Slice", p=node, start=0, length=_NO_LIMIT)
    return wrapped, True


def _bindings(engine: Engine, rows: Batch) -> list[dict[str, Any]]:
    if not len(rows):
        return []
    uniq = np.unique(rows.cols)
    uniq = uniq[uniq != 0]
    texts = engine.dictionary.decode_many(uniq)
    terms = [term_json(t) for t in texts]
    pos = np.searchsorted(uniq, rows.cols)
    out = []
    names = rows.vars
    for r, p in zip(rows.cols.T.tolist(), pos.T.tolist()):
        out.append({names[j]: terms[p[j]] for j in range(len(r)) if r[j]})
    return out


def term_json(nt: str) -> dict[str, Any]:
    """The SPARQL 1.1 Query Results JSON form of one N-Triples term.

    Args:
        nt: A canonical N-Triples term (``<iri>``, ``_:b``, ``"lex"``, ``"lex"@en``,
            ``"lex"^^<dt>``).  A term this parser does not know (an RDF 1.2 triple term)
            is returned as a plain literal of its N-Triples text.
    """
    try:
        term = parse_term(nt)
    except ValueError:
        return {"type": "literal", "value": nt}
    if isinstance(term, IRI):
        return {"type": "uri", "value": term.value}
    if isinstance(term, BNode):
        return {"type": "bnode", "value": term.value}
    out: dict[str, Any] = {"type": "literal", "value": term.lex}
    if term.lang:
        out["xml:lang"] = term.lang
    elif term.datatype != XSD_STRING:
        out["datatype"] = term.datatype
    return out
