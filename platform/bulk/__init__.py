"""PySpark bulk loading (layer: above ``store``; below ``cluster`` and ``cli``).

* ``spark_load.py`` -- the Spark job: N-Triples / N-Quads files -> a store directory.
* ``tasks.py``      -- the per-partition work run inside Spark's Python workers.
* ``inputs.py``     -- the files a load reads, numbered as the pure-Python loader numbers them.
* ``session.py``    -- starting the SparkSession (``local[2]`` in tests, ``--master`` on a cluster).
* ``progress.py``   -- progress lines for long Spark stages.
* ``synthetic.py``  -- deterministic synthetic graphs for tests and benchmarks.

``linkstream load`` itself is ``cli/load.py``.
"""
