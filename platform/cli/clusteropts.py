"""The ``cluster`` options of ``linkstream run`` (``--zk`` and what goes with it).

Kept apart from :mod:`linkstream.cli.service` (the ``run`` command and its embedded
options), which would otherwise outgrow its module.
"""

from __future__ import annotations

import argparse


def add_cluster_options(rp: argparse.ArgumentParser) -> None:
    """Adds the ``cluster`` argument group of ``run`` to ``rp``."""
    cl = rp.add_argument_group(
        "cluster",
        "with --zk this process is a coordinator of a cluster (leader election, scheduling) that "
        "serves the same API; standbys forward requests to the leader, which feeds the operator "
        "containers (`linkstream container`); queries live in ZooKeeper",
    )
    cl.add_argument(
        "--zk", default=None, metavar="HOST:PORT[/CHROOT]", help="serve the cluster of this ZooKeeper"
    )
    cl.add_argument("--id", default=None, help="identifier in the leader election (default host-pid)")
    cl.add_argument(
        "--root", default="/linkstream", help="cluster root inside the chroot (default %(default)s)"
    )
    cl.add_argument(
        "--session-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="ZooKeeper session timeout (default 10)",
    )
    cl.add_argument(
        "--tick-interval", type=float, default=1.0, metavar="S", help="scheduler tick (default 1 s)"
    )
    cl.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="scheduler /metrics here (0: a free port)",
    )
    cl.add_argument(
        "--ingest",
        choices=["leader", "direct", "owners", "meta"],
        default="leader",
        help="leader (default): the leader's ingest log holds every pushed body; direct: each stream's "
        "owner coordinator logs its bodies in --state-dir (needed) before the hand-off and the "
        "leader's log refers to them; owners: direct, and the owners send the elements to the "
        "containers, not the leader (experimental: no owner-served backlog yet; "
        "docs/architecture.md, Direct ingest); meta: owners, and the leader gets only each body's "
        "event times, sizes and log record (experimental)",
    )
    cl.add_argument(
        "--stream-segment-mb",
        type=float,
        default=64.0,
        metavar="MB",
        help="--ingest direct: MiB of an owner's stream log segment; segments before what the "
        "leader's log still refers to are deleted after each cluster checkpoint (default 64)",
    )
    from linkstream.cli.main import add_security_options

    add_security_options(cl)


__all__ = ["add_cluster_options"]
