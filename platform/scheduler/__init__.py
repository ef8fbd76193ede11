"""LinkStream's global scheduler: placement decisions and ZooKeeper coordination.

Sans-IO decisions (no ZooKeeper needed to import or test them):

* :mod:`.state` -- task specs, containers, ownership bookkeeping, policy knobs.
* :mod:`.events` -- events in, actions out.
* :mod:`.core` -- ``SchedulerCore.handle(event) -> list[Action]``.

Kazoo recipes, one per module, all rooted at a configurable cluster root
(:mod:`.layout`, default ``/linkstream``) inside the client's chroot:

* :mod:`.membership` -- live containers (ephemeral nodes) and drain requests.
* :mod:`.assignment` -- ``/tasks/<task>`` owners with per-container indexes.
* :mod:`.election` -- leader election among coordinators.
* :mod:`.registry` -- registered queries.
* :mod:`.config` -- cluster-wide settings node.

:mod:`.coordinator` wires the core to the recipes.  ``signature`` (operator
signatures) belongs to the query engine.
"""
