"""The driver's side of operator-level placement (``--placement operators``).

* ``driver.py``  -- plans the run's producer tasks and places them through ZooKeeper.
* ``control.py`` -- follows producer moves in ZooKeeper and tells containers (``ophost`` /
  ``opdrop``).

The containers' side is :mod:`linkstream.containers.placement`.
"""
