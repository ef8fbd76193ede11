"""One-shot SPARQL 1.1 queries, with SPARQL 1.1 Query Results JSON.

* ``embedded.py`` -- parsing one-shot queries, evaluation over the embedded engine's static
  graphs, result terms as JSON.
* ``store.py``    -- evaluation over a consistent store snapshot (``linkstream sparql``,
  ``/sparql`` on a server with ``--store``).
* ``explore.py``  -- basic graph patterns answered by graph exploration over a snapshot.
"""
