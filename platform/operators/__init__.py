"""Incremental operators, one per module (layer: above ``query`` and ``store``; below ``engine``).

Every operator consumes and emits :class:`~linkstream.operators.batch.Batch` deltas of signed
mappings (numpy int64 columns); no per-row Python objects on the hot path.

* ``batch.py``, ``relation.py`` -- batches and the vectorised kernels; materialised multisets
  with join indexes (the state of stateful operators).
* ``base.py``     -- the operator contract (pull-based, epoch-memoised deltas).
* ``scan.py``     -- triple-pattern matching.      * ``window.py``  -- time / count / NOW windows.
* ``graph.py``    -- graphs of a query's dataset.  * ``mjoin.py``   -- adaptive multiway join.
* ``router.py``   -- shared multiway join + router across window ranges, steps and constants;
  ``timed_window.py`` -- the timestamped windows it reads.
* ``filter.py``, ``extend.py``, ``project.py``, ``values.py`` -- stateless reshaping.
* ``aggregate.py``, ``distinct.py``, ``negation.py``, ``recompute.py`` -- stateful operators.
* ``path.py``     -- arbitrary-length property paths (``*``, ``+``, ``?``): closures, recomputed.
* ``static_result.py`` -- static sub-join results, evaluated once and stored.
* ``evaluate.py`` -- vectorised evaluation of SPARQL expressions over batches.
* ``state.py``    -- snapshot / restore of a query's operator state for migration.
"""
