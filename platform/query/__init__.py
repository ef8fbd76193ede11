"""The query languages (layer: above ``rdf``; imports nothing but ``rdf``).

* ``continuous.py`` -- C-SPARQL, CQELS-QL and RSP-QL parsed into SPARQL 1.1 algebra plus windows.
* ``lexer.py``      -- tokens with offsets and the token-level rewrite of continuous clauses.
* ``windows.py``    -- window specifications (``[RANGE a STEP b]``, ``[TRIPLES n]``, ``[NOW]``).
* ``template.py``   -- algebra templates: one rdflib parse per query shape.
* ``sparql_parser.py`` -- rdflib's SPARQL parser and algebra, imported only to parse.
* ``algebra_json.py`` -- the algebra as JSON, read back into ``Node`` objects (no rdflib parser).
* ``parse_store.py`` -- the on-disk parse cache of the short commands (``replay``, ``sparql``).
* ``expressions.py``-- typed SPARQL expression trees.
* ``functions/``    -- the SPARQL 1.1 function library over LinkStream terms.
* ``errors.py``     -- :class:`QueryError` (line:column errors); no rdflib import.
* ``rules.py``      -- where a SPARQL parse really failed, and the rules rdflib leaves out.

The planner that turns a query into operators is :mod:`linkstream.engine.planner`.
"""
