"""SPARQL rules rdflib misses or misplaces: where a parse really failed, and the checks it leaves out.

rdflib parses SPARQL for us, but it reports syntax errors far from the mistake and
accepts queries that SPARQL 1.1 (and the reference evaluator, Oxigraph) rejects:
:func:`trace_parse_failure` finds where its pyparsing grammar really got stuck, and
:func:`check_sparql_rules` applies the rules it leaves out.  Both report
:class:`~linkstream.query.errors.QueryError`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyparsing
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Variable

from linkstream.rdf.records import record

if TYPE_CHECKING:  # the lexer imports QueryError, this module imports the lexer only for types
    from linkstream.query.lexer import Token, TokenStream


# --------------------------------------------------------------------------- SPARQL syntax errors


@record(frozen=True)
class ParseFailure:
    """Where a pyparsing grammar got furthest before failing.

    Attributes:
        offset: Offset in the parsed string of the furthest failure.
        expected: The literal tokens that were expected there (sorted).
        action_error: Message of a non-syntax exception raised by a parse action, if
            that is what stopped the parse (``offset`` is then where its element started).
    """

    offset: int
    expected: tuple[str, ...] = ()
    action_error: str | None = None


class _Tracking(threading.local):
    active = False
    far = -1
    expected: set[str] = set()  # replaced at every run
    action_offset: int | None = None
    action_error: str | None = None


_TRACK = _Tracking()
#: Held around every use of rdflib's pyparsing grammar in this process.  pyparsing is not
#: thread-safe: a parse action's arity is found by trial on its first calls, and two threads
#: calling it first at once can fix a wrong one for good (every later parse then fails with
#: "postParse2() missing 1 required positional argument"); failure tracing also patches
#: ``ParserElement`` itself.  Parsing holds the GIL anyway, so the lock costs no throughput.
PARSE_LOCK = threading.RLock()
_TRACK_LOCK = PARSE_LOCK
_ORIGINAL_PARSE = pyparsing.ParserElement._parseNoCache


def _tracking_parse(
    self: pyparsing.ParserElement, instring: str, loc: int, do_actions: bool = True, callPreParse: bool = True
) -> Any:
    try:
        return _ORIGINAL_PARSE(self, instring, loc, do_actions, callPreParse)
    except pyparsing.ParseBaseException as e:
        tr = _TRACK
        literal = getattr(self, "match", None)
        if tr.active and isinstance(self, pyparsing.Token) and literal != "#":
            if e.loc > tr.far:
                tr.far, tr.expected = e.loc, set()
            if e.loc == tr.far and isinstance(literal, str) and literal:
                tr.expected.add(literal)
        raise
    except RecursionError:
        raise
    except Exception as e:
        tr = _TRACK
        if tr.active and tr.action_error is None:
            while loc < len(instring) and instring[loc].isspace():
                loc += 1
            tr.action_offset, tr.action_error = loc, str(e)
        raise


def trace_parse_failure(grammar: pyparsing.ParserElement, text: str, fallback: int) -> ParseFailure:
    """Parses ``text`` again, recording the furthest position any grammar token failed at.

    pyparsing reports the start of the outermost alternative that failed, which is often
    far before the real mistake; like a PEG parser's error report (and Oxigraph's), the
    furthest failure is usually the offending token.  pyparsing's element class is
    patched for the duration of this call only, under a lock.

    Args:
        grammar: The grammar that rejected ``text``.
        text: The rejected text.
        fallback: pyparsing's own error offset, used if the trace finds nothing better.

    Returns:
        The failure.
    """
    with _TRACK_LOCK:
        tr = _TRACK
        tr.active, tr.far, tr.expected, tr.action_offset, tr.action_error = True, -1, set(), None, None
        patched_parse = pyparsing.ParserElement._parse is _ORIGINAL_PARSE
        pyparsing.ParserElement._parseNoCache = _tracking_parse  # type: ignore[method-assign]  # parse tracing patch
        if patched_parse:
            pyparsing.ParserElement._parse = _tracking_parse
        try:
            grammar.parse_string(text, parse_all=True)
        except RecursionError:
            pass
        except Exception:  # the trace is what we want, not the exception
            pass
        finally:
            pyparsing.ParserElement._parseNoCache = _ORIGINAL_PARSE  # type: ignore[method-assign]  # parse tracing patch
            if patched_parse:
                pyparsing.ParserElement._parse = _ORIGINAL_PARSE
            tr.active = False
    if tr.action_error is not None and tr.action_offset is not None:
        return ParseFailure(tr.action_offset, (), tr.action_error)
    if tr.far < 0:
        return ParseFailure(fallback)
    return ParseFailure(tr.far, tuple(sorted(tr.expected)))


def describe_failure(failure: ParseFailure, near: str | None) -> str:
    """The one-line message for a SPARQL parse failure.

    Args:
        failure: Where and why the parse failed.
        near: The quoted token found at ``failure.offset``, or ``None`` at the end of the text.

    Returns:
        E.g. ``syntax error near ')', expected one of '!', '$', '(', ...``.
    """
    if failure.action_error is not None:
        return failure.action_error
    expected = [x for x in failure.expected if x != ":"]
    hint = ""
    if expected:
        shown = ", ".join("'%s'" % x for x in expected[:8]) + (", ..." if len(expected) > 8 else "")
        hint = ", expected %s%s" % ("one of " if len(expected) > 1 else "", shown)
    if near is None:
        return "unexpected end of query" + hint
    return "syntax error near %s%s" % (near, hint)


# --------------------------------------------------------------------------- SPARQL rules rdflib does not enforce

_WRAPPERS = frozenset(
    "ConditionalOrExpression ConditionalAndExpression RelationalExpression AdditiveExpression "
    "MultiplicativeExpression".split()
)
_AGGREGATES = frozenset("Aggregate_" + a for a in "Count Sum Min Max Avg Sample GroupConcat".split())
_NOT_PROJECTED = _AGGREGATES | {"Builtin_EXISTS", "Builtin_NOTEXISTS"}
_SUBSELECT = frozenset(("SubSelect",))


def _g(node: Any, key: str) -> Any:
    """``node[key]`` of a CompValue, or None (CompValue.get returns the key when missing)."""
    return dict.get(node, key) if isinstance(node, CompValue) else None


def iter_tree(node: Any, stop: frozenset[str] = frozenset()) -> Iterator[Any]:
    """CompValues and terms of a parse tree in document order, not entering those in ``stop``."""
    if isinstance(node, CompValue):
        if node.name not in stop:
            yield node
            for v in node.values():
                yield from iter_tree(v, stop)
    elif isinstance(node, (list, tuple, pyparsing.ParseResults)):
        for v in node:
            yield from iter_tree(v, stop)
    else:
        yield node


def _nodes(node: Any, stop: frozenset[str] = frozenset()) -> list[CompValue]:
    return [x for x in iter_tree(node, stop) if isinstance(x, CompValue)]


def _variables(node: Any, stop: frozenset[str] = frozenset()) -> list[Variable]:
    return [x for x in iter_tree(node, stop) if isinstance(x, Variable)]


def _unwrap(e: Any) -> Any:
    while isinstance(e, CompValue) and e.name in _WRAPPERS and list(e.keys()) == ["expr"]:
        e = e["expr"]
    return e


def _scope(p: Any) -> set[Variable]:
    """In-scope variables of a group or sub-select (SPARQL 1.1 section 18.2.1, as Oxigraph)."""
    if not isinstance(p, CompValue):
        return set()
    if p.name == "SubSelect":
        if _g(p, "projection") is None:
            return _scope(_g(p, "where")) | _values_vars(p)
        return {_g(item, "var") or _g(item, "evar") for item in _g(p, "projection")}
    out: set[Variable] = set()
    for part in _g(p, "part") or [] if p.name == "GroupGraphPatternSub" else []:
        out |= _part_scope(part)
    return out


def _part_scope(part: CompValue) -> set[Variable]:
    name = part.name
    if name == "TriplesBlock":
        return set(_variables(part))
    if name in ("OptionalGraphPattern", "ServiceGraphPattern"):
        return _scope(_g(part, "graph"))
    if name == "GroupOrUnionGraphPattern":
        return set().union(*(_scope(g) for g in _g(part, "graph") or []))
    if name == "GraphGraphPattern":
        term = _g(part, "term")
        return ({term} if isinstance(term, Variable) else set()) | _scope(_g(part, "graph"))
    if name == "Bind":
        return {_g(part, "var")}
    if name == "InlineData":
        return set(_g(part, "var") or [])
    return set()


def _values_vars(select: CompValue) -> set[Variable]:
    clause = _g(select, "valuesClause")
    return set(_g(clause, "var") or []) if isinstance(clause, CompValue) else set()


def _group_vars(groupby: Any) -> set[Variable]:
    out: set[Variable] = set()
    for c in _g(groupby, "condition") or [] if isinstance(groupby, CompValue) else []:
        e = _unwrap(_g(c, "expr") if isinstance(c, CompValue) and c.name == "GroupAs" else c)
        if isinstance(e, Variable):  # GROUP BY (?x AS ?y) groups by ?x only, as Oxigraph does
            out.add(e)
        elif isinstance(c, CompValue) and c.name == "GroupAs" and _g(c, "var") is not None:
            out.add(_g(c, "var"))
    return out


class _Problems:
    """Semantic errors found in the parse tree; the first one in the text is raised."""

    def __init__(self, stream: TokenStream) -> None:
        self.stream = stream
        self.found: list[tuple[int, str]] = []
        sig = [stream.toks[i] for i in stream.sig]
        self.keyword_js = {w: [j for j, t in enumerate(sig) if t.kw(w)] for w in ("SELECT", "BIND", "VALUES")}

    def add(self, message: str, tok: Token | None) -> None:
        self.found.append((tok.start if tok is not None else len(self.stream.text), message))

    def keyword(self, word: str, k: int) -> int | None:
        js = self.keyword_js[word]
        return js[k] if k < len(js) else None

    def var(self, j: int | None, var: Variable, mode: str = "any", nth: int = 1) -> Token | None:
        """The token of ``var`` after sig index ``j`` (see :meth:`TokenStream.find_var`)."""
        k = self.stream.find_var(j, str(var), mode, nth)
        return self.stream.tok(k if k is not None else j if j is not None else 0)


def check_sparql_rules(stream: TokenStream, tree: Any, form_j: int | None) -> None:
    """Rejects what rdflib's parser accepts but SPARQL 1.1 (and the reference, Oxigraph) does not.

    Aggregates and grouping (projected variables must be grouped, no ``SELECT *`` with
    GROUP BY, no AS over a bound variable, no duplicates), BIND over a variable already in
    scope, and VALUES rows of the wrong length or with repeated variables.

    Args:
        stream: The query's tokens, to name the offending token.
        tree: rdflib's parse tree (``parser.Query.parse_string`` result) of the query.
        form_j: Index of the query form keyword among the significant tokens.

    Raises:
        QueryError: For the problem that comes first in the text.
    """
    probs = _Problems(stream)
    counts = {"SELECT": 0, "BIND": 0, "VALUES": 0}
    for node in _nodes(tree[-1]):
        if node.name in ("SelectQuery", "SubSelect"):
            _check_projection(probs, node, probs.keyword("SELECT", counts["SELECT"]))
            counts["SELECT"] += 1
        elif node.name in ("AskQuery", "ConstructQuery", "DescribeQuery"):
            _check_projection(probs, node, form_j)
        elif node.name == "GroupGraphPatternSub":
            _check_binds(probs, node, counts["BIND"])
        elif node.name in ("InlineData", "ValuesClause"):
            _check_values(probs, node, probs.keyword("VALUES", counts["VALUES"]))
            counts["VALUES"] += 1
        elif node.name == "Bind":
            counts["BIND"] += 1
    if probs.found:
        offset, message = min(probs.found, key=lambda found: found[0])
        stream.fail(message, offset)


def _check_projection(probs: _Problems, node: CompValue, j: int | None) -> None:
    groupby = _g(node, "groupby")
    aggregated = groupby is not None or any(
        n.name in _AGGREGATES for v in node.values() for n in _nodes(v, _SUBSELECT)
    )
    if aggregated:
        visible = _group_vars(groupby) | _values_vars(node)
    else:
        visible = _scope(_g(node, "where")) | _values_vars(node)
    if node.name not in ("SelectQuery", "SubSelect"):
        if aggregated:
            k = probs.stream.after(j, lambda t: t.kw("GROUP", "HAVING"))
            at = probs.stream.tok(k if k is not None else j or 0)
            probs.add("GROUP BY and aggregates need SELECT with an explicit projection", at)
        return
    projection = _g(node, "projection")
    if projection is None:
        if aggregated:
            star = probs.stream.after(j, lambda t: t.is_punct("*"))
            probs.add("SELECT * is not allowed with GROUP BY or aggregates", probs.stream.tok(star or j or 0))
        return
    seen: list[Variable] = []
    plain_seen: list[Variable] = []
    ungrouped = "?%s must be grouped (GROUP BY) or used in an aggregate"
    for item in projection:
        var, mode = _g(item, "var"), "plain"
        if var is not None:
            if aggregated and var not in visible:
                probs.add(ungrouped % var, probs.var(j, var, mode))
        else:
            var, mode = _g(item, "evar"), "as"
            if var in visible:
                probs.add(
                    "?%s is already bound and cannot be redefined with AS" % var,
                    probs.var(j, var, mode),
                )
            elif aggregated:
                for v in _variables(_g(item, "expr"), _NOT_PROJECTED):
                    if v not in visible:
                        probs.add(ungrouped % v, probs.var(j, v, "expr"))
                        break
        if mode == "plain":
            plain_seen.append(var)
        if var in seen:
            nth = plain_seen.count(var) if mode == "plain" else 1
            probs.add("?%s appears twice in SELECT" % var, probs.var(j, var, mode, nth))
        seen.append(var)


def _check_binds(probs: _Problems, group: CompValue, first_bind: int) -> None:
    """BIND may not assign a variable already in scope in its group (SPARQL 1.1 18.2.1)."""
    scope: set[Variable] = set()
    k = first_bind
    for part in _g(group, "part") or []:
        if part.name == "Bind":
            var = _g(part, "var")
            if var in scope:
                j = probs.keyword("BIND", k)
                at = probs.var(j, var, "as")
                probs.add("BIND assigns ?%s, which is already bound in this group" % var, at)
        k += sum(1 for n in _nodes(part) if n.name == "Bind")
        scope |= _part_scope(part)


def _check_values(probs: _Problems, node: CompValue, j: int | None) -> None:
    variables = list(_g(node, "var") or [])
    for n, var in enumerate(variables):
        if var in variables[:n]:
            probs.add("?%s is repeated in VALUES" % var, probs.var(j, var, nth=2))
    if j is None or not (t := probs.stream.tok(j + 1)) or not t.is_punct("("):
        return
    stream = probs.stream
    opening = stream.after(j, lambda t: t.is_punct("{"))
    closing = stream.after(opening, lambda t: t.is_punct("}"))
    rows = [
        t for k in range(opening or 0, closing or 0) if (t := stream.tok(k)) is not None and t.is_punct("(")
    ]
    for r, row in enumerate(_g(node, "value") or []):
        if len(row) != len(variables):
            probs.add(
                "VALUES row has %d values for %d variables" % (len(row), len(variables)),
                rows[r] if r < len(rows) else stream.tok(j),
            )
