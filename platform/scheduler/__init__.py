"""LinkStream's global scheduler: placement decisions and ZooKeeper coordination.

Layer: above ``metrics``; imports no operator, no engine and no transport.

Sans-IO decisions (no ZooKeeper needed to import or test them):

* :mod:`.state` -- task specs, containers, ownership bookkeeping, policy knobs.
* :mod:`.events` -- events in, actions out.
* :mod:`.core` -- ``SchedulerCore.handle(event) -> list[Action]``.
* :mod:`.autoscale` -- the autoscaling policy: load signals in, a scale decision out.

Kazoo recipes, one per module, all rooted at a configurable cluster root
(:mod:`.layout`, default ``/linkstream``) inside the client's chroot:

* :mod:`.membership` -- live containers (ephemeral nodes) and drain requests.
* :mod:`.assignment` -- ``/tasks/<task>`` owners with per-container indexes.
* :mod:`.election` -- leader election among coordinators.
* :mod:`.registry` -- registered queries.
* :mod:`.config` -- cluster-wide settings node.

* :mod:`.producers` -- producer tasks of operator placement and where their hosts follow them.
* :mod:`.runs` -- the running replay node every container reads.
* :mod:`.status` -- a read-only snapshot of a cluster (``linkstream status``).
* :mod:`.load` -- load figures processes publish for the autoscaler, autoscalers' nodes.
* :mod:`.zkclient` -- every kazoo client: the cluster's digest credential, private ACLs.
* :mod:`.keyring` -- the cluster's CURVE public keys, as published in ZooKeeper.

:mod:`.coordinator` wires the core to the recipes.  Operator signatures and cutting plans
into tasks belong to the engine (:mod:`linkstream.engine.cutting`).
"""
