"""Operator-level placement inside an operator container (``--placement operators``).

A query's shared plan is cut at producer operators (:mod:`linkstream.engine.cutting`);
producers run as their own tasks and feed the consumers over edges between containers.

* ``tasks.py``      -- the container's operator plane: producer tasks, remote inputs, edges.
* ``producers.py``  -- producer engines over the replicated stream buffers.
* ``partitions.py`` -- hash-partitioned producer instances (fields grouping of join inputs).
* ``channels.py``   -- the consumer side of a producer channel: generations, resets.
* ``edges.py``      -- sockets to peers, dictionary ids across them, counters.
* ``messages.py``   -- the messages of operator placement.
"""
