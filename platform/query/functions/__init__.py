"""The SPARQL 1.1 function library over LinkStream terms (spec section 17).

* ``scalar.py``   -- the operators and functions expression evaluation calls (entry point).
* ``builtins.py`` -- the built-in functions, dispatched by upper-case name.
* ``core.py``     -- term classification, equality, order, casts.
* ``numeric.py``  -- numeric values.      * ``dates.py``   -- date, time and duration values.
* ``strings.py``  -- SUBSTR, langMatches, regexes.
* ``base.py``     -- shared pieces: the error type and value kinds.
"""
