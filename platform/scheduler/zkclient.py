"""Every LinkStream ZooKeeper client is made here: digest authentication and private ACLs.

A secure cluster shares one digest credential ``user:password`` (:class:`ZkAuth`).  Each
process's client authenticates with it (``auth_data``) and creates every node with
:attr:`ZkAuth.acl` as its ``default_acl``: all permissions for that digest identity and
nothing for anyone else, so an unauthenticated client can neither read, create, change
nor delete a node under the cluster root (ZooKeeper checks ``create``/``delete`` on the
parent, ``read``/``write`` on the node itself).  kazoo applies ``default_acl`` to
``create``, ``ensure_path`` (with ``makepath`` parents) and transaction creates, and the
election and lock recipes go through those, so no call site passes an ACL itself.

:class:`ZkTls` encrypts the connection: the client verifies the server's certificate
against a CA file (``--zk-tls-ca``) and may present its own certificate; the servers of
a secure deployment open only a TLS port (``infra/zookeeper.sh --tls-dir``).

``auth=None`` is the explicit insecure mode (``--insecure``): open ACLs, no
authentication, as before.  The command line decides which one a process gets
(``linkstream.containers.security``); nothing here reads the environment.

:func:`lock_down` gives an existing tree (made by insecure processes, or by an older
version) the private ACL, node by node; a node someone else locked cannot be taken over
and is reported.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, make_digest_acl

logger = logging.getLogger(__name__)

#: what a process without credentials says (one line, how to get them)
CREDENTIALS_HINT = (
    "no ZooKeeper credential for the cluster: give --zk-auth-file FILE (one line user:password, mode 0600; "
    "a local cluster writes DIR/zk-auth) or set LINKSTREAM_CLUSTER_ZK_AUTH=user:password "
    "(every process of a cluster uses the same one); --insecure runs without authentication or encryption"
)


class ZkAuthError(ValueError):
    """A credential that cannot be used; ``str(err)`` says where it came from."""


@dataclass(frozen=True)
class ZkAuth:
    """The cluster's ZooKeeper digest credential.

    Attributes:
        user: Digest user name (no ``:``).
        password: Its password.
    """

    user: str
    password: str = field(repr=False)

    @classmethod
    def parse(cls, text: str, where: str = "credential") -> ZkAuth:
        """``user:password`` (surrounding white space ignored).

        Raises:
            ZkAuthError: Not of that form, or either part empty.
        """
        user, sep, password = text.strip().partition(":")
        if not sep or not user or not password:
            raise ZkAuthError(f"{where}: expected user:password")
        return cls(user, password)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ZkAuth:
        """Reads the first line of ``path``; a file others may read is used with a warning.

        Raises:
            ZkAuthError: The file cannot be read or holds no ``user:password``.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
            mode = os.stat(path).st_mode
        except OSError as e:
            raise ZkAuthError(f"{path}: cannot read the ZooKeeper credential ({e.strerror or e})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            logger.warning("%s: the ZooKeeper credential is readable by others (chmod 600 it)", path)
        lines = text.strip().splitlines()
        return cls.parse(lines[0] if lines else "", str(path))

    @classmethod
    def generate(cls, user: str = "linkstream") -> ZkAuth:
        """A fresh random credential (what a local cluster uses)."""
        return cls(user, secrets.token_urlsafe(24))

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Writes ``user:password`` to ``path`` with mode 0600 (created so, never wider)."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{self.user}:{self.password}\n")
        os.chmod(p, 0o600)
        return p

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: the digest scheme with this credential."""
        return [("digest", f"{self.user}:{self.password}")]

    @property
    def acl(self) -> list[ACL]:
        """Every node's ACL: all permissions for this digest identity, none for anyone else."""
        return [make_digest_acl(self.user, self.password, all=True)]


@dataclass(frozen=True)
class ZkTls:
    """TLS to ZooKeeper: the CA that signed the servers' certificates, and optionally this
    client's own certificate and key (servers started with ``ssl.clientAuth=need``).

    Attributes:
        ca: PEM file of the CA the server certificate must chain to.
        cert: PEM file of the client certificate, or ``None``.
        key: PEM file of its private key, or ``None``.
    """

    ca: str
    cert: str | None = None
    key: str | None = None

    @classmethod
    def from_files(cls, ca: str, cert: str | None = None, key: str | None = None) -> ZkTls:
        """Checks that the files can be read.

        Raises:
            ZkAuthError: A file is missing or unreadable, or only one of ``cert``/``key``.
        """
        if bool(cert) != bool(key):
            raise ZkAuthError("ZooKeeper TLS: give both a client certificate and its key, or neither")
        for what, path in (("CA", ca), ("client certificate", cert), ("client key", key)):
            if not path:
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(4096)
            except OSError as e:
                raise ZkAuthError(
                    f"{path}: cannot read the ZooKeeper TLS {what} ({e.strerror or e})"
                ) from None
            if b"-----BEGIN" not in head:
                raise ZkAuthError(f"{path}: the ZooKeeper TLS {what} is not a PEM file")
        return cls(str(ca), str(cert) if cert else None, str(key) if key else None)

    @property
    def kazoo_args(self) -> dict[str, object]:
        """``KazooClient`` arguments: TLS with certificate verification."""
        args: dict[str, object] = {"use_ssl": True, "verify_certs": True, "ca": self.ca}
        if self.cert:
            args.update(certfile=self.cert, keyfile=self.key)
        return args


def reconnect_retry(timeout: float) -> dict[str, float]:
    """How a client tries to reach ZooKeeper again after losing the connection.

    kazoo doubles the pause between attempts up to an hour by default, so after an outage
    of a minute a process could wait that long again before its next attempt, and its
    session, which the server restores when it restarts from its data directory and
    expires only if the client does not come back within the session timeout, would expire
    needlessly.  The pause is capped at a quarter of the session timeout (0.1 s to 1 s, then
    +-40% jitter): once ZooKeeper is back every process reconnects well within its session.
    """
    return {
        "max_tries": -1,
        "delay": 0.1,
        "backoff": 2,
        "max_jitter": 0.4,
        "max_delay": max(0.1, min(1.0, timeout / 4)),
    }


def call_within(client: KazooClient, call: str, *args: Any, timeout: float, **kw: Any) -> Any:
    """``client.<call>(*args, **kw)`` of kazoo, answered within ``timeout`` seconds.

    While its connection is lost kazoo holds a call until the connection is back (seconds to
    minutes).  A caller that answers someone (an HTTP request) uses this instead.

    Raises:
        ConnectionLoss: At once when the client is not connected, or when ZooKeeper did not
            answer in time (a :class:`KazooException`, as kazoo raises on a lost connection).
    """
    if not client.connected:
        raise ConnectionLoss("ZooKeeper is unreachable")
    try:
        return getattr(client, call + "_async")(*args, **kw).get(timeout=timeout)
    except KazooTimeoutError:
        raise ConnectionLoss(f"ZooKeeper did not answer within {timeout:g} s") from None


def make_client(
    hosts: str, auth: ZkAuth | None, timeout: float = 10.0, tls: ZkTls | None = None, **kwargs: object
) -> KazooClient:
    """A kazoo client (not started) for ``hosts`` with ``auth``'s credential and ACL.

    Args:
        hosts: ``HOST:PORT[,HOST:PORT][/chroot]``.
        auth: The cluster credential; ``None``: insecure (open ACLs, no authentication).
        timeout: Session timeout in seconds.
        tls: Encrypt the connection and verify the server (``None``: plaintext).
        kwargs: More ``KazooClient`` arguments (``connection_retry`` defaults to
            :func:`reconnect_retry`).
    """
    if tls is not None:
        kwargs = {**tls.kazoo_args, **kwargs}
    kwargs.setdefault("connection_retry", reconnect_retry(timeout))
    if auth is None:
        return KazooClient(hosts=hosts, timeout=timeout, **kwargs)
    return KazooClient(
        hosts=hosts,
        timeout=timeout,
        auth_data=auth.auth_data,
        default_acl=auth.acl,
        **kwargs,
    )


def connect(
    hosts: str,
    auth: ZkAuth | None,
    timeout: float = 10.0,
    start_timeout: float = 30.0,
    tls: ZkTls | None = None,
    **kwargs: object,
) -> KazooClient:
    """:func:`make_client`, started (connected and authenticated).

    Raises:
        kazoo.handlers.threading.KazooTimeoutError: No connection within ``start_timeout``.
        kazoo.exceptions.AuthFailedError: The server refused the credential.
    """
    client = make_client(hosts, auth, timeout, tls, **kwargs)
    client.start(timeout=start_timeout)
    return client


def lock_down(client: KazooClient, root: str, auth: ZkAuth | None) -> list[str]:
    """Gives every node of the tree at ``root`` that is not private yet the private ACL.

    Args:
        client: A started client authenticated with ``auth``.
        root: The cluster root (inside the client's chroot).
        auth: The credential; ``None`` does nothing (insecure mode).

    Returns:
        Paths whose ACL could not be changed (someone else's private node): reported, left.
    """
    if auth is None:
        return []
    acl = auth.acl
    stuck: list[str] = []
    todo = [root]
    while todo:
        path = todo.pop()
        try:
            current, _ = client.get_acls(path)
            if list(current) != acl:
                client.set_acls(path, acl)
                logger.warning("ZooKeeper node %s had ACL %s; made private", path, _describe(current))
            todo.extend(f"{path.rstrip('/')}/{c}" for c in client.get_children(path))
        except NoNodeError:
            continue
        except NoAuthError:
            stuck.append(path)
        except KazooException:
            logger.warning("cannot check the ACL of %s", path, exc_info=True)
    for path in stuck:
        logger.error("ZooKeeper node %s belongs to another identity: LinkStream cannot secure it", path)
    return stuck


def is_open(acl: list[ACL]) -> bool:
    """Whether an ACL lets anyone (``world:anyone``) do anything."""
    return any(a.id.scheme == "world" for a in acl)


def _describe(acl: list[ACL]) -> str:
    return ", ".join(f"{a.id.scheme}:{a.id.id}={a.perms}" for a in acl) or "none"


__all__ = [
    "CREDENTIALS_HINT",
    "OPEN_ACL_UNSAFE",
    "ZkAuth",
    "ZkAuthError",
    "ZkTls",
    "connect",
    "is_open",
    "lock_down",
    "make_client",
]
