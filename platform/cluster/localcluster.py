"""A whole cluster on one machine: ZooKeeper, coordinators and operator containers.

:class:`LocalCluster` starts each part as its own process (ZooKeeper through
``infra/zookeeper.sh``, the others as ``python -m linkstream.cli run --zk|container``),
logs each to ``DIR/logs/<name>.log`` and records them in ``DIR/cluster.json`` so that a
later command (``linkstream containers add``, ``infra/local-cluster stop``) can find and
change the same cluster.  Given an external ZooKeeper (``zk=HOST:PORT[/chroot]``) it
starts only coordinators and containers; tests use that with their ZooKeeper fixture.

Command line (``infra/local-cluster`` runs this module)::

    python -m linkstream.cluster.localcluster start N [--dir DIR] [--coordinators K]
        [--capacity C] [--session-timeout S] [--detach]
        [--store DIR [--store-nodes M] [--cache-mb MB]]
    python -m linkstream.cluster.localcluster stop|status [--dir DIR]
    python -m linkstream.cluster.localcluster add N | remove ID [--dir DIR]

Every coordinator serves the HTTP API (``linkstream coordinator`` is ``run --zk`` on a free
loopback port); ``start`` (two coordinators unless ``--coordinators K``) prints their URLs
and the API's admin token (``DIR/api-tokens.json``, given to every coordinator with
``--tokens-file``; none with ``--insecure``) with the other endpoints and, unless
``--detach``, stays in the foreground until Ctrl-C, then stops everything.

With ``--store DIR`` (a store directory written by ``linkstream load``) ``start`` also
starts ``--store-nodes M`` store nodes (default 1; ``linkstream store-node``, each holding
every partition, so M is the replication factor) before the containers, and every
container runs with ``--remote-store``: static graphs are read from the store nodes
instead of loaded into each container.

Security is on (:mod:`linkstream.containers.security`): ``start`` writes the cluster's
ZooKeeper credential to ``DIR/zk-auth`` (mode 0600; kept when the directory is reused) and
starts every process with ``--zk-auth-file DIR/zk-auth``.  The ZooKeeper it starts serves
TLS only (a private CA and server certificate in ``DIR/zk-tls/``); every process gets
``--zk-tls-ca DIR/zk-tls/ca.pem``.  The credential is the one
configured (``LINKSTREAM_CLUSTER_ZK_AUTH[_FILE]``: an external ZooKeeper's tree may already
be private to it), else a fresh random one; other commands on the cluster read it
(``linkstream status --dir DIR``, ``containers add|remove``, ``replay --zk HOSTS
--zk-auth-file DIR/zk-auth``).  ``--insecure`` starts an open cluster instead.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kazoo.client import KazooClient

from linkstream.config import LOCAL_CLUSTER_DIR
from linkstream.containers.security import Security
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.zkclient import ZkAuth, ZkTls

if TYPE_CHECKING:
    from linkstream.store.node import Advertisement

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
ZK_SCRIPT = REPO / "infra" / "zookeeper.sh"
DEFAULT_DIR = LOCAL_CLUSTER_DIR
STATE_FILE = "cluster.json"
AUTH_FILE = "zk-auth"
API_TOKENS_FILE = "api-tokens.json"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a child that exited is reaped)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # An exited process of another parent is a zombie until that parent (or init) reaps it.
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@dataclass
class ProcessRecord:
    """One process of the cluster."""

    name: str
    kind: str  # zookeeper | coordinator | container | storenode | autoscaler
    pid: int
    log: str


@dataclass
class ClusterState:
    """What ``DIR/cluster.json`` holds."""

    hosts: str
    own_zookeeper: bool
    session_timeout: float
    capacity: int
    root: str = DEFAULT_ROOT
    next_container: int = 1
    next_coordinator: int = 1
    processes: dict[str, ProcessRecord] = field(default_factory=dict)
    insecure: bool = False
    zk_auth_file: str = ""
    zk_tls_ca: str = ""
    store: str = ""
    store_cache_mb: float = 0.0
    next_store_node: int = 1
    api_tokens_file: str = ""
    coordinator_args: list[str] = field(default_factory=list)


class LocalCluster:
    """ZooKeeper, coordinators and containers as local processes.

    Args:
        directory: Where state and logs go.
        zk: External ZooKeeper (``HOST:PORT[/chroot]``); ``None`` starts one.
        session_timeout: ZooKeeper session timeout of coordinators and containers.
        capacity: Default query slots per container.
        python: Interpreter that runs the ``linkstream`` processes.
        insecure: Start every process with ``--insecure`` (open ZooKeeper, plaintext
            ZeroMQ) instead of the credential in ``DIR/zk-auth``.
        zk_auth: The credential to write there (default: the configured one, else a
            fresh random one).
        store: A store directory: :meth:`start` starts store nodes serving it and every
            container reads static graphs from them (``--remote-store``).
        store_nodes: How many store nodes :meth:`start` starts with ``store``.
        cache_mb: The containers' ``--cache-mb`` with ``store`` (default: theirs).
        api_token: Require a bearer token on the coordinators' HTTP API: :meth:`start`
            writes one admin token to ``DIR/api-tokens.json`` (mode 0600, kept when the
            directory is reused; :attr:`api_token` reads it) and starts every coordinator
            with ``--tokens-file`` (ignored with ``insecure``).
        coordinator_args: More ``run --zk`` flags for every coordinator this cluster starts
            (``--static``, ``--base``, ``--idle-ms`` ...).
    """

    def __init__(
        self,
        directory: str | Path = DEFAULT_DIR,
        *,
        zk: str | None = None,
        session_timeout: float = 4.0,
        capacity: int = 16,
        python: str = sys.executable,
        insecure: bool = False,
        zk_auth: ZkAuth | None = None,
        store: str | Path | None = None,
        store_nodes: int = 1,
        cache_mb: float | None = None,
        api_token: bool = False,
        coordinator_args: list[str] | None = None,
    ) -> None:
        self._zk_auth = zk_auth
        self._api_token = api_token and not insecure
        self._store_nodes = store_nodes if store is not None else 0
        self.dir = Path(directory)
        self.python = python
        self.state = ClusterState(zk or "", zk is None, session_timeout, capacity, insecure=insecure)
        if store is not None:
            self.state.store = str(Path(store).resolve())
            self.state.store_cache_mb = float(cache_mb or 0.0)
        self.state.coordinator_args = list(coordinator_args or [])
        self._security: Security | None = None
        #: seconds to wait for ZooKeeper (one-shot commands set the shorter setting)
        self.connect_timeout = 30.0

    # ------------------------------------------------------------------ state

    @classmethod
    def load(cls, directory: str | Path = DEFAULT_DIR) -> LocalCluster:
        """The cluster recorded in ``directory`` (raises ``FileNotFoundError``)."""
        body = json.loads((Path(directory) / STATE_FILE).read_text())
        procs = {k: ProcessRecord(**v) for k, v in body.pop("processes").items()}
        cluster = cls(directory)
        cluster.state = ClusterState(**body, processes=procs)
        return cluster

    def save(self) -> None:
        """Writes ``DIR/cluster.json``."""
        self.dir.mkdir(parents=True, exist_ok=True)
        body = asdict(self.state)
        tmp = self.dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(body, indent=1))
        tmp.replace(self.dir / STATE_FILE)

    @property
    def hosts(self) -> str:
        """ZooKeeper connection string (with chroot) of the cluster."""
        return self.state.hosts

    @property
    def auth_file(self) -> Path | None:
        """The credential file every process of the cluster uses (``None``: insecure)."""
        if self.state.insecure:
            return None
        return Path(self.state.zk_auth_file) if self.state.zk_auth_file else self.dir / AUTH_FILE

    @property
    def api_token(self) -> str | None:
        """The secret of the coordinators' admin API token (``None``: the API is open)."""
        if not self.state.api_tokens_file:
            return None
        doc = json.loads(Path(self.state.api_tokens_file).read_text(encoding="utf-8"))
        return str(doc[0]["secret"])

    def _ensure_api_token(self) -> None:
        if not self._api_token:
            return
        path = self.dir / API_TOKENS_FILE
        if not path.exists():
            import secrets

            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump([{"name": "admin", "scope": "admin", "secret": secrets.token_urlsafe(24)}], f)
        self.state.api_tokens_file = str(path.resolve())

    def write_api_env(self, url: str) -> Path:
        """Writes ``DIR/api.env`` (mode 0600): shell exports of ``API`` (``url``) and, with a
        token, ``LINKSTREAM_API_TOKEN`` (which ``linkstream queries`` reads)."""
        path = self.dir / "api.env"
        lines = [f"export API={url}"]
        token = self.api_token
        if token is not None:
            lines.append(f"export LINKSTREAM_API_TOKEN={token}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def _ensure_credential(self) -> None:
        self._ensure_api_token()
        path = self.auth_file
        if path is None:
            return
        if not path.exists():
            (self._zk_auth or _configured_auth() or ZkAuth.generate()).write(path)
        self.state.zk_auth_file = str(path.resolve())

    @property
    def security(self) -> Security:
        """What a process of this machine needs to use the cluster (the credential, own keys)."""
        if self._security is None:
            path = self.auth_file
            if path is None:
                self._security = Security.insecure()
            else:
                tls = ZkTls.from_files(self.state.zk_tls_ca) if self.state.zk_tls_ca else None
                self._security = Security.secure(ZkAuth.from_file(path), zk_tls=tls)
        return self._security

    def security_args(self) -> list[str]:
        """Command-line flags giving a ``linkstream`` process the cluster's credential."""
        path = self.auth_file
        if path is None:
            return ["--insecure"]
        tls = ["--zk-tls-ca", self.state.zk_tls_ca] if self.state.zk_tls_ca else []
        return ["--zk-auth-file", str(path), *tls]

    def pid(self, name: str) -> int:
        """PID of process ``name`` (``oc-1``, ``coord-1``, ``zookeeper``)."""
        return self.state.processes[name].pid

    def names(self, kind: str) -> list[str]:
        """Names of the recorded processes of one kind that still run."""
        return [n for n, p in sorted(self.state.processes.items()) if p.kind == kind and pid_alive(p.pid)]

    # ------------------------------------------------------------------ start

    def start(self, containers: int, coordinators: int = 1, wait: float = 60.0) -> None:
        """Starts ZooKeeper (unless external), ``coordinators`` and ``containers``."""
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self._ensure_credential()
        if self.state.own_zookeeper:
            self._start_zookeeper()
        self.save()
        if self._store_nodes:
            self.add_store_nodes(self._store_nodes, wait=wait)
        for _ in range(coordinators):
            self.start_coordinator()
        self.add_containers(containers, wait=wait)
        if coordinators:
            # coordinators publish their node (API URL, /metrics address) once their
            # ZooKeeper session and HTTP server are up, which may be after the containers
            self.wait_leader(self.api_urls(timeout=wait), timeout=wait)
            self.write_prometheus_targets()

    def _start_zookeeper(self) -> None:
        port = free_port()
        data = self.dir / "zookeeper"
        command = ["bash", str(ZK_SCRIPT), "--port", str(port), "--data-dir", str(data), "--tick-time", "500"]
        if not self.state.insecure:  # a TLS-only port: the credential never crosses in clear
            tls_dir = self.dir / "zk-tls"
            command += ["--tls-dir", str(tls_dir)]
            self.state.zk_tls_ca = str((tls_dir / "ca.pem").resolve())
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"ZooKeeper did not start: {result.stderr.strip()[-1000:]}")
        pid = int(result.stdout.strip().splitlines()[-1])
        self.state.hosts = f"127.0.0.1:{port}"
        self.state.processes["zookeeper"] = ProcessRecord(
            "zookeeper", "zookeeper", pid, str(data / "zookeeper.log")
        )

    def _spawn(self, name: str, kind: str, args: list[str]) -> ProcessRecord:
        log_path = self.dir / "logs" / f"{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [self.python, "-m", "linkstream.cli", *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        record = ProcessRecord(name, kind, proc.pid, str(log_path))
        self.state.processes[name] = record
        self.save()
        return record

    def start_coordinator(self, extra: list[str] | None = None) -> str:
        """Starts one more coordinator (a standby if one leads); returns its name.

        It is ``linkstream run --zk`` serving the HTTP API on a free loopback port
        (:meth:`api_urls`); ``extra`` arguments go to ``run`` (``--static``, ``--idle-ms`` ...).
        """
        name = f"coord-{self.state.next_coordinator}"
        self.state.next_coordinator += 1
        tick = min(1.0, self.state.session_timeout / 4)
        args = ["run", "--zk", self.hosts, "--id", name, "--root", self.state.root, "--port", "0"]
        args += ["--session-timeout", str(self.state.session_timeout), "--tick-interval", str(tick)]
        args += ["--metrics-port", "0", *self.security_args(), *self.state.coordinator_args, *(extra or [])]
        if self.state.api_tokens_file:
            args += ["--tokens-file", self.state.api_tokens_file]
        self._spawn(name, "coordinator", args)
        return name

    def add_containers(self, n: int, capacity: int | None = None, wait: float = 60.0) -> list[str]:
        """Starts ``n`` containers and waits until they are members; returns their ids."""
        ids = []
        for _ in range(n):
            cid = f"oc-{self.state.next_container}"
            self.state.next_container += 1
            args = ["container", "--zk", self.hosts, "--id", cid, "--root", self.state.root]
            args += ["--capacity", str(capacity or self.state.capacity)]
            args += ["--session-timeout", str(self.state.session_timeout), "--metrics-port", "0"]
            if self.state.store:
                args.append("--remote-store")
                if self.state.store_cache_mb:
                    args += ["--cache-mb", str(self.state.store_cache_mb)]
            self._spawn(cid, "container", [*args, *self.security_args()])
            ids.append(cid)
        if wait:
            self.wait_members(set(ids), wait)
            self.write_prometheus_targets()
        return ids

    def add_store_nodes(self, n: int, wait: float = 60.0) -> list[str]:
        """Starts ``n`` store nodes serving the cluster's store (every partition each) and
        waits until they are advertised in ZooKeeper; returns their names (``store-1`` ...)."""
        if not self.state.store:
            raise ValueError("this cluster has no store directory (start it with --store DIR)")
        names = []
        for _ in range(n):
            name = f"store-{self.state.next_store_node}"
            self.state.next_store_node += 1
            args = ["store-node", "--store", self.state.store, "--zk", self.hosts, "--root", self.state.root]
            args += ["--session-timeout", str(self.state.session_timeout), "--metrics-port", "0"]
            self._spawn(name, "storenode", [*args, *self.security_args()])
            names.append(name)
        if wait:
            self.wait_store_nodes(set(names), wait)
        return names

    def store_nodes(self) -> dict[str, int]:
        """The store nodes advertised right now: znode name -> pid."""
        client = self._client()
        try:
            return {name: adv.pid for name, adv in self._store_adverts(client).items()}
        finally:
            client.stop()
            client.close()

    def _store_adverts(self, client: KazooClient) -> dict[str, Advertisement]:
        from linkstream.store.node import NODES, Advertisement

        folder = f"{self.state.root.rstrip('/')}/{NODES}"
        out = {}
        for child in client.get_children(folder) if client.exists(folder) else []:
            try:
                data, _ = client.get(f"{folder}/{child}")
                out[child] = Advertisement.from_json(data, child)
            except Exception:  # noqa: BLE001 - gone meanwhile, or not an advertisement
                continue
        return out

    def wait_store_nodes(self, names: set[str], timeout: float) -> None:
        """Waits until the store nodes ``names`` are advertised (raises ``TimeoutError``)."""
        deadline = time.monotonic() + timeout
        pids = {self.state.processes[n].pid for n in names}
        while not pids <= set(self.store_nodes().values()):
            for name in names:
                record = self.state.processes[name]
                if not pid_alive(record.pid):
                    raise RuntimeError(f"store node {name} exited; see {record.log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"store nodes {sorted(names)} not advertised within {timeout:g}s")
            time.sleep(0.1)

    def start_autoscaler(self, bounds: str, driver: str = "local", extra: list[str] | None = None) -> str:
        """Starts ``linkstream autoscaler --autoscale BOUNDS`` on this cluster; returns its name.

        With ``driver="local"`` it adds containers to this cluster and drains them
        (recorded in ``DIR/cluster.json``: re-read it with :meth:`load`); ``extra``
        arguments go to the command (``--target-lag-ms``, ``--interval`` ...).
        """
        name = "autoscaler"
        args = ["autoscaler", "--zk", self.hosts, "--root", self.state.root, "--dir", str(self.dir)]
        args += ["--autoscale", bounds, "--autoscale-driver", driver, "--id", name, "--metrics-port", "0"]
        args += ["--session-timeout", str(self.state.session_timeout), *self.security_args(), *(extra or [])]
        self._spawn(name, "autoscaler", args)
        return name

    def write_prometheus_targets(self) -> Path:
        """Writes ``DIR/prometheus/targets.json``: every process's ``/metrics`` endpoint.

        ``infra/prometheus.yml`` reads it through ``file_sd_configs`` (the processes pick
        free ports, so the scrape targets change with every start).
        """
        from linkstream.scheduler.status import cluster_status, metrics_targets

        client = self._client()
        try:
            groups = metrics_targets(cluster_status(client, self.state.root))
            for name, adv in sorted(self._store_adverts(client).items()):
                if adv.metrics:
                    groups.append({"targets": [adv.metrics], "labels": {"role": "storenode", "id": name}})
        finally:
            client.stop()
            client.close()
        path = self.dir / "prometheus" / "targets.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups, indent=1))
        tmp.replace(path)  # Prometheus re-reads the file on change: never show it half written
        return path

    def _client(self) -> KazooClient:
        return self.security.connect(self.hosts, max(2.0, self.state.session_timeout), self.connect_timeout)

    def client(self) -> KazooClient:
        """A started kazoo client authenticated as the cluster's processes are (close it)."""
        return self._client()

    def members(self) -> set[str]:
        """Ids of the containers registered right now."""
        client = self._client()
        try:
            return set(Membership(client, self.state.root).members())
        finally:
            client.stop()
            client.close()

    def wait_leader(self, urls: dict[str, str], timeout: float) -> str:
        """Waits until one of the coordinators at ``urls`` leads with its live run up (its
        ``/status`` says ``"role": "leader"``: it takes registrations and pushes); returns its
        id. A cluster whose ``start`` returned answers its first request, not 503.

        Raises:
            TimeoutError: No coordinator led within ``timeout`` seconds.
        """
        import httpx

        token = self.api_token
        headers = {"Authorization": "Bearer " + token} if token else {}
        deadline = time.monotonic() + timeout
        seen: dict[str, str] = {}
        while True:
            for cid, url in sorted(urls.items()):
                try:
                    r = httpx.get(url.rstrip("/") + "/status", headers=headers, timeout=5.0)
                    role = str(r.json().get("role")) if r.status_code == 200 else f"HTTP {r.status_code}"
                except (httpx.HTTPError, ValueError) as exc:
                    role = type(exc).__name__
                if role == "leader":
                    return cid
                seen[cid] = role
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no coordinator leads after {timeout:g} s ({', '.join(f'{c}: {r}' for c, r in seen.items())})"
                )
            time.sleep(0.1)

    def api_urls(self, timeout: float = 0.0) -> dict[str, str]:
        """The HTTP API URL of every running coordinator (``run --zk``), by coordinator id.

        Waits up to ``timeout`` seconds until every coordinator recorded as running has
        published its URL.
        """
        from linkstream.scheduler.layout import ClusterLayout, decode

        deadline = time.monotonic() + timeout
        layout = ClusterLayout(self.state.root)
        client = self._client()
        try:
            while True:
                urls = {}
                for cid in (
                    client.get_children(layout.coordinators) if client.exists(layout.coordinators) else []
                ):
                    try:
                        data, _ = client.get(layout.coordinator(cid))
                    except Exception:  # gone meanwhile
                        continue
                    url = decode(data).get("api")
                    if url:
                        urls[cid] = str(url)
                if set(self.names("coordinator")) <= set(urls) or time.monotonic() > deadline:
                    return urls
                time.sleep(0.1)
        finally:
            client.stop()
            client.close()

    def wait_members(self, ids: set[str], timeout: float) -> None:
        """Waits until every id in ``ids`` is a member (raises ``TimeoutError``)."""
        deadline = time.monotonic() + timeout
        while not ids <= self.members():
            for cid in ids:
                record = self.state.processes.get(cid)
                if record is not None and not pid_alive(record.pid):
                    raise RuntimeError(f"container {cid} exited; see {record.log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"containers {sorted(ids)} did not register within {timeout:g}s")
            time.sleep(0.1)

    # ------------------------------------------------------------------ change and stop

    def remove_container(self, cid: str, timeout: float = 120.0) -> None:
        """Drains ``cid`` (the coordinator moves its queries away) and waits until it exits."""
        client = self._client()
        try:
            membership = Membership(client, self.state.root)
            membership.request_drain(cid)
            deadline = time.monotonic() + timeout
            while cid in membership.members():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"container {cid} did not drain within {timeout:g}s")
                time.sleep(0.1)
        finally:
            client.stop()
            client.close()
        record = self.state.processes.get(cid)
        if record is not None:
            _terminate(record.pid, 5.0)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Sends ``sig`` to process ``name`` (tests use it to crash a part)."""
        pid = self.pid(name)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGKILL:
            _reap(pid, 5.0)

    def stop(self) -> None:
        """Stops containers, then coordinators, then ZooKeeper (each kind at once)."""
        for kind in ("autoscaler", "container", "coordinator", "storenode", "zookeeper"):
            _terminate_all([r.pid for r in self.state.processes.values() if r.kind == kind], 5.0)
        self.save()

    def describe(self) -> str:
        """Human-readable endpoints and processes."""
        lines = [f"zookeeper: {self.hosts}  (state: {self.dir / STATE_FILE})"]
        auth = self.auth_file
        lines.append(
            "security: insecure (open ZooKeeper, plaintext ZeroMQ)"
            if auth is None
            else f"security: ZooKeeper credential in {auth} (pass --zk-auth-file {auth}); CURVE on"
        )
        targets = self.dir / "prometheus" / "targets.json"
        if targets.exists():
            lines.append(f"metrics: /metrics endpoints in {targets} (infra/prometheus.yml reads it)")
        for name, record in sorted(self.state.processes.items()):
            status = "running" if pid_alive(record.pid) else "exited"
            lines.append(f"{record.kind:<12} {name:<10} pid {record.pid:<8} {status:<8} log {record.log}")
        return "\n".join(lines)


def _configured_auth() -> ZkAuth | None:
    """The credential ``[cluster] zk_auth`` / ``zk_auth_file`` names, if any."""
    from linkstream.config import load

    cfg = load().cluster
    if cfg.zk_auth:
        return ZkAuth.parse(cfg.zk_auth, "LINKSTREAM_CLUSTER_ZK_AUTH")
    if cfg.zk_auth_file:
        return ZkAuth.from_file(cfg.zk_auth_file)
    return None


def _reap(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _terminate(pid: int, timeout: float) -> None:
    _terminate_all([pid], timeout)


def _terminate_all(pids: list[int], timeout: float) -> None:
    """SIGTERM to every process, then SIGKILL to those still running after ``timeout``."""
    live = [pid for pid in pids if pid_alive(pid)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in live:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while live and time.monotonic() < deadline:
            live = [pid for pid in live if pid_alive(pid)]
            time.sleep(0.05)
        if not live:
            return


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``infra/local-cluster`` (:mod:`linkstream.cluster.localcluster_cli`)."""
    from linkstream.cluster.localcluster_cli import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
