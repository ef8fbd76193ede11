"""The query engine (layer: above ``operators``; below ``containers``, ``api``, ``bulk``).

From a parsed query to results, in one process:

* ``planner.py``  -- rdflib's SPARQL algebra -> a LinkStream operator graph.
* ``paths.py``    -- SPARQL 1.1 property paths in basic graph patterns -> patterns and operators.
* ``routeplan.py`` -- which multiway joins a shared join + router can serve (route planning)
* ``sharing.py``  -- operator sharing between registered queries (hash-consing on signatures,
  shared joins with routers).
* ``embedded.py`` -- the embedded engine: streams, static graphs, registered queries, report
  times.
* ``dirty.py``    -- which queries an epoch touches: sources by window and by keyed scan
  (constants looked up in a hash map), the rest are not looked at.
* ``output.py``   -- the output edge: RStream / IStream / DStream, ASK, CONSTRUCT, rendering.
* ``replay.py``   -- replay of timestamped N-Quads stream files through the embedded engine.
* ``cutting.py``  -- cutting shared plans into producer / consumer tasks for the cluster.
* ``live/``       -- the thread-safe live engine servers run (ingest, report scheduling,
  subscriptions).
* ``oneshot/``    -- one-shot SPARQL 1.1: over the engine's static graphs and over a store
  snapshot by graph exploration.
"""
