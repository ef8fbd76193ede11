"""A read-only snapshot of a cluster, for ``linkstream status``.

Reads membership, the assignment table, the query registry, the leader election and the
run node once; nothing is watched or written.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode
from linkstream.scheduler.load import autoscaler_nodes
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.registry import QueryNotFoundError, QueryRegistry
from linkstream.scheduler.runs import RunNode


def cluster_status(client: KazooClient, root: str = DEFAULT_ROOT) -> dict[str, Any]:
    """Containers, tasks, queries, coordinators and the running replay, as JSON-ready data.

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        root: Cluster root inside the chroot.
    """
    layout = ClusterLayout(root)
    members = Membership(client, root).members()
    table = AssignmentTable(client, root).all()
    registry = QueryRegistry(client, root)
    names: dict[str, str] = {}
    queries = []
    for qid in registry.list():
        try:
            record = registry.get(qid)
        except QueryNotFoundError:
            continue
        names[qid] = str(record.metadata.get("name", qid))
        queries.append(
            {"id": qid, "name": names[qid], "language": record.language, "run": record.metadata.get("run")}
        )
    tasks = [
        {
            "task": tid,
            # operator placement's producer tasks (``p-<run>-<channel>``) serve many queries
            "kind": "producer" if tid.startswith("p-") else "query",
            "query": names.get(tid),
            "container": a.container,
            "migrating_from": a.migrating_from,
            "stateful": a.task.stateful,
        }
        for tid, a in table.items()
    ]
    containers = [
        {
            "id": m.id,
            "address": m.address,
            "capacity": m.capacity,
            "draining": m.draining,
            "pid": m.meta.get("pid"),
            "metrics": m.meta.get("metrics"),
            "tasks": sorted(t for t, a in table.items() if a.container == m.id),
        }
        for m in members.values()
    ]
    try:
        contenders = client.Election(layout.leader).contenders()
    except NoNodeError:
        contenders = []
    run = RunNode(client, root).get()
    return {
        "coordinator_nodes": coordinator_nodes(client, root),
        "autoscalers": autoscaler_nodes(client, root),
        "containers": containers,
        "tasks": tasks,
        "queries": queries,
        "coordinators": contenders,
        "leader": contenders[0] if contenders else None,
        "run": None if run is None else {"id": run.id, "driver": run.driver, "queries": len(run.queries)},
    }


def coordinator_nodes(client: KazooClient, root: str = DEFAULT_ROOT) -> list[dict[str, Any]]:
    """The live coordinators' advertised nodes: ``{"id", "pid", "metrics", ...}`` each."""
    layout = ClusterLayout(root)
    try:
        names = sorted(client.get_children(layout.coordinators))
    except NoNodeError:
        return []
    out = []
    for name in names:
        try:
            data, _ = client.get(layout.coordinator(name))
            body = decode(data)
        except (NoNodeError, ValueError):
            continue
        out.append({"id": name, **body})
    return out


def metrics_targets(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Prometheus ``file_sd`` target groups of every process that serves ``/metrics``."""
    groups = []
    for c in status["containers"]:
        if c.get("metrics"):
            groups.append({"targets": [c["metrics"]], "labels": {"role": "container", "id": c["id"]}})
    for c in status.get("coordinator_nodes", []):
        if c.get("metrics"):
            groups.append({"targets": [c["metrics"]], "labels": {"role": "coordinator", "id": c["id"]}})
    for c in status.get("autoscalers", []):
        if c.get("metrics"):
            groups.append({"targets": [c["metrics"]], "labels": {"role": "autoscaler", "id": c["id"]}})
    return groups


def format_status(status: dict[str, Any]) -> str:
    """The snapshot as a few aligned text tables."""
    out = [f"leader: {status['leader'] or '-'}   coordinators: {', '.join(status['coordinators']) or '-'}"]
    run = status["run"]
    out.append(f"run: {run['id']} ({run['queries']} queries, driver {run['driver']})" if run else "run: -")
    out.append(f"containers ({len(status['containers'])}):")
    for c in status["containers"]:
        flag = " draining" if c["draining"] else ""
        metrics = f"  metrics {c['metrics']}" if c.get("metrics") else ""
        out.append(
            f"  {c['id']:<12} {c['address']:<24} {len(c['tasks'])}/{c['capacity']} tasks{flag}{metrics}"
        )
    for c in status.get("coordinator_nodes", []):
        role = "leader" if c["id"] == status["leader"] else "standby"
        out.append(
            f"coordinator {c['id']} ({role}) pid {c.get('pid', '-')} metrics {c.get('metrics') or '-'}"
        )
    for c in status.get("autoscalers", []):
        out.append(
            f"autoscaler {c['id']} driver {c.get('driver', '-')} pid {c.get('pid', '-')} "
            f"metrics {c.get('metrics') or '-'}"
        )
    out.append(f"tasks ({len(status['tasks'])}):")
    for t in status["tasks"]:
        move = f" <- {t['migrating_from']}" if t["migrating_from"] else ""
        what = t["query"] or ("(shared producer)" if t.get("kind") == "producer" else "?")
        out.append(f"  {t['task']:<24} {what:<28} {t['container'] or 'pending'}{move}")
    out.append(f"queries ({len(status['queries'])}):")
    for q in status["queries"]:
        out.append(f"  {q['id']:<24} {q['name']:<28} {q['language']}")
    return "\n".join(out)
