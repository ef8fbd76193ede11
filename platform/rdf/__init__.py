"""RDF terms, parsing and dictionary encoding (the bottom layer; imports no other package).

* ``terms.py``     -- RDF terms and their N-Triples form.
* ``ntriples.py``  -- the fast N-Triples / N-Quads line parser.
* ``streams.py``   -- timestamped N-Quads stream files, element by element.
* ``static.py``    -- static graphs -> dictionary-encoded triple arrays.
* ``terminfo.py``  -- per-id term facts expression evaluation needs, as numpy arrays.
* ``dictionary.py`` -- the ``Dictionary`` protocol and registry (``memory:``, ``lmdb:PATH``,
  ``hbase://``); backends in ``lmdb_dictionary.py`` and ``hbase_dictionary.py``.
"""
