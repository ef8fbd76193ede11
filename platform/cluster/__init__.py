"""The cluster's driver / gateway side (layer: above ``containers``, ``engine``, ``scheduler``).

What runs outside the operator containers and feeds them:

* ``service.py``      -- ``run --zk``: :class:`ClusterService`, a coordinator serving the HTTP API
  (leader election, the query registry, the leader's live engine).
* ``registration.py`` -- the coordinator's queries: batch registration (few ZooKeeper
  transactions a batch), removal, reads the registry answers, query states.
* ``remote_engine.py`` -- the leader's engine: live-engine calls carried to the operator containers.
* ``proxy.py``        -- a standby forwards requests to the leader; the API application of a
  coordinator (:func:`create_service_app`).
* ``streamowners.py`` -- each stream's owner coordinator, placed and claimed in ZooKeeper.
* ``ingest.py``       -- owners sequence their streams' pushes, the leader applies them.
* ``results.py``      -- the replicated result log every coordinator serves results from.
* ``replay.py``       -- ``replay --cluster N / --zk``: the driver that feeds operator containers.
* ``driver.py``       -- the driver's protocol state (:class:`ClusterEngine`): elements out,
  ticks, results in.
* ``fanout.py``       -- the element data plane: one PUSH socket per container, stream routing.
* ``handover.py``     -- the driver's side of stateful task moves (old owner -> new owner).
* ``placement/``      -- the driver's side of operator-level placement (``--placement operators``).
* ``autoscaler.py``  -- ``linkstream autoscaler``: load signals, the policy, drivers (local
  processes, an AWS autoscaling group, none).
* ``localcluster.py`` -- a whole cluster on one machine (ZooKeeper, coordinators, containers);
  ``infra/local-cluster`` runs it.

Only ``cli`` is above this package.
"""
