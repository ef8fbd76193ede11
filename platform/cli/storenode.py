"""``linkstream store-node``: serve a store directory's partitions to remote readers.

The node publishes the index arrays of the partitions it holds as memory regions (shared
memory for readers on its host, TCP for the others, RDMA where a device exists) and,
with ``--zk``, advertises itself in ZooKeeper under ``<root>/storenodes`` (an ephemeral
znode with the cluster's private ACL unless ``--insecure``).  It prints one JSON line
with its advertisement once serving (scripts and tests read it), then runs until
SIGTERM / SIGINT.

Each partition's index is kept under ``DIR/index/parts`` and memory-mapped at the next
start (rebuilt only when the partition changed), and batches absorbed into ``DIR`` and not
yet checkpointed are served merged into the partitions, as they stand at the node's start
(:mod:`linkstream.store.nodeindex`).

Security is on by default: with ``--zk`` the TCP transport and the dictionary server are
CURVE servers admitting only the cluster's published keys (containers, the driver, and
readers under ``ROOT/readers``), the node's own public key is in its advertisement, and
refused handshakes are counted in ``linkstream_dataplane_rejected_peers_total``
(``--metrics-port``).  Without ``--zk`` there is no key to check against, so serving TCP
then needs ``--insecure`` (shared memory alone does not: its segments are owner-only).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from linkstream.containers.security import Security
    from linkstream.containers.transport import CurveKeys
    from linkstream.metrics import StoreNodeMetrics

logger = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction, add_security_options: object) -> None:
    """Registers the ``store-node`` subcommand."""
    p = sub.add_parser(
        "store-node",
        help="serve a store directory's partitions as memory regions (shared memory, TCP, RDMA)",
        description=(
            "Serve the persistent partitions of a store directory (as `linkstream load` wrote it) "
            "to containers and one-shot queries that read the store remotely: each partition's "
            "index arrays become read-only memory regions, read one-sidedly over shared memory "
            "(same host), TCP, or RDMA where a device exists. With --zk the node advertises "
            "itself (address, transports, partitions, dictionary) in an ephemeral znode under "
            "ROOT/storenodes; several nodes may hold overlapping partitions (replication). "
            "Each partition's index is built once and kept under DIR/index/parts (checked against "
            "the partition's size and checksum in store.json), then memory-mapped at the next start; "
            "only partitions a checkpoint rewrote are rebuilt. Batches absorbed into DIR "
            "(`linkstream run --store DIR --absorb S`) and not yet checkpointed are served too, as "
            "they stand when the node starts: restart the store nodes to serve batches absorbed after "
            "that (`linkstream sparql --zk` then sees them; running --remote-store containers keep "
            "the content they first read and need a restart too). "
            "Security is on: with --zk the TCP transport and the dictionary server speak CURVE and "
            "admit only the cluster's published keys (containers, the driver, readers under "
            "ROOT/readers); without --zk, serving tcp needs --insecure."
        ),
    )
    p.add_argument("--store", required=True, metavar="DIR", help="the store directory to serve")
    p.add_argument(
        "--zk",
        default=None,
        metavar="HOST:PORT[/CHROOT]",
        help="advertise in this ZooKeeper (default: do not)",
    )
    p.add_argument(
        "--root", default="/linkstream", help="cluster root inside the chroot (default %(default)s)"
    )
    p.add_argument(
        "--bind", default="tcp://127.0.0.1:*", help="TCP transport endpoint to bind (default %(default)s)"
    )
    p.add_argument(
        "--partitions",
        default=None,
        metavar="LIST",
        help="partitions to hold, e.g. 0-3,6 (default: all of the store's)",
    )
    p.add_argument(
        "--transports",
        default="rdma,shm,tcp",
        help="transports to serve on; unusable ones (rdma without a device) are skipped (default %(default)s)",
    )
    p.add_argument(
        "--session-timeout", type=float, default=10.0, metavar="S", help="ZooKeeper session timeout"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics on 127.0.0.1:PORT (0: a free port; advertised as 'metrics')",
    )
    p.add_argument(
        "--no-index-cache",
        action="store_true",
        help="build every partition index in memory at start and write nothing under DIR/index/parts "
        "(default: memory-map the kept indexes, build and keep the missing or stale ones)",
    )
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    add_security_options(p)  # type: ignore[operator]  # main.add_security_options
    p.set_defaults(func=cmd_store_node)


def cmd_store_node(args: argparse.Namespace) -> int:
    """Runs one store node until a signal (exit 2 with one line on bad input)."""
    import zmq

    from linkstream.rdma.regions import RegionError, transport
    from linkstream.store.layout import read_manifest
    from linkstream.store.node import StoreNode, parse_partitions

    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO), stream=sys.stderr)
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        print(f"error: store-node: --metrics-port must be 0-65535, got {args.metrics_port}", file=sys.stderr)
        return 2
    security = None
    if args.zk:
        from linkstream.cli.clusterproc import cluster_security

        security = cluster_security(args)
        if security is None:
            return 2
    names = [t.strip() for t in args.transports.split(",") if t.strip()]
    try:
        total = read_manifest(args.store).partitions
        parts = parse_partitions(args.partitions, total)
        for name in names:
            transport(name)
    except (OSError, ValueError, RegionError) as e:
        print(f"error: store-node: {e}", file=sys.stderr)
        return 2
    if security is None and "tcp" in names and not args.insecure:
        print(
            "error: store-node: without --zk the tcp transport cannot check its readers' CURVE keys: "
            "give --zk (the cluster's keys), --insecure (plaintext, anyone), or --transports shm",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _s, _f: stop.set())
    client = None
    node = None
    mserver = None
    try:
        from linkstream.metrics import StoreNodeMetrics, serve_metrics

        metrics = StoreNodeMetrics()
        where = ""
        if args.metrics_port is not None:
            mserver, mport = serve_metrics(metrics.registry, args.metrics_port)
            where = f"127.0.0.1:{mport}"
        curve = None
        if security is not None:
            try:
                client = security.kazoo(args.zk, args.session_timeout)
                client.add_listener(lambda state: metrics.zookeeper_state(state))
                client.start(timeout=30)
            except Exception as e:  # noqa: BLE001 - kazoo timeouts, auth failures: one line
                print(f"error: store-node: cannot connect to ZooKeeper {args.zk}: {e}", file=sys.stderr)
                return 2
            curve = _server_keys(security, client, args.root, metrics)
        try:
            node = StoreNode(
                args.store,
                parts,
                transports=names,
                bind=args.bind,
                curve=curve,
                metrics=where,
                cache_index=not args.no_index_cache,
            )
        except (OSError, ValueError, RegionError) as e:
            print(f"error: store-node: {e}", file=sys.stderr)
            return 2
        except zmq.ZMQError as e:  # a --bind ZeroMQ cannot bind
            print(f"error: store-node: --bind {args.bind}: {e}", file=sys.stderr)
            return 2
        name = ""
        if client is not None:
            try:
                path = node.register(client, args.root)
                name = path.rsplit("/", 1)[1]
            except Exception as e:  # noqa: BLE001 - kazoo timeouts, auth failures: one line
                print(f"error: store-node: cannot advertise in ZooKeeper {args.zk}: {e}", file=sys.stderr)
                return 2
            metrics.identify(name)
        adv = node.advertisement(name)
        print(json.dumps(json.loads(adv.to_json())), flush=True)
        logger.info(
            "store node %s serving partitions %s of %s (%d bytes) over %s%s",
            name or "(not advertised)",
            list(node.partitions),
            node.store_dir,
            node.bytes,
            ", ".join(node.servers),
            " (CURVE)" if curve is not None else " (plaintext: --insecure)" if "tcp" in node.servers else "",
        )
        stop.wait()
        return 0
    finally:
        if client is not None:
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001 - leaving ZooKeeper is best effort
                pass
        if node is not None:
            node.close()
        if mserver is not None:
            mserver.shutdown()


def _server_keys(
    security: Security, client: KazooClient, root: str, metrics: StoreNodeMetrics
) -> CurveKeys | None:
    """CURVE server keys admitting the cluster's published keys and its readers' (``None``
    when ``--insecure``)."""
    from linkstream.containers.transport import CurveKeys
    from linkstream.scheduler.keyring import KeyRing
    from linkstream.store.node import StoreClients

    if security.public is None or security.secret is None:
        return None
    allow = StoreClients(KeyRing(client, root, extra=(security.public,)), client, root)
    return CurveKeys(
        security.public,
        security.secret,
        authorized_clients=allow,
        on_reject=metrics.on_reject("store"),
    )


__all__ = ["add_parser", "cmd_store_node"]
