"""``linkstream replay --cluster N``: a local cluster's live service replays the files.

The replay starts a throw-away local cluster (ZooKeeper, one coordinator serving the HTTP
API, N operator containers; secure unless ``--insecure``, with an API token of its own)
and is a client of its API (:func:`linkstream.cluster.apireplay.replay_through_api`):
the queries are registered in one batch, the files pushed through ``POST /streams`` and
the results read from ``GET /queries/{name}/results.jsonl`` -- the same ingest and result
path as ``linkstream run --zk``.  ``--lateness``, ``--placement operators``, ``--route
broadcast`` and ``--no-affinity`` are rules of the replay driver
(:mod:`linkstream.cluster.replay`, what ``replay --zk`` runs): with one of them
``--cluster N`` runs that driver on the local cluster instead (:func:`needs_driver`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from linkstream.cluster.localcluster import LocalCluster

#: a coordinator serving a replay keeps every stream from holding back reports (the
#: client merges the files by time and sets the watermarks) and its results for a day
_COORDINATOR_FLAGS = ["--idle-ms", "0", "--results-retention", "86400", "--log-level", "warning"]


def start_service(
    containers: int,
    flags: list[str],
    *,
    coordinators: int = 1,
    insecure: bool = False,
    capacity: int = 16,
    prefix: str = "linkstream-cluster-",
) -> tuple[LocalCluster, str] | str:
    """A throw-away local cluster whose coordinators run with ``flags`` and the URL of its
    leader's API (the URL of any coordinator if none leads yet), or one line saying why not
    (its processes are stopped then, their logs kept)."""
    from linkstream.api.client import ApiError, Client
    from linkstream.cluster.localcluster import LocalCluster

    cluster = LocalCluster(
        tempfile.mkdtemp(prefix=prefix),
        capacity=capacity,
        insecure=insecure,
        api_token=True,
        coordinator_args=[*_COORDINATOR_FLAGS, *flags],
    )
    try:
        cluster.start(containers, coordinators)
        urls = cluster.api_urls(timeout=30)
    except (RuntimeError, TimeoutError) as e:
        cluster.stop()
        return f"local cluster did not start: {e} (logs in {cluster.dir})"
    if not urls:
        cluster.stop()
        return f"local cluster did not start: no coordinator serves the API (logs in {cluster.dir})"
    url = sorted(urls.values())[0]
    try:
        with Client(url, token=cluster.api_token, timeout=10.0) as client:
            url = str(client.status().get("leader_api") or url)  # pushes then skip a forwarding hop
    except (ApiError, OSError, ValueError):
        pass
    return cluster, url


def needs_driver(args: argparse.Namespace) -> bool:
    """Whether ``replay --cluster`` needs the replay driver (its options are not the service's)."""
    return bool(
        getattr(args, "placement", "queries") != "queries"
        or getattr(args, "route", "streams") != "streams"
        or getattr(args, "no_affinity", False)
        or (args.lateness or 0) > 0
    )


def cmd_replay_live(args: argparse.Namespace, log: Callable[[str], None]) -> int:
    """``linkstream replay --cluster N`` through the live service of a local cluster."""
    from linkstream.api.client import Client
    from linkstream.cli.args import err, finish_replay, split_binding, stream_bindings
    from linkstream.cluster.apireplay import ApiReplayError, replay_through_api
    from linkstream.engine.embedded import Engine
    from linkstream.query.continuous import parse_continuous
    from linkstream.query.errors import QueryError
    from linkstream.rdf.dictionary import open_dictionary
    from linkstream.rdf.eventtime import DEFAULT_MAX_TIME_JUMP_MS

    flags = ["--base", args.base, "--default-step", str(args.default_step)]
    for arg in args.static:
        iri, path = split_binding(arg, args.base)
        if not os.path.exists(path):
            return err(f"static graph file {path!r} does not exist")
        flags += ["--static", f"{iri}={os.path.abspath(path)}" if iri else os.path.abspath(path)]
    streams = stream_bindings(args.stream, args.base)
    if isinstance(streams, str):
        return err(streams)
    scratch = Engine(default_step=args.default_step, log_fn=lambda _msg: None)
    queries = []
    for path in args.query:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            stem = os.path.splitext(os.path.basename(path))[0]
            cq = parse_continuous(text, default_name=stem, base=args.base, source=path)
            queries.append(scratch.register(cq))  # errors as in embedded mode, before any cluster starts
        except (OSError, UnicodeDecodeError) as e:
            return err(f"cannot read query {path}: {e}")
        except QueryError as e:
            msg = str(e)
            return err(msg if msg.startswith(path) else f"{path}: {msg}")
    if len({q.name for q in queries}) != len(queries):
        return err("query names must be unique in a cluster replay")
    try:
        dictionary = open_dictionary(args.dictionary)
    except (ValueError, OSError) as e:
        return err(str(e))
    # room for every query even on one container; the scheduler still spreads them
    started = start_service(args.cluster, flags, insecure=args.insecure, capacity=max(16, len(queries)))
    if isinstance(started, str):
        dictionary.close()
        err(started)
        return 1  # a runtime failure, not a usage error
    cluster, url = started
    out = None
    done = False
    try:
        if not args.quiet:
            log(cluster.describe())
            log(f"api: {url}")
        out = open(args.out, "w", encoding="utf-8") if args.out != "-" else sys.stdout
        with Client(url, token=cluster.api_token, timeout=max(60.0, args.answer_timeout)) as client:
            result = replay_through_api(
                client,
                queries,
                streams,
                out,
                token=cluster.api_token,
                dictionary=dictionary,
                max_reports=args.max_reports,
                max_time_jump_ms=getattr(args, "max_time_jump", DEFAULT_MAX_TIME_JUMP_MS),
                log=log,
                result_timeout=max(60.0, args.answer_timeout),
            )
            containers = result.containers
        done = True
    except ApiReplayError as e:
        err(f"{e} (logs in {cluster.dir})")
        return 1
    finally:
        if out is not None and out is not sys.stdout:
            out.close()
        cluster.stop()
        if done:  # else its logs say what went wrong
            shutil.rmtree(cluster.dir, ignore_errors=True)
        dictionary.close()
    finish_replay(
        args,
        result.replay,
        log,
        where=(
            f"through the API of a local cluster of {len(containers)} container(s): "
            f"{result.requests} requests, {result.replay.rows} result rows"
        ),
        stats={
            "path": "api",
            "containers": containers,
            "requests": result.requests,
            "chunks": result.chunks,
            "body_bytes": result.body_bytes,
            "reports": result.reports,
            "lost": [],
        },
    )
    return 0
