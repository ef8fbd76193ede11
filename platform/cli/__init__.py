"""The ``linkstream`` command: the top layer, one module per command group.

Nothing in the package imports this layer.

* ``main.py``    -- the argument parser of every subcommand, ``replay``/``demo`` dispatch, ``main()``.
* ``args.py``    -- argument helpers every command module shares (``IRI=PATH`` bindings, ``err``).
* ``service.py`` -- ``linkstream run`` (the HTTP API) and ``linkstream queries add|ls|rm`` (its client).
* ``cluster.py`` -- ``container``, ``coordinator``, ``status``, ``containers add|remove``,
  ``autoscaler`` and ``replay --cluster/--zk``.
* ``load.py``    -- ``linkstream load``: build a store directory (pure Python or Spark).
* ``sparql.py``  -- ``linkstream sparql``: one-shot SPARQL over a store directory.
* ``demo.py``    -- ``linkstream demo``: the bundled CityBench slice, results and throughput.

``python -m linkstream.cli`` runs the command (``__main__.py``).
"""

from linkstream.cli.main import main

__all__ = ["main"]
