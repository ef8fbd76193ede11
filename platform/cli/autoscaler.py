"""``linkstream autoscaler``: its flags and what it does (scale a cluster's containers on its
load; the decisions are :mod:`linkstream.scheduler.autoscale`, the drivers
:mod:`linkstream.cluster.autoscaler`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from linkstream.cli.clusterproc import (
    cluster_security,
    exit_if_stuck,
    refuse_bad_options,
    setup_logging,
    stop_on_signals,
)


def _bounds(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        bounds = int(lo), int(hi if sep else lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN:MAX, got {text!r}") from None
    if not 0 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"expected 0 <= MIN <= MAX, got {text!r}")
    return bounds


def add_autoscaler_parser(
    sub: argparse._SubParsersAction, zk_options: Callable[..., None], default_dir: str
) -> None:
    """``linkstream autoscaler``: its flags (``cli/main.py`` calls this)."""
    ap = sub.add_parser(
        "autoscaler",
        help="scale the cluster's containers on its load (tick lag, queue, busy time)",
        description="Reads the cluster's load signals from ZooKeeper, decides with hysteresis and "
        "cool-downs, and adds or drains containers through a driver. Several may run: one is "
        "elected and acts.",
    )
    zk_options(ap, required=False)
    ap.add_argument(
        "--autoscale", type=_bounds, required=True, metavar="MIN:MAX", help="bounds on the container count"
    )
    ap.add_argument(
        "--autoscale-driver",
        choices=["local", "aws", "none"],
        default="none",
        help="local: processes of the local cluster in --dir; aws: the EC2 autoscaling group --group; "
        "none: only export the recommendation (linkstream_autoscaler_desired_containers); default none",
    )
    ap.add_argument("--id", default=None, help="name in the autoscalers' election (default host-pid)")
    ap.add_argument(
        "--interval", type=float, default=2.0, metavar="S", help="seconds between rounds (default 2)"
    )
    ap.add_argument(
        "--target-lag-ms", type=float, default=5000.0, help="tick lag above which to scale out (default 5000)"
    )
    ap.add_argument(
        "--low-lag-ms",
        type=float,
        default=None,
        help="tick lag at or below which to scale in (default target/4)",
    )
    ap.add_argument("--queue-high", type=int, default=10_000, help="queued elements that count as pressure")
    ap.add_argument("--busy-high", type=float, default=0.8, help="mean container busy fraction of pressure")
    ap.add_argument("--busy-low", type=float, default=0.3, help="mean busy fraction below which it is calm")
    ap.add_argument(
        "--out-after", type=float, default=10.0, metavar="S", help="pressure lasting this long scales out"
    )
    ap.add_argument(
        "--in-after", type=float, default=60.0, metavar="S", help="calm lasting this long scales in"
    )
    ap.add_argument(
        "--out-cooldown", type=float, default=30.0, metavar="S", help="seconds after an action before out"
    )
    ap.add_argument(
        "--in-cooldown", type=float, default=120.0, metavar="S", help="seconds after an action before in"
    )
    ap.add_argument("--step-out", type=int, default=1, help="containers added per scale-out (default 1)")
    local = ap.add_argument_group("local driver")
    local.add_argument("--dir", default=default_dir, help="local cluster directory (default %(default)s)")
    local.add_argument("--capacity", type=int, default=None, help="query slots of added containers")
    aws = ap.add_argument_group("aws driver (boto3 reads AWS credentials and region the usual way)")
    aws.add_argument("--group", default=None, help="name of the containers' EC2 autoscaling group")
    aws.add_argument("--hook", default="drain", help="its termination lifecycle hook (default drain)")
    aws.add_argument("--region", default=None, help="AWS region (default: boto3's)")
    aws.add_argument(
        "--aws-endpoint-url", default=None, help="another autoscaling API endpoint (tests: moto)"
    )
    ap.set_defaults(func=cmd_autoscaler)


def cmd_autoscaler(args: argparse.Namespace) -> int:
    """``linkstream autoscaler``: rounds of read, decide, act until SIGTERM/SIGINT."""
    from linkstream.cluster.autoscaler import AutoscalerService, AwsDriver, LocalDriver, RecommendDriver
    from linkstream.cluster.localcluster import LocalCluster
    from linkstream.metrics import AutoscalerMetrics, serve_metrics
    from linkstream.scheduler.autoscale import AutoscalePolicy
    from linkstream.scheduler.membership import Membership

    if refuse_bad_options(args):
        return 2
    lo, hi = args.autoscale
    try:
        policy = AutoscalePolicy(
            min_containers=lo,
            max_containers=hi,
            target_lag_ms=args.target_lag_ms,
            low_lag_ms=args.low_lag_ms,
            queue_high=args.queue_high,
            busy_high=args.busy_high,
            busy_low=args.busy_low,
            out_after_s=args.out_after,
            in_after_s=args.in_after,
            out_cooldown_s=args.out_cooldown,
            in_cooldown_s=args.in_cooldown,
            step_out=args.step_out,
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    cluster = None
    if args.autoscale_driver == "local" or not args.zk:
        try:
            cluster = LocalCluster.load(args.dir)
        except FileNotFoundError:
            what = "the local driver needs" if args.autoscale_driver == "local" else "no --zk and no"
            print(f"error: {what} a local cluster in {args.dir}", file=sys.stderr)
            return 2
    if args.autoscale_driver == "aws" and not args.group:
        print("error: --autoscale-driver aws needs --group (the autoscaling group's name)", file=sys.stderr)
        return 2
    hosts = args.zk or (cluster.hosts if cluster is not None else "")
    security = (
        cluster.security
        if cluster is not None and not (args.zk or args.insecure or args.zk_auth_file)
        else cluster_security(args)
    )
    if security is None:
        return 2
    setup_logging(args.log_level)
    client = security.connect(hosts, args.session_timeout)
    identifier = args.id or f"{os.uname().nodename}-{os.getpid()}"
    metrics = AutoscalerMetrics()
    client.add_listener(metrics.zookeeper_state)
    meta: dict[str, object] = {
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "driver": args.autoscale_driver,
    }
    mserver = None
    if args.metrics_port is not None:
        mserver, mport = serve_metrics(metrics.registry, args.metrics_port)
        meta["metrics"] = f"127.0.0.1:{mport}"
    membership = Membership(client, args.root)
    if args.autoscale_driver == "local":
        assert cluster is not None
        driver: LocalDriver | AwsDriver | RecommendDriver = LocalDriver(cluster, membership, args.capacity)
    elif args.autoscale_driver == "aws":
        import boto3

        asg = boto3.client("autoscaling", region_name=args.region, endpoint_url=args.aws_endpoint_url)
        driver = AwsDriver(asg, args.group, membership, hook=args.hook)
    else:
        driver = RecommendDriver()
    service = AutoscalerService(
        client,
        driver,
        policy,
        root=args.root,
        interval=args.interval,
        metrics=metrics,
        identifier=identifier,
        meta=meta,
    )
    print(
        f"autoscaler {identifier}: {lo}..{hi} containers, driver {args.autoscale_driver}"
        + (f", metrics at {meta['metrics']}" if "metrics" in meta else ""),
        file=sys.stderr,
        flush=True,
    )
    try:
        status = service.serve(stop_on_signals())
    finally:
        if mserver is not None:
            mserver.shutdown()
        try:
            client.stop()
            client.close()
        except Exception:
            status = -1
    return exit_if_stuck(status)
