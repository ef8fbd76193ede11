"""The operator container process (layer: above ``engine`` and ``scheduler``; below ``cluster``).

* ``runtime.py``    -- the process itself: ``linkstream container --zk HOST:PORT``.
* ``assigned.py``   -- the assigned queries: registered, announced ready/unready, released;
  the streams subscribed (a part of the runtime).
* ``replica.py``    -- one run's state inside a container: an embedded engine fed by the driver.
* ``takeover.py``   -- the container's half of stateful task moves.
* ``protocol.py``   -- messages between a driver and its containers.
* ``protofields.py`` -- their header frame and fields, each checked as it is read.
* ``wire.py``       -- the data-plane wire format: msgpack header + raw numpy buffers (no pickle).
* ``transport.py``  -- ZeroMQ PUSH/PULL channels carrying wire messages (CURVE, ZAP).
* ``security.py``   -- a process's cluster security: ZooKeeper credential, CURVE key pair.
* ``groupings.py``  -- Storm-style stream groupings (shuffle, all, fields).
* ``watermarks.py`` -- the combined watermark of a task's upstream partitions.
* ``placement/``    -- operator-level placement inside containers: producer tasks, their
  channels and edges between containers.

The driver's half of each protocol lives in :mod:`linkstream.cluster`.
"""
