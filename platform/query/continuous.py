"""Continuous queries: C-SPARQL, CQELS-QL and RSP-QL parsed into plain SPARQL 1.1 plus windows.

:func:`parse_continuous` accepts what the reference evaluator (``shared/tools/oracle.py``)
accepts and reads windows exactly as it does (``docs/semantics.md`` §3, §5
and §6).  The result carries the query rewritten into plain SPARQL 1.1 *without* dataset
clauses: every CQELS ``STREAM <s> [w] {`` and RSP-QL ``WINDOW :w {`` becomes
``GRAPH <window graph> {``, REGISTER clauses and ``FROM ...`` clauses are blanked, comments
too.  The caller builds the dataset from :attr:`ContinuousQuery.windows`,
``static_from`` and ``static_named``; for C-SPARQL every window is merged into the
default graph.  A query without any window is a one-shot query (dialect ``"sparql"``).

Every problem is a :class:`~linkstream.query.errors.QueryError` naming the line and
column of the offending token in the original text, SPARQL syntax errors included.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import field
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from linkstream.query import parse_store, shapes
from linkstream.query.algebra_json import is_node
from linkstream.query.errors import QueryError
from linkstream.query.lexer import (
    LineIndex,
    OffsetMap,
    Token,
    TokenStream,
    decode_escapes,
    iri_problem,
    langtag_problem,
    map_offset,
    quote,
    unescape_local,
)
from linkstream.query.template import AlgebraTemplate, constant_slots
from linkstream.query.windows import WindowSpec, read_window
from linkstream.rdf.lazyre import lazy
from linkstream.rdf.records import record

if TYPE_CHECKING:
    from rdflib.plugins.sparql.sparql import Query
    from rdflib.term import URIRef

# rdflib's SPARQL parser (``sparql_parser``) and our checks of its parse trees (``rules``)
# are imported by the functions that parse: a query found in the parse cache needs neither,
# nor rdflib itself (its algebra is read back in :mod:`.aterms` classes)

log = logging.getLogger(__name__)

WINDOW_GRAPH_PREFIX = "urn:linkstream:window:"
DIALECT_NAMES = {"csparql": "C-SPARQL", "cqels": "CQELS-QL", "rspql": "RSP-QL"}
FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")
_ABSOLUTE = lazy(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


@record(frozen=True)
class WindowDecl:
    """One stream window of a query.

    Attributes:
        stream: Absolute IRI of the stream.
        spec: The window.
        graph: IRI of the named graph that stands for this window in
            :attr:`ContinuousQuery.sparql` (unique within the query).
        name: The RSP-QL window name (``FROM NAMED WINDOW :w ...``), else ``None``.
    """

    stream: str
    spec: WindowSpec
    graph: str
    name: str | None = None


@record(frozen=True)
class ContinuousQuery:
    """A parsed continuous (or one-shot) query.

    Attributes:
        name: The REGISTER name, else the ``default_name`` given to the parser.
        dialect: ``"csparql"``, ``"cqels"``, ``"rspql"`` or ``"sparql"`` (no window).
        mode: ``"RSTREAM"``, ``"ISTREAM"`` or ``"DSTREAM"``.
        form: ``"SELECT"``, ``"ASK"``, ``"CONSTRUCT"`` or ``"DESCRIBE"``.
        windows: The windows, in textual order.
        static_from: ``FROM <g>`` graphs (absolute IRIs, in order).
        static_named: ``FROM NAMED <g>`` graphs.
        base: The base IRI in force after the query's BASE clauses.
        text: The original text.
        sparql: Plain SPARQL 1.1 text without dataset clauses (see the module docstring).
        algebra: ``rdflib`` algebra of :attr:`sparql` (``translateQuery`` result), or the
            same read from the parse cache (a :class:`~.algebra_json.StoredQuery`, whose
            nodes are :class:`~.algebra_json.Node` objects; see :mod:`.parse_store`).
    """

    name: str
    dialect: str
    mode: str
    form: str
    windows: tuple[WindowDecl, ...]
    static_from: tuple[str, ...]
    static_named: tuple[str, ...]
    base: str
    text: str
    sparql: str
    algebra: Query = field(repr=False, compare=False)
    offset_map: OffsetMap = field(default=(), repr=False, compare=False)

    def position(self, offset_in_sparql: int) -> tuple[int, int]:
        """Returns the 1-based (line, column) in :attr:`text` of an offset in :attr:`sparql`.

        Text that the rewrite inserted maps to the token it replaced.

        Args:
            offset_in_sparql: A character offset into :attr:`sparql`.
        """
        return LineIndex(self.text).line_col(map_offset(self.offset_map, offset_in_sparql, len(self.text)))


class _Scan(TokenStream):
    """The dialect pass: windows, dataset clauses and REGISTER, and the rewrite into SPARQL."""

    def __init__(self, text: str, default_name: str, base: str) -> None:
        super().__init__(text)
        self.base = base
        self.prefixes: dict[str, str] = {}
        self.name = default_name
        self.mode = "RSTREAM"
        self.form: str | None = None
        self.form_j: int | None = None
        self.windows: list[tuple[str, WindowSpec, str | None, int | None]] = []
        #: per window: the significant-token indexes of its stream IRI, '[' and ']'
        self.window_toks: list[tuple[int, int, int]] = []
        self.named: dict[str, int] = {}
        #: (base, constant slots, their texts, shape key or None): :func:`_shape_of`'s memo
        self.shape: tuple[str, dict[int, str], list[str], tuple[str, str] | None] | None = None
        self.refs: list[tuple[str, int, int]] = []
        self.static_from: list[str] = []
        self.static_named: list[str] = []
        self.dialects: dict[str, Token] = {}
        self.register: Token | None = None
        # where the reference puts its dataset clauses: the first top-level FROM, unless a
        # WHERE comes first (-1); rdflib parses a placeholder there so both reject the same
        self.dataset_at: int | None = None
        self.from_toks: list[int] = []  # every top-level FROM

    # ------------------------------------------------------------ helpers
    def dialect(self, d: str, t: Token) -> None:
        for other, first in self.dialects.items():
            if other != d:
                line, _ = self.index.line_col(first.start)
                self.fail(
                    "cannot mix %s with %s (line %d) in one query"
                    % (DIALECT_NAMES[d], DIALECT_NAMES[other], line),
                    t,
                )
        self.dialects.setdefault(d, t)

    def term_iri(self, j: int, what: str = "an IRI", validate: bool = False) -> str:
        """The absolute IRI named by an IRI or prefixed-name token.

        Only IRIs that stay in the SPARQL text are validated (PREFIX, BASE): stream, window
        and dataset IRIs are names, which the reference evaluator does not check either.
        """
        t = self.need(j, what)
        if t.kind == "iri":
            iri = decode_escapes(t)[1:-1]
            iri = iri if _ABSOLUTE.match(iri) else urljoin(self.base, iri)
            if validate and (problem := iri_problem(iri)):
                self.fail("invalid IRI <%s>: %s" % (iri, problem), t)
            return iri
        if t.kind == "word" and ":" in t.text and not t.text.startswith("_:"):
            return self.pname(t)
        self.fail("expected %s, found %s" % (what, quote(t.text)), t)

    def pname(self, t: Token) -> str:
        prefix, local = t.text.split(":", 1)
        if prefix not in self.prefixes:
            self.fail("unknown prefix '%s:'" % prefix, t)
        return self.prefixes[prefix] + unescape_local(local)

    # ------------------------------------------------------------ the pass
    def run(self) -> None:
        stack: list[tuple[Token, str]] = []  # open '{' and their kind: group, data, template
        used_bnodes: set[str] = set()  # labels of earlier groups: Oxigraph rejects their reuse
        current_bnodes: set[str] = set()
        values_pending = False
        before_form: Token | None = None  # first token that is neither prologue nor REGISTER
        j = 0
        toks, sig, n = self.toks, self.sig, len(self.sig)
        while j < n:
            t = toks[sig[j]]
            if self.form is not None:  # fast path: variables and plain punctuation in the body
                if t.kind == "var" or (t.kind == "punct" and t.text not in "{}@"):
                    j += 1
                    continue
            key, depth = t.key, len(stack)
            if t.kind == "punct":
                if t.text == "{":
                    kind = "data" if values_pending else "group"
                    if self.form == "CONSTRUCT" and self.form_j == j - 1:
                        kind = "template"
                    values_pending = False
                    stack.append((t, kind))
                elif t.text == "}":
                    if not stack:
                        self.fail("unmatched '}'", t)
                    kind = stack.pop()[1]
                else:
                    kind = ""
                    if t.text == "@":
                        self.check_langtag(j)
                if kind == "group":  # every group boundary closes a basic graph pattern
                    used_bnodes |= current_bnodes
                    current_bnodes = set()
            elif key and depth == 0 and key in ("PREFIX", "BASE", "REGISTER", "FROM"):
                j = getattr(self, key.lower() + "_clause")(j)
                continue
            elif key in FORMS and depth == 0 and self.form is None:
                self.form, self.form_j = key, j
            elif key == "WHERE" and depth == 0 and self.form is not None and self.dataset_at is None:
                self.dataset_at = -1  # dataset clauses belong before WHERE; later FROMs are blanked
            elif key == "STREAM" and depth >= 1:  # CQELS-QL: STREAM <s> [w] { P }
                self.dialect("cqels", t)
                s = self.term_iri(j + 1, "a stream IRI")
                spec, k = read_window(self, j + 2)
                brace = self.tok(k + 1)
                if brace is None or not brace.is_punct("{"):
                    self.fail("STREAM <%s> [...] must be followed by a group '{'" % s, brace)
                self.windows.append((s, spec, None, self.sig[j]))
                self.window_toks.append((j + 1, j + 2, k))
                self.blank(j + 1, k)
                j = k + 1
                continue
            elif key == "WINDOW" and depth >= 1:  # RSP-QL: WINDOW :w { P }
                self.dialect("rspql", t)
                wn = self.term_iri(j + 1, "a window name")
                brace = self.tok(j + 2)
                if brace is None or not brace.is_punct("{"):
                    self.fail(
                        "WINDOW %s must be followed by a group '{'" % self.toks[self.sig[j + 1]].text, brace
                    )
                self.refs.append((wn, self.sig[j], self.sig[j + 1]))
                j += 2
                continue
            elif key == "VALUES":
                values_pending = True
            elif t.kind == "word" and t.text.startswith("_:"):
                if not (stack and stack[-1][1] == "template"):
                    if t.text in used_bnodes:
                        self.fail("blank node %s is already used in another group pattern" % t.text, t)
                    current_bnodes.add(t.text)
            elif t.kind == "word" and ":" in t.text:
                self.pname(t)
            if self.form is None and before_form is None:
                before_form = t
            j += 1
        if self.form is None:
            self.fail("expected SELECT, ASK, CONSTRUCT or DESCRIBE", before_form)
        if stack:
            self.fail("'{' is never closed", stack[-1][0])

    def check_langtag(self, j: int) -> None:
        """A language tag (``"x"@en``) must be well-formed, as the reference requires."""
        lit, at, tag = self.tok(j - 1), self.toks[self.sig[j]], self.tok(j + 1)
        if (
            lit is not None
            and tag is not None
            and lit.kind == "string"
            and lit.end == at.start == tag.start - 1
        ):
            if tag.kind == "word" and (problem := langtag_problem(tag.text)):
                self.fail("language tag %s is %s" % (quote(tag.text), problem), tag)

    def prefix_clause(self, j: int) -> int:
        p, iri = self.need(j + 1, "a prefix name"), self.need(j + 2, "an IRI")
        if p.kind != "word" or not p.text.endswith(":") or p.text.count(":") != 1:
            self.fail("expected a prefix name like 'ex:' after PREFIX, found %s" % quote(p.text), p)
        if iri.kind != "iri":
            self.fail("expected an IRI after PREFIX %s, found %s" % (p.text, quote(iri.text)), iri)
        self.prefixes[p.text[:-1]] = self.term_iri(j + 2, validate=True)
        return j + 3

    def base_clause(self, j: int) -> int:
        iri = self.need(j + 1, "an IRI")
        if iri.kind != "iri":
            self.fail("expected an IRI after BASE, found %s" % quote(iri.text), iri)
        self.base = self.term_iri(j + 1, validate=True)
        return j + 2

    def register_clause(self, j: int) -> int:
        t = self.toks[self.sig[j]]
        if self.form is not None:
            self.fail("REGISTER must come before the query form", t)
        if self.register is not None:
            self.fail("only one REGISTER clause is allowed", t)
        self.register = t
        what = self.need(j + 1, "QUERY, STREAM, RSTREAM, ISTREAM or DSTREAM")
        nm = self.need(j + 2, "a query name")
        if what.kw("QUERY", "STREAM"):
            self.dialect("csparql", what)
            if nm.kind not in ("iri", "word"):
                self.fail("expected a query name, found %s" % quote(nm.text), nm)
            self.name = nm.text[1:-1] if nm.kind == "iri" else nm.text
        elif what.kw("RSTREAM", "ISTREAM", "DSTREAM"):
            self.dialect("rspql", what)
            self.mode = what.text.upper()
            if nm.kind == "iri":
                self.name = nm.text[1:-1]
            elif nm.kind == "word" and ":" in nm.text:
                self.name = self.pname(nm)
            elif nm.kind == "word":
                self.name = nm.text
            else:
                self.fail("expected a query name, found %s" % quote(nm.text), nm)
        else:
            self.fail("expected QUERY, STREAM, RSTREAM, ISTREAM or DSTREAM after REGISTER", what)
        as_tok = self.need(j + 3, "AS")
        if not as_tok.kw("AS"):
            self.fail(
                "expected AS after REGISTER %s %s, found %s" % (what.text, nm.text, quote(as_tok.text)),
                as_tok,
            )
        self.blank(j, j + 3)
        return j + 4

    def from_clause(self, j: int) -> int:
        t = self.toks[self.sig[j]]
        if self.form is None:
            self.fail("FROM must follow SELECT, ASK, CONSTRUCT or DESCRIBE", t)
        if self.dataset_at is None:
            self.dataset_at = self.sig[j]
        self.from_toks.append(self.sig[j])
        nxt = self.need(j + 1, "an IRI, STREAM or NAMED after FROM")
        if nxt.kw("STREAM"):  # C-SPARQL
            self.dialect("csparql", nxt)
            s = self.term_iri(j + 2, "a stream IRI")
            spec, k = read_window(self, j + 3)
            self.windows.append((s, spec, None, None))
            self.window_toks.append((j + 2, j + 3, k))
            self.blank(j, k)
            return k + 1
        if nxt.kw("NAMED") and (w := self.tok(j + 2)) is not None and w.kw("WINDOW"):  # RSP-QL
            self.dialect("rspql", w)
            name_tok = self.need(j + 3, "a window name")
            wn = self.term_iri(j + 3, "a window name")
            on = self.need(j + 4, "ON")
            if not on.kw("ON"):
                self.fail(
                    "expected ON after FROM NAMED WINDOW %s, found %s" % (name_tok.text, quote(on.text)), on
                )
            k = j + 5
            if self.need(k, "a stream IRI").kw("STREAM"):
                k += 1
            s = self.term_iri(k, "a stream IRI")
            spec, kend = read_window(self, k + 1)
            if wn in self.named:
                self.fail("window %s is declared twice" % name_tok.text, name_tok)
            self.named[wn] = len(self.windows)
            self.windows.append((s, spec, wn, None))
            self.window_toks.append((k, k + 1, kend))
            self.blank(j, kend)
            return kend + 1
        if nxt.kw("NAMED"):  # the reference keeps these in its query: they must be valid IRIs
            self.static_named.append(self.term_iri(j + 2, "a graph IRI", validate=True))
            self.blank(j, j + 2)
            return j + 3
        self.static_from.append(self.term_iri(j + 1, "a graph IRI, STREAM or NAMED"))
        self.blank(j, j + 1)
        return j + 2

    def finish(self) -> tuple[WindowDecl, ...]:
        if self.register is not None and not self.windows:
            self.fail("REGISTER needs a query that reads at least one stream window", self.register)
        decls = tuple(
            WindowDecl(s, spec, "%s%d" % (WINDOW_GRAPH_PREFIX, k), name)
            for k, (s, spec, name, _) in enumerate(self.windows)
        )
        for decl, (_, _, _, ti) in zip(decls, self.windows, strict=True):
            if ti is not None:  # CQELS: STREAM <s> [w] { -> GRAPH <window graph> {
                self.repl[ti] = "GRAPH <%s>" % decl.graph
        for wn, ti, ni in self.refs:
            if wn not in self.named:
                name_tok = self.toks[ni]
                self.fail(
                    "window %s is used but not declared (FROM NAMED WINDOW ... ON ...)" % name_tok.text,
                    name_tok,
                )
            self.repl[ti] = "GRAPH"
            self.repl[ni] = "<%s>" % decls[self.named[wn]].graph
        return decls

    def parser_spacing(self) -> dict[int, str]:
        """Changes for rdflib's copy of the text: path-modifier spacing, dataset placeholder.

        rdflib only takes ``?``, ``*`` and ``+`` as path modifiers when they touch the path
        (``<p>*``), and always takes a ``?`` that touches it as one (``<p>?o``).  In SPARQL
        white space does not matter there, and ``?o`` is a variable.
        """
        fixes: dict[int, str] = {}
        prev: int | None = None
        for i in self.sig:
            t = self.toks[i]
            if prev is not None and i not in self.repl and prev not in self.repl:
                p = self.toks[prev]
                if (
                    p.kind == "iri"
                    or (p.kind == "word" and (":" in p.text or p.key == "A"))
                    or p.is_punct(")")
                ):
                    nxt = self.text[t.end : t.end + 1]
                    modifier = t.text in ("?", "*") or (t.text == "+" and not (nxt.isdigit() or nxt == "."))
                    if t.kind == "punct" and modifier:  # '+1' is a number, not a modifier
                        fixes.update((k, "") for k in range(prev + 1, i))
                    elif t.kind == "var" and t.text[0] == "?" and p.end == t.start:
                        fixes[i] = " " + t.text
            prev = i
        # a one-shot query is plain SPARQL: each FROM must be where SPARQL allows it
        placeholders = self.from_toks if not self.windows else [self.dataset_at or -1]
        fixes.update((i, "FROM <%sdataset>" % WINDOW_GRAPH_PREFIX) for i in placeholders if i >= 0)
        return fixes


#: Algebra of every parser text (and base) that parsed and passed every check, so that
#: thousands of queries made from a few templates pay rdflib's parse (pyparsing, ~10 ms)
#: and algebra translation (~4 ms) once per distinct text.  Only successes are cached, and
#: the checks skipped on a hit depend on nothing but the parser text: the window, stream
#: and REGISTER clauses (what differs between such queries) are blanked from it.  The
#: algebra is shared read-only by the queries (planners only read it).
_ALGEBRA_CACHE: dict[tuple[str, str], Query] = {}
ALGEBRA_CACHE_SIZE = 4096
#: Algebra templates by shape text and base (see :mod:`.template`); ``None`` marks a
#: shape whose queries are parsed one by one.
_TEMPLATES: dict[tuple[str, str], AlgebraTemplate | None] = {}
_MISSING = object()


def parse_continuous(
    text: str | bytes,
    default_name: str = "query",
    base: str = "http://localhost/",
    source: str | None = None,
) -> ContinuousQuery:
    """Parses a C-SPARQL, CQELS-QL, RSP-QL or plain SPARQL 1.1 query.

    Args:
        text: The query text (bytes are decoded as UTF-8; undecodable bytes are errors).
        default_name: The query's name when it has no REGISTER clause (e.g. the file stem).
        base: Base IRI for relative IRIs (a BASE clause in the query overrides it).
        source: Name of the query's origin, used in error messages.

    Returns:
        The parsed query.

    Raises:
        QueryError: For any problem, with the line and column of the offending token.
    """
    try:
        return _parse(text, default_name, base)
    except QueryError as e:
        raise e.located(e.line, e.column, source) from None
    except RecursionError:
        raise QueryError("query is nested too deeply", source=source) from None


def _parse(text: str | bytes, default_name: str, base: str) -> ContinuousQuery:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="surrogateescape")
    if text.startswith("\ufeff"):
        text = text[1:]
    if SHAPES:
        try:
            known = shapes.instance(text, base)
            cq = None if known is None else _from_shape(known, text, default_name, base)
        except Exception:  # never expected; the full parse is the reference
            log.warning("query shape failed; parsing the query text", exc_info=True)
            cq = None
        if cq is not None:
            return cq
    scan = _Scan(text, default_name, base)
    scan.run()
    decls = scan.finish()
    sparql, sparql_map = scan.render(decode=False)
    spacing = scan.parser_spacing()
    parse_text, parse_map = scan.render(decode=True, extra=spacing)

    key = (parse_text, base)
    dialect = next(iter(scan.dialects), "sparql")
    compiled = _ALGEBRA_CACHE.get(key)
    iri_calls = compiled is None  # a cached algebra was bound to its key's base: unknown otherwise
    stored, from_disk = None, False
    if compiled is None and parse_store.directory() is not None and not _shape_known(scan, spacing, base):
        # the first query of its shape in this process: the on-disk cache may hold it
        stored = parse_store.key(parse_text, base, dialect)
        compiled = parse_store.load(stored)
        if compiled is not None:
            from_disk, iri_calls = True, False  # (stored with its base bound)
            rdflib: Any = sys.modules.get("rdflib")  # (not loaded: the parse that loads it sets it)
            if rdflib is not None:
                rdflib.NORMALIZE_LITERALS = False  # as a parse leaves it (literals keep their form)
    if compiled is None:
        compiled, iri_calls = _from_template(scan, spacing, base)
    if compiled is None:
        from linkstream.query.sparql_parser import translate

        compiled = translate(scan, parse_text, base, parse_map)
    _remember(key, compiled, iri_calls)
    if stored is not None and not from_disk:
        parse_store.save(stored, compiled)
    cq = ContinuousQuery(
        name=scan.name,
        dialect=dialect,
        mode="RSTREAM" if dialect == "cqels" else scan.mode,
        form=scan.form or "SELECT",
        windows=decls,
        static_from=tuple(scan.static_from),
        static_named=tuple(scan.static_named),
        base=scan.base,
        text=text,
        sparql=sparql,
        algebra=compiled,
        offset_map=sparql_map,
    )
    if SHAPES and not from_disk:  # (learning builds the shape's template: rdflib's parser)
        try:
            shapes.learn(cq, base, scan, spacing, *_template_of(scan, spacing, base))
        except Exception:  # never expected; the next query of the shape is parsed in full
            log.warning("cannot learn the query's shape", exc_info=True)
    return cq


#: Whether queries of a known shape skip the front end (see :mod:`.shapes`).
SHAPES = True


def _shape_of(
    scan: _Scan, spacing: dict[int, str], base: str
) -> tuple[dict[int, str], list[str], tuple[str, str] | None]:
    """The query's constant tokens (token index -> placeholder), their distinct texts and
    its shape's key in :data:`_TEMPLATES` (``None`` without constants); computed once per
    scan (a parse asks up to three times)."""
    memo = scan.shape
    if memo is None or memo[0] != base:
        slots, texts = constant_slots(scan, spacing)
        tkey = (scan.render(decode=True, extra={**spacing, **slots})[0], base) if texts else None
        memo = scan.shape = (base, slots, texts, tkey)
    return memo[1], memo[2], memo[3]


def _shape_known(scan: _Scan, spacing: dict[int, str], base: str) -> bool:
    """Whether this process met the query's shape (its template, or that it has none)."""
    tkey = _shape_of(scan, spacing, base)[2]
    return tkey is not None and tkey in _TEMPLATES


def _remember(key: tuple[str, str], compiled: Any, iri_calls: bool) -> None:
    """Gives an algebra's ``IRI()`` calls their base, then caches it (bound before another
    thread can find it: a cache hit needs no walk, its key fixes the base)."""
    prologue = getattr(compiled, "prologue", None)
    if iri_calls and prologue is not None and prologue.base:  # (a template knows: no walk per query)
        from rdflib.term import URIRef  # (a parse's algebra: rdflib is loaded)

        bind_base(compiled.algebra, URIRef(prologue.base))
    if key not in _ALGEBRA_CACHE:
        if len(_ALGEBRA_CACHE) >= ALGEBRA_CACHE_SIZE:
            _ALGEBRA_CACHE.clear()  # crude bound; a dict stays safe under concurrent parses
        _ALGEBRA_CACHE[key] = compiled


def _from_shape(known: shapes.Instance, text: str, default_name: str, base: str) -> ContinuousQuery | None:
    """A query of a known shape (None: parse it in full); see :mod:`.shapes`."""
    shape = known.shape
    key = (known.parse_text, base)
    compiled = _ALGEBRA_CACHE.get(key)
    iri_calls = False
    if compiled is None:
        if shape.template is not None:
            values = shape.template.values(known.texts)
            if values is None:
                return None
            compiled, iri_calls = shape.template.instantiate(values), shape.template.iri_calls
        elif shape.slots and any(s.placeholder >= 0 for s in shape.slots):
            return None  # never expected: constants vary only with a template
        else:
            compiled = shape.compiled  # the parser text is the shape's
    _remember(key, compiled, iri_calls)
    name = known.name if shape.registered and known.name is not None else default_name
    fields = shape.fields if known.windows is None else {**shape.fields, "windows": known.windows}
    return ContinuousQuery(
        name=name,
        text=text,
        sparql=known.sparql,
        algebra=compiled,
        offset_map=known.offset_map,
        **fields,
    )


def bind_base(node: object, base: URIRef) -> None:
    """Gives every ``IRI()`` / ``URI()`` call of an algebra the query's base IRI.

    ``IRI("x")`` resolves a relative IRI against the BASE of the query (or the base the
    query was parsed with): the call gets it as its ``base`` argument.  Idempotent (a cached
    algebra of the same text and base gets the same base).
    """
    stack = [node]
    while stack:
        x = stack.pop()
        if is_node(x):
            if x.name in ("Builtin_IRI", "Builtin_URI") and "base" not in x:
                x["base"] = base
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)


def _from_template(scan: _Scan, spacing: dict[int, str], base: str) -> tuple[Any, bool]:
    """The algebra from the template of the query's shape, or ``None`` (parse the text), and
    whether it may hold ``IRI()``/``URI()`` calls (``True`` unless the template knows).

    The shape is the parser text with its constants replaced by placeholders (see
    :mod:`.template`); its first query parses and checks it.  A shape that fails, or whose
    algebra a template cannot hold, is remembered as ``None``: its queries are parsed
    one by one, so that errors are found and located on the original text.
    """
    template, _, texts = _template_of(scan, spacing, base)
    if template is None:
        return None, True
    try:
        values = template.values(texts)
        return (None, True) if values is None else (template.instantiate(values), template.iri_calls)
    except Exception:  # never expected; the text's own parse is the reference
        log.warning("algebra template failed; parsing the query text", exc_info=True)
        return None, True


def _template_of(
    scan: _Scan, spacing: dict[int, str], base: str
) -> tuple[AlgebraTemplate | None, dict[int, str], list[str]]:
    """The template of the query's shape (built on first use), its constant tokens
    (token index -> placeholder) and their distinct texts."""
    slots, texts, tkey = _shape_of(scan, spacing, base)
    if tkey is None:
        return None, slots, texts
    cached = _TEMPLATES.get(tkey, _MISSING)
    if cached is None or isinstance(cached, AlgebraTemplate):
        return cached, slots, texts
    template = _build_template(scan, tkey[0], base, len(texts))
    if len(_TEMPLATES) >= ALGEBRA_CACHE_SIZE:
        _TEMPLATES.clear()
    _TEMPLATES[tkey] = template
    return template, slots, texts


def _build_template(scan: _Scan, shape_text: str, base: str, count: int) -> AlgebraTemplate | None:
    from linkstream.query.sparql_parser import translate

    try:
        return AlgebraTemplate(translate(scan, shape_text, base), count)
    except Exception:  # the original text's parse finds and locates the problem
        log.debug("no template for this query shape", exc_info=True)
        return None
